"""AlpacaEval 2.0 (chat): 805 single-turn instructions; outputs sampled at temperature 0.7."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_json


_FILES = {
    "Llama-3.1-8B-Instruct": "alpaca_eval/Meta-Llama-3.1-8B-Instruct-Turbo/model_outputs.json",
    "Llama-3.1-70B-Instruct": "alpaca_eval/Meta-Llama-3.1-70B-Instruct-Turbo/model_outputs.json",
    "Llama-3.1-405B-Instruct": "alpaca_eval/Meta-Llama-3.1-405B-Instruct-Turbo/model_outputs.json",
    "Llama-3-8B-Instruct": "alpaca_eval/Meta-Llama-3-8B-Instruct/model_outputs.json",
    "Llama-3-70B-Instruct": "alpaca_eval/Meta-Llama-3-70B-Instruct/model_outputs.json",
    "Qwen2-72B-Instruct": "alpaca_eval/Qwen2-72B-Instruct/model_outputs.json",
}


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    path = src / _FILES[producer]
    rows = read_json(path)
    out = []
    for i, row in enumerate(rows):
        instruction = need(row, "instruction", path)
        output = need(row, "output", path)
        if not instruction:
            skipped["missing prompt"] += 1
            continue
        if not output:
            skipped["empty output"] += 1
            continue
        out.append(TextRecord(f"alpaca_eval/{i}", [("user", instruction)], output, producer,
                              greedy=False))
    return out


SOURCE = Source(
    name="alpaca_eval", corpus="chat", files={k: (v,) for k, v in _FILES.items()}, loader=_load,
    caps={"*": out(4096, "stated", f"{SM} section 1: max_tokens 4096")},
    note="Together API 'Turbo' (FP8) for Llama-3.1, temperature 0.7 (sampled)",
)
