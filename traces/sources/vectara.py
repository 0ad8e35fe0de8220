"""Vectara HHEM leaderboard v1 (summarization): confident article rows only, temperature 0.

Source passages come from a separate CSV (gb18030-decoded); the article_id -> row mapping is the
derived TSV in traces-src, and only rows with vote_share >= 0.8 are replayed (SOURCES.md §3).
Duplicated summary rows (same article_id) are counted as skipped, first one kept.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.sources.base import Source, TextRecord, need, read_jsonl

_CSV = "vectara_hhem/sources_hzdzkjdxyjs/leaderboard_summaries.csv"
_MAP = "vectara_hhem/article_id_to_source_row.tsv"
_FILES = {
    "Llama-3.1-8B-Instruct": "vectara_hhem/meta-llama/Meta-Llama-3.1-8B-Instruct/summaries.jsonl",
    "Llama-3.1-70B-Instruct": "vectara_hhem/meta-llama/Meta-Llama-3.1-70B-Instruct/summaries.jsonl",
    "Llama-3.1-405B-Instruct":
        "vectara_hhem/meta-llama/Meta-Llama-3.1-405B-Instruct/summaries.jsonl",
    "Qwen2.5-7B-Instruct": "vectara_hhem/qwen/Qwen2.5-7B-Instruct/summaries.jsonl",
    "Qwen2.5-32B-Instruct": "vectara_hhem/qwen/Qwen2.5-32B-Instruct/summaries.jsonl",
    "Qwen2.5-72B-Instruct": "vectara_hhem/qwen/Qwen2.5-72B-Instruct/summaries.jsonl",
    "DeepSeek-R1": "vectara_hhem/deepseek-ai/DeepSeek-R1/summaries.jsonl",
    "QwQ-32B-Preview": "vectara_hhem/qwen/QwQ-32B-Preview/summaries.jsonl",
}
MIN_VOTE_SHARE = 0.8
PROMPT = ("You are a chat bot answering questions using data. You must stick to the answers "
          "provided solely by the text in the passage provided. You are asked the question "
          "'Provide a concise summary of the following passage, covering the core pieces of "
          "information described.'  {passage}'")


def _passages(src: Path) -> list[str]:
    text = (src / _CSV).read_bytes().decode("gb18030", errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0][:1] != ["source"]:
        raise InputError("expected a header starting with 'source'", path=str(src / _CSV), line=1)
    return [r[0] if r else "" for r in rows[1:]]


def _mapping(src: Path) -> dict[int, tuple[int, float]]:
    path = src / _MAP
    out = {}
    with path.open(encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        for lineno, line in enumerate(fh, 2):
            rec = dict(zip(header, line.rstrip("\n").split("\t")))
            try:
                out[int(rec["article_id"])] = (int(rec["source_row_0based"]),
                                               float(rec["vote_share"]))
            except (KeyError, ValueError) as exc:
                raise InputError(f"bad mapping row: {exc}", path=str(path), line=lineno) from exc
    return out


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    passages, mapping = _passages(src), _mapping(src)
    path = src / _FILES[producer]
    seen: set[int] = set()
    out = []
    for line, row in read_jsonl(path):
        aid = int(need(row, "article_id", path, line))
        summary = need(row, "summary", path, line)
        if aid in seen:
            skipped["duplicate article_id row"] += 1
            continue
        seen.add(aid)
        if aid not in mapping:
            skipped["article_id without source passage"] += 1
            continue
        srow, share = mapping[aid]
        if share < MIN_VOTE_SHARE:
            skipped["unconfident source row (vote_share < 0.8)"] += 1
            continue
        if not summary or not summary.strip():
            skipped["empty output"] += 1
            continue
        prompt = PROMPT.format(passage=passages[srow])
        out.append(TextRecord(f"vectara/{aid}", [("user", prompt)], summary, producer,
                              greedy=True))
    return out


SOURCE = Source(name="vectara", corpus="summarization", files={k: (v,) for k, v in _FILES.items()},
                loader=_load, extra_files=(_CSV, _MAP),
                note="temperature 0; passages matched by a derived mapping (confident rows only)")
