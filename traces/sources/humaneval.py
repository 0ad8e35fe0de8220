"""HumanEval via EvalPlus (code): 164 function-completion tasks, Llama-3.1-8B, vLLM greedy.

Prompt = EvalPlus instruction (user turn) + the response prefix EvalPlus appends after the
generation prompt; output = the raw continuation (`solution`).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.sources.base import Source, TextRecord, need, read_jsonl

_PROMPTS = "evalplus_humaneval_llama31_8b/prompts_openai_human-eval/HumanEval.jsonl.gz"
_FILES = {"Llama-3.1-8B-Instruct":
          "evalplus_humaneval_llama31_8b/meta-llama--Llama-3.1-8B-Instruct_vllm_temp_0.0.raw.jsonl"}
INSTRUCTION = ("Please provide a self-contained Python script that solves the following problem "
               "in a markdown code block:\n```\n{prompt}\n```\n")
RESPONSE_PREFIX = ("Below is a Python script with a self-contained function that solves the "
                   "problem and passes corresponding tests:\n```python\n")


def _read_prompts(path: Path) -> dict[str, str]:
    prompts = {}
    with gzip.open(path, "rb") as fh:
        for line, raw in enumerate(fh, 1):
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=line) from exc
            prompts[need(row, "task_id", path, line)] = need(row, "prompt", path, line)
    return prompts


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    prompts = _read_prompts(src / _PROMPTS)
    path = src / _FILES[producer]
    out = []
    for line, row in read_jsonl(path):
        task = need(row, "task_id", path, line)
        solution = need(row, "solution", path, line)
        if task not in prompts:
            skipped["missing prompt"] += 1
            continue
        if not solution:
            skipped["empty output"] += 1
            continue
        user = INSTRUCTION.format(prompt=prompts[task].strip())
        out.append(TextRecord(task, [("user", user)], solution, producer, greedy=True,
                              assistant_prefix=RESPONSE_PREFIX))
    return out


SOURCE = Source(name="humaneval", corpus="code", files={k: (v,) for k, v in _FILES.items()},
                loader=_load, extra_files=(_PROMPTS,), note="EvalPlus codegen, vLLM greedy")
