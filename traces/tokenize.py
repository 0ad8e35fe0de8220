"""Turn text records into a tokenized block for one tokenizer family (batched, multi-threaded), or
for a user's own tokenizer file (traces/own_tokenizer.py) with a chosen chat template."""

from __future__ import annotations

import os

import numpy as np

from traces.cache import TokenizedBlock, pack
from traces.chat import TEMPLATE_OF_FAMILY, apply_template, plain_chat
from traces.sources.base import TextRecord
from traces.tokenizers import OUTPUT_SPECIALS, get_tokenizer


def prompt_text(family: str | None, rec: TextRecord) -> str:
    """The prompt string the simulated model sees: the stored exact prompt when it was made with
    this family's template, else the conversation rendered with this family's template (None:
    the plain template, for an own tokenizer without a --model)."""
    if family is None:
        return plain_chat(rec.messages) + rec.assistant_prefix
    if rec.exact_prompt is not None and rec.exact_template == TEMPLATE_OF_FAMILY[family]:
        return rec.exact_prompt + rec.assistant_prefix
    return apply_template(family, rec.messages, add_generation_prompt=True) + rec.assistant_prefix


def _block(records: list[TextRecord], prompts, outputs, skipped: dict[str, int],
           meta: dict) -> TokenizedBlock:
    p_tok, p_off = pack(prompts)
    o_tok, o_off = pack(outputs)
    return TokenizedBlock(
        request_ids=[r.request_id for r in records], prompt_tokens=p_tok, prompt_offsets=p_off,
        output_tokens=o_tok, output_offsets=o_off,
        greedy=np.array([r.greedy for r in records], dtype=bool),
        turn=np.array([r.turn for r in records], dtype=np.int32),
        producers=[r.producer for r in records], skipped=dict(skipped), meta=meta,
    )


def tokenize_records(family: str, records: list[TextRecord], skipped: dict[str, int],
                     meta: dict) -> TokenizedBlock:
    """Encode prompts (special markers as special ids) and outputs (plain text) for a family."""
    enc = get_tokenizer(family)
    threads = max(1, os.cpu_count() or 1)
    prompts = enc.encode_batch([prompt_text(family, r) for r in records], num_threads=threads,
                               allowed_special="all")
    outputs = enc.encode_batch([r.output for r in records], num_threads=threads,
                               allowed_special=OUTPUT_SPECIALS[family], disallowed_special=())
    return _block(records, prompts, outputs, skipped, meta)


def tokenize_with_own(tok, template: str | None, records: list[TextRecord],
                      skipped: dict[str, int], meta: dict) -> TokenizedBlock:
    """Encode records with a user's tokenizer (an OwnTokenizer): prompts rendered with the
    `template` family's chat template (the --model's), or the plain one when None."""
    prompts = tok.encode_prompts([prompt_text(template, r) for r in records])
    outputs = tok.encode_outputs([r.output for r in records])
    return _block(records, prompts, outputs, skipped, meta)
