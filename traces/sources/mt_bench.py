"""MT-Bench (chat, two turns): turn 2's prompt holds turn 1's question and the model's own answer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.caps import out
from traces.sources.base import Source, TextRecord, need, read_jsonl


_QUESTIONS = "mt_bench/question.jsonl"
_FILES = {
    "Llama-3.1-8B-Instruct": "mt_bench/model_answer/Meta-Llama-3.1-8B-Instruct.jsonl",
    "Llama-3.1-70B-Instruct": "mt_bench/model_answer/Meta-Llama-3.1-70B-Instruct.jsonl",
    "Qwen2-7B-Instruct": "mt_bench/model_answer/Qwen2-7B-Instruct.jsonl",
    "Qwen2-72B-Instruct": "mt_bench/model_answer/Qwen2-72B-Instruct.jsonl",
}
# FastChat's per-category temperatures; only temperature 0 is greedy.
TEMPERATURE = {"writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0,
               "reasoning": 0.0, "stem": 0.1, "humanities": 0.1}


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    qpath, apath = src / _QUESTIONS, src / _FILES[producer]
    questions = {}
    for line, q in read_jsonl(qpath):
        questions[need(q, "question_id", qpath, line)] = (q, line)
    out = []
    for line, ans in read_jsonl(apath):
        qid = need(ans, "question_id", apath, line)
        if qid not in questions:
            skipped["answer without question"] += 1
            continue
        q, qline = questions[qid]
        category = need(q, "category", qpath, qline)
        if category not in TEMPERATURE:
            raise InputError(f"unknown MT-Bench category {category!r}", path=str(qpath),
                             line=qline, field="category")
        turns_q = need(q, "turns", qpath, qline)
        turns_a = need(ans, "choices", apath, line)[0]["turns"]
        greedy = TEMPERATURE[category] == 0.0
        history: list[tuple[str, str]] = []
        for t, (question, answer) in enumerate(zip(turns_q, turns_a), 1):
            history = history + [("user", question)]
            if not answer or answer == "$ERROR$":
                skipped["empty output"] += 1
            else:
                out.append(TextRecord(f"mt_bench/{qid}/t{t}", list(history), answer, producer,
                                      greedy=greedy, turn=t))
            history = history + [("assistant", answer)]
    return out


SOURCE = Source(name="mt_bench", corpus="chat", files={k: (v,) for k, v in _FILES.items()},
                loader=_load, extra_files=(_QUESTIONS,),
                caps={"*": out(2048, "observed", "no cap stated in SOURCES.md; Llama-3.1-8B/70B outputs "
                                         "stop at exactly 2,048 tokens (7 of 160 / 1 of 160)")},
                note="FastChat: temperature 0 for math/coding/reasoning/extraction, else sampled")
