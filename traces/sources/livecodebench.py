"""LiveCodeBench, Qwen2.5-7B-Instruct (code: generation; code-edit: self-repair), temperature 0.2.

Prompts are not stored; they are rebuilt with LCB's templates as documented in SOURCES.md §5.
Self-repair joins the code-generation file on question_id for the code under repair and its
grading feedback. Approximation: the time-limit and runtime-error feedback lines follow the
metadata's own error_code meaning (-3 time limit, -4 runtime error).
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path

from simkit.errors import InputError
from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_json


PRODUCER = "Qwen2.5-7B-Instruct"
_CAPS = {"*": out(2000, "stated", f"{SM} section 5: LCB defaults max_tokens 2000")}
_CODEGEN = "livecodebench_qwen25_7b/Qwen2.5-Ins-7B/Scenario.codegeneration_1_0.2_eval_all.json"
_REPAIR = "livecodebench_qwen25_7b/Qwen2.5-Ins-7B/Scenario.selfrepair_1_0.2_eval_all.json"
_REPAIR_COT = ("livecodebench_qwen25_7b/Qwen2.5-Ins-7B-ZeroShotCoT/"
               "Scenario.selfrepair_1_0.2_eval_all.json")

CODEGEN_SYSTEM = "You are a helpful assistant."
CODEGEN_INTRO = ("You will be given a question (problem specification) and will generate a correct "
                 "Python program that matches the specification and passes all tests. You will NOT "
                 "return anything except for the program.\n\nQuestion: {question}\n\n")
WITH_STARTER = ("You will use the following starter code to write the solution to the problem and "
                "enclose your code within delimiters.\n```python\n{starter}\n```\n\n")
FORMATTING_WITHOUT_STARTER_CODE = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
    "test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when "
    "the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.")
WITHOUT_STARTER = FORMATTING_WITHOUT_STARTER_CODE + "\n```python\n# YOUR CODE HERE\n```\n\n"

REPAIR_SYSTEM = ("You are an expert Python programmer. You will be given a question (problem "
                 "specification) and will generate a correct Python program that matches the "
                 "specification and passes all tests.")
REPAIR_SYSTEM_COT = (
    "You are a helpful programming assistant and an expert Python programmer. You are helping a "
    "user write a program to solve a problem. The user has written some code, but it has some "
    "errors and is not passing the tests. Before you answer, think step by step about why the code "
    "fails and how to fix it. You will help the user by first giving a concise (at most 2-3 "
    "sentences) textual explanation of what is wrong with the code. After you have pointed out what "
    "is wrong with the code, you will then generate a fixed version of the program. You must put "
    "the entire fixed program within code delimiters only for once.")
COT_LINE = ("Think step by step about what is causing this failure and how to fix it, then produce "
            "a corrected version of the code.\n")


def codegen_user(question: str, starter: str) -> str:
    """The user turn of LCB's code-generation prompt (the raw prompt = Qwen ChatML around it)."""
    tail = WITH_STARTER.format(starter=starter) if starter else WITHOUT_STARTER
    return "\n" + CODEGEN_INTRO.format(question=question) + tail


def feedback(passed: bool, meta: dict) -> str:
    """The grading feedback sentence LCB's self-repair prompt shows for the original program."""
    if passed:
        return "The code passed all test cases."
    code = meta.get("error_code")
    msg = meta.get("error_message", "")
    inputs, expected = meta.get("inputs", ""), meta.get("expected", "")
    if code == -1:
        return f"The above code is incorrect and got the following compilation error.\n{msg}"
    if code == -2:
        return ("The above code is incorrect and got a wrong answer.\nInput: {}\nGenerated Output: "
                "{}\nExpected: {}\nError: {}").format(inputs, meta.get("output", ""), expected, msg)
    kind = "got time limit exceeded" if code == -3 else "got a runtime error"
    return f"The above code is incorrect and {kind}.\nInput: {inputs}\nExpected: {expected}\n{msg}"


def repair_user(question: str, code: str, fb: str, cot: bool) -> str:
    """The user turn of the self-repair prompt (plain or zero-shot-CoT)."""
    return (f"### Question:\n{question}\n\n### Answer:\n```python\n{code}\n```\n\n{fb}\n"
            + (COT_LINE if cot else "")
            + f"\n### Format: {FORMATTING_WITHOUT_STARTER_CODE}\n```python\n# YOUR CODE HERE\n```\n\n"
            "### Answer: (use the provided format with backticks)\n\n")


def _rows(path: Path) -> list[dict]:
    rows = read_json(path)
    if not isinstance(rows, list):
        raise InputError("expected a JSON list", path=str(path))
    return rows


def _load_codegen(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    path = src / _CODEGEN
    out = []
    for row in _rows(path):
        qid = need(row, "question_id", path)
        question = need(row, "question_content", path)
        outputs = need(row, "output_list", path)
        if not question:
            skipped["missing prompt"] += 1
            continue
        if not outputs or not outputs[0]:
            skipped["empty output"] += 1
            continue
        user = codegen_user(question, row.get("starter_code") or "")
        out.append(TextRecord(f"lcb_codegen/{qid}", [("system", CODEGEN_SYSTEM), ("user", user)],
                              outputs[0], producer, greedy=False))
    return out


def _load_repair(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    gpath = src / _CODEGEN
    base = {need(r, "question_id", gpath): r for r in _rows(gpath)}
    out = []
    for rel, cot in ((_REPAIR, False), (_REPAIR_COT, True)):
        path = src / rel
        for row in _rows(path):
            qid = need(row, "question_id", path)
            outputs = need(row, "output_list", path)
            gen = base.get(qid)
            if gen is None or not gen.get("code_list"):
                skipped["no code-generation record to repair"] += 1
                continue
            if not outputs or not outputs[0]:
                skipped["empty output"] += 1
                continue
            try:
                meta = json.loads(gen["metadata"][0])
            except (KeyError, IndexError, json.JSONDecodeError) as exc:
                raise InputError(f"bad grading metadata for {qid}: {exc}", path=str(gpath),
                                 field="metadata") from exc
            fb = feedback(bool(gen["graded_list"][0]), meta)
            # The self-repair file blanks question_content on some rows; the codegen row has it.
            question = gen.get("question_content") or row.get("question_content") or ""
            if not question:
                skipped["missing prompt"] += 1
                continue
            user = repair_user(question, gen["code_list"][0], fb, cot)
            system = REPAIR_SYSTEM_COT if cot else REPAIR_SYSTEM
            tag = "lcb_repair_cot" if cot else "lcb_repair"
            out.append(TextRecord(f"{tag}/{qid}", [("system", system), ("user", user)],
                                  outputs[0], producer, greedy=False))
    return out


CODEGEN = Source(name="lcb_codegen", corpus="code", files={PRODUCER: (_CODEGEN,)},
                 loader=partial(_load_codegen), caps=_CAPS,
                 note="LCB defaults: temperature 0.2, top_p 0.95")
SELF_REPAIR = Source(name="lcb_selfrepair", corpus="code-edit",
                     files={PRODUCER: (_REPAIR, _REPAIR_COT, _CODEGEN)},
                     loader=partial(_load_repair),
                     caps=_CAPS, note="plain + zero-shot-CoT prompts, temperature 0.2; ~30% copy the input code")
