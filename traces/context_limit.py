"""The longest request an imported corpus may hold: prompt + output within the context of the
models whose tokenizers simkit imports with, checked at import.

Why: a 22M-token prompt was accepted at import and failed `simkit predict` only after 113 s.
No model simkit simulates can take such a request (vLLM refuses any request over
max_model_len, which is at most the model's context), so it is refused at once, naming it."""

from __future__ import annotations

import numpy as np

from simkit.errors import InputError

# max_position_embeddings in the public config.json of the models of each importable tokenizer
# family: Llama 3.1 8B/70B/405B and DeepSeek-R1-Distill-Llama-70B (llama3, r1-llama),
# DeepSeek-R1-Distill-Qwen 7B/32B (r1-qwen): 131,072; Qwen2.5 Instruct (qwen): 32,768, and
# 131,072 with the YaRN rope scaling its model cards describe. The largest is the bound.
MAX_CONTEXT_TOKENS = 131_072


def check_request_lengths(block, path: str, limit: int = MAX_CONTEXT_TOKENS) -> None:
    """Refuse (InputError naming the file and the request) a corpus with a request whose prompt
    plus output is longer than `limit` tokens; says how many such requests there are."""
    total = np.diff(block.prompt_offsets) + np.diff(block.output_offsets)
    over = np.flatnonzero(total > limit)
    if not len(over):
        return
    i = int(over[0])
    prompt = int(block.prompt_offsets[i + 1] - block.prompt_offsets[i])
    output = int(total[i]) - prompt
    more = f" ({len(over) - 1:,} more request(s) are too)" if len(over) > 1 else ""
    raise InputError(f"request {block.request_ids[i]}: prompt {prompt:,} + output {output:,} "
                     f"tokens is longer than any model simkit simulates can take ({limit:,} "
                     f"tokens of context){more}; remove or shorten it", path=path)


__all__ = ["MAX_CONTEXT_TOKENS", "check_request_lengths"]
