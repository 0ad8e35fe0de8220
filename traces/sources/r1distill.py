"""R1-distill reasoning traces (reasoning): long-CoT outputs TRUNCATED at ~1000 tokens.

`full_response` = the templated prompt + generated text; it is split after the generation prompt
"<｜Assistant｜><think>\\n". For R1-format models the prompt is that stored prefix plus the BOS
the stored text lacks (equal to r1_chat(original_message) for every record; tested); other
families render `original_message` with their own template.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_json


_FILES = {
    "DeepSeek-R1-Distill-Qwen-14B": "r1distill_thinking_interp/responses_deepseek-r1-distill-qwen-14b.json",
    "DeepSeek-R1-Distill-Llama-8B":
        "r1distill_thinking_interp/responses_deepseek-r1-distill-llama-8b-legacy-messages.json",
}
_CAPS = {
    "DeepSeek-R1-Distill-Llama-8B": out(1000, "stated", f"{SM} section 9: max_tokens 1000"),
    "DeepSeek-R1-Distill-Qwen-14B": out(500, "stated, contradicted",
                                        f"{SM} section 9 says max_tokens 1000; the 14B outputs stop "
                                        "at 500-501 tokens, so that run used 500"),
}
MARKER = "<｜Assistant｜><think>\n"
BOS = "<｜begin▁of▁sentence｜>"


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    path = src / _FILES[producer]
    rows = read_json(path)
    if not isinstance(rows, list):
        raise InputError("expected a JSON list", path=str(path))
    out = []
    for i, row in enumerate(rows):
        full = need(row, "full_response", path)
        message = need(row, "original_message", path)
        question = message.get("content") if isinstance(message, dict) else None
        if not question:
            skipped["missing prompt"] += 1
            continue
        cut = full.find(MARKER)
        if cut < 0:
            skipped["prompt marker not found in full_response"] += 1
            continue
        output = full[cut + len(MARKER):]
        if not output:
            skipped["empty output"] += 1
            continue
        exact = BOS + full[:cut + len(MARKER)]
        out.append(TextRecord(f"r1distill/{i}", [("user", question)], output, producer,
                              greedy=True, exact_prompt=exact, exact_template="r1"))
    return out


SOURCE = Source(name="r1distill", corpus="reasoning", files={k: (v,) for k, v in _FILES.items()},
                loader=_load, caps=_CAPS, note="temperature 0 default, max_tokens 1000 (truncated thinking)")
