"""WMT24 document-level translation (translation): 2,039 documents in 11 directions, greedy."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_jsonl


DIRECTIONS = ("cs-uk", "en-cs", "en-de", "en-es", "en-hi", "en-is", "en-ja", "en-ru", "en-uk",
              "en-zh", "ja-zh")
LANGUAGE = {"cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "hi": "Hindi",
            "is": "Icelandic", "ja": "Japanese", "ru": "Russian", "uk": "Ukrainian",
            "zh": "Chinese"}
PROMPT = "Translate the following text from {src} into {tgt}. \n{src}: {doc} \n{tgt}:"
_CAPS = {
    "Llama-3.1-8B-Instruct": out(4096, "stated, contradicted",
                                 f"{SM} section 4 says max_new_tokens 2048; Llama-3.1-8B outputs "
                                 "reach 4,096 tokens (35 within 6 of it), so that run used 4096"),
    "Qwen2.5-7B-Instruct": out(2048, "stated", f"{SM} section 4: max_new_tokens 2048 (outputs stop "
                               "at 2,048)"),
}
_DIRS = {"Llama-3.1-8B-Instruct": "Meta-Llama-3.1-8B-Instruct",
         "Qwen2.5-7B-Instruct": "Qwen2.5-7B-Instruct"}


def _files(producer: str) -> tuple[str, ...]:
    return tuple(f"wmt24_docmt/{_DIRS[producer]}/wmt2024_{d}_single._gen.jsonl" for d in DIRECTIONS)


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    out = []
    for direction, rel in zip(DIRECTIONS, _files(producer)):
        s, t = (LANGUAGE[x] for x in direction.split("-"))
        path = src / rel
        for line, row in read_jsonl(path):
            doc = need(row, "original", path, line)
            output = need(row, "translation", path, line)
            if not doc:
                skipped["missing prompt"] += 1
                continue
            if not output:
                skipped["empty output"] += 1
                continue
            out.append(TextRecord(f"wmt24/{direction}/{line}",
                                  [("user", PROMPT.format(src=s, tgt=t, doc=doc))], output,
                                  producer, greedy=True))
    return out


SOURCE = Source(name="wmt24", corpus="translation", files={p: _files(p) for p in _DIRS},
                loader=_load, caps=_CAPS,
                note="vLLM greedy, max_new_tokens 2048 stated (Llama outputs reach 4096), "
                     "'single' whole-document prompt")
