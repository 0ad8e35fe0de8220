"""Arena-Hard-Auto v2.0 (chat): 750 hard single-turn prompts (code, multilingual, creative)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_jsonl


_FILES = {
    "Llama-3.1-8B-Instruct": "arena_hard_v2/HannanJaved_arena-hard-auto-private/llama3.1-8b-instruct.jsonl",
    "Sky-T1-32B-Preview": "arena_hard_v2/lmarena_arena-hard-auto/sky-t1-32b.jsonl",
}
# Llama-3.1-8B ran in vLLM at temperature 0; Sky-T1's decoding is not documented (taken as sampled).
_GREEDY = {"Llama-3.1-8B-Instruct": True, "Sky-T1-32B-Preview": False}


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    path = src / _FILES[producer]
    out = []
    for line, row in read_jsonl(path):
        messages = need(row, "messages", path, line)
        uid = need(row, "uid", path, line)
        if len(messages) < 2 or messages[0].get("role") != "user":
            raise InputError("expected [user, assistant] messages", path=str(path), line=line,
                             field="messages")
        prompt = messages[0].get("content") or ""
        answer = messages[1].get("content")
        output = answer.get("answer", "") if isinstance(answer, dict) else (answer or "")
        if not prompt:
            skipped["missing prompt"] += 1
            continue
        if not output:
            skipped["empty output"] += 1
            continue
        out.append(TextRecord(f"arena_hard/{uid}", [("user", prompt)], output, producer,
                              greedy=_GREEDY[producer]))
    return out


SOURCE = Source(name="arena_hard", corpus="chat", files={k: (v,) for k, v in _FILES.items()},
                loader=_load,
                caps={"Llama-3.1-8B-Instruct": out(4096, "stated", f"{SM} section 7: max_tokens 4096 "
                                                   "(config/api_config.yaml)")},
                note="Llama-3.1-8B: vLLM temperature 0, max_tokens 4096")
