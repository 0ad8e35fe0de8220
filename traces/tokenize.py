"""Turn text records into a tokenized block for one tokenizer family (batched, multi-threaded)."""

from __future__ import annotations

import os

import numpy as np

from traces.cache import TokenizedBlock, pack
from traces.chat import TEMPLATE_OF_FAMILY, apply_template
from traces.sources.base import TextRecord
from traces.tokenizers import OUTPUT_SPECIALS, get_tokenizer


def prompt_text(family: str, rec: TextRecord) -> str:
    """The prompt string the simulated model sees: the stored exact prompt when it was made with
    this family's template, else the conversation rendered with this family's template."""
    if rec.exact_prompt is not None and rec.exact_template == TEMPLATE_OF_FAMILY[family]:
        return rec.exact_prompt + rec.assistant_prefix
    return apply_template(family, rec.messages, add_generation_prompt=True) + rec.assistant_prefix


def tokenize_records(family: str, records: list[TextRecord], skipped: dict[str, int],
                     meta: dict) -> TokenizedBlock:
    """Encode prompts (special markers as special ids) and outputs (plain text) for a family."""
    enc = get_tokenizer(family)
    threads = max(1, os.cpu_count() or 1)
    prompts = enc.encode_batch([prompt_text(family, r) for r in records], num_threads=threads,
                               allowed_special="all")
    outputs = enc.encode_batch([r.output for r in records], num_threads=threads,
                               allowed_special=OUTPUT_SPECIALS[family], disallowed_special=())
    p_tok, p_off = pack(prompts)
    o_tok, o_off = pack(outputs)
    return TokenizedBlock(
        request_ids=[r.request_id for r in records], prompt_tokens=p_tok, prompt_offsets=p_off,
        output_tokens=o_tok, output_offsets=o_off,
        greedy=np.array([r.greedy for r in records], dtype=bool),
        turn=np.array([r.turn for r in records], dtype=np.int32),
        producers=[r.producer for r in records], skipped=dict(skipped), meta=meta,
    )
