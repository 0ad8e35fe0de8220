"""GPU sittings as data (calibrate.sitting_plans): every committed plan checks, the checker catches what
would waste device time, and a part's script makes the session.sh calls the plan lists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate.sitting_plans import PlanError, check, load, main, script

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "calibrate" / "plans").glob("*.toml"))


def test_the_plans_are_there():
    names = {p.stem for p in PLANS}
    assert {"v034-first", "v033-1203", "v033-1203c", "v033-1203d", "v033-1203e", "v033-drift",
            "v033-long"} <= names


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.stem)
def test_every_committed_plan_checks_clean(plan):
    rep = check(load(plan))
    assert rep.problems == [], rep.problems
    assert rep.part_s and rep.total_s > 0


def _requests(folder: Path, name: str, n: int, out_len: int = 400) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"id": f"r{i}", "prompt_ids": [1],
                                                   "output_ids": [2] * out_len}) + "\n"
                                       for i in range(n)))


def test_the_next_sitting_fits_its_budget_with_its_request_files(tmp_path):
    s = load(ROOT / "calibrate" / "plans" / "v034-first.toml")
    for f in ("llama-3.1-8b__chat.jsonl", "llama-3.1-8b__mix.jsonl", "qwen2.5-7b__code.jsonl",
              "qwen2.5-7b__mix.jsonl"):
        _requests(tmp_path, f, 300)
    rep = check(s, tmp_path)
    assert rep.problems == []
    assert rep.total_s <= s.budget_min * 60 and s.budget_min == 30 and s.num_chunks == 25
    assert all(rep.part_s[p.name] <= p.budget_s for p in s.parts)
    # what issues 39 and 40 ask of it: vanilla and K 4/8/16, a K table, adaptive, c8..c128, hot
    engines = [e for p in s.parts for e in p.engines]
    assert {(e.config, e.k) for e in engines if e.model == "llama-3.1-8b"} >= {
        ("vanilla", 0), ("suffix", 4), ("suffix", 8), ("suffix", 16), ("dynamic", 0)}
    assert any(e.adaptive for e in engines) and any(e.k_table for e in engines)
    runs = [r for e in engines for r in e.runs]
    assert {int(r.split(":")[1]) for r in runs} >= {8, 32, 64, 128}
    assert any(r.endswith(":hot") for r in runs) and any("*" in r for r in runs)
    # the K table and adaptive verification are scored, never fitted
    assert all(":validation" in r for e in engines if e.adaptive or e.k_table for r in e.runs)


def test_missing_or_short_request_files_are_problems(tmp_path):
    s = load(ROOT / "calibrate" / "plans" / "v034-first.toml")
    _requests(tmp_path, "llama-3.1-8b__chat.jsonl", 100)
    problems = check(s, tmp_path).problems
    assert any("needs 256 requests" in p and "has 100" in p for p in problems)
    assert any("llama-3.1-8b__mix.jsonl missing" in p for p in problems)


def _plan(tmp_path: Path, body: str, status: str = "planned", vllm: str = "0.34.0") -> Path:
    p = tmp_path / "p.toml"
    p.write_text(f'[sitting]\nname = "t"\nvllm = "{vllm}"\nchunks = "v034"\nnum_chunks = 25\n'
                 f'budget_min = 30\ntag = "t"\nstatus = "{status}"\npurpose = "test"\n' + body)
    return p


ENGINE = '[[part]]\nname = "A"\nbudget_s = 500\n[[part.engine]]\nmodel = "llama-3.1-8b"\n'


@pytest.mark.parametrize("body, says", [
    (ENGINE + 'config = "suffix"\nk = 8\nruns = ["chat:32:64"]\n', "must name its purpose"),
    (ENGINE + 'config = "suffix"\nk = 8\nruns = ["poetry:32:64:validation"]\n',
     "unknown corpus 'poetry'"),
    (ENGINE.replace("llama-3.1-8b", "llama-9") + 'config = "suffix"\nruns = ["chat:8:9:validation"]\n',
     "unknown model"),
    (ENGINE + 'config = "dynamic"\nruns = ["chat:8:9:validation"]\n', "k-table"),
    (ENGINE + 'config = "suffix"\nk = 8\nruns = ["chat:32:2000:validation*4"]\n',
     "exceeds its budget of 500 s"),
])
def test_the_checker_finds_what_would_waste_device_time(tmp_path, body, says):
    rep = check(load(_plan(tmp_path, body)))
    assert any(says in p for p in rep.problems), rep.problems


def test_a_034_option_on_a_033_sitting_is_a_problem(tmp_path):
    body = ENGINE + 'config = "suffix"\nk = 8\nadaptive = true\nruns = ["chat:8:9:validation"]\n'
    rep = check(load(_plan(tmp_path, body, vllm="0.33.0")))
    assert any("--adaptive" in p for p in rep.problems), rep.problems


def test_a_planned_sitting_over_its_budget_is_a_problem_a_past_one_a_note(tmp_path):
    body = "".join(ENGINE.replace('"A"', f'"{n}"') + 'config = "suffix"\nk = 8\n'
                   'runs = ["chat:32:512:validation*3"]\n' for n in "ABCDEFGH")
    assert any("exceeds its budget of 30 min" in p
               for p in check(load(_plan(tmp_path, body))).problems)
    rep = check(load(_plan(tmp_path, body, status="ran 2026-12-01")))
    assert rep.problems == [] and any("exceeds its budget of 30 min" in n for n in rep.notes)


@pytest.mark.parametrize("body, says", [
    ("[[part]]\nname = \"A\"\nbudget_s = 500\n", "at least one [[part.engine]]"),
    (ENGINE + 'config = "suffix"\nrunz = ["x"]\n', "unknown field 'runz'"),
    (ENGINE + 'config = "suffix"\n', "field 'runs' missing"),
    (ENGINE.replace("500", "900") + 'config = "suffix"\nruns = ["chat:8:9:validation"]\n',
     "budget_s' must be in 1..600"),
    ("[[part]\n", "not valid TOML"),
])
def test_a_malformed_plan_names_the_field(tmp_path, body, says):
    with pytest.raises(PlanError, match=says.replace("[", r"\[").replace("]", r"\]")):
        load(_plan(tmp_path, body))


def test_a_malformed_plan_is_one_error_line_from_the_command(tmp_path, capsys):
    assert main(["check", str(_plan(tmp_path, ENGINE + 'config = "suffix"\n'))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "field 'runs' missing" in err[0]


def test_a_converted_part_makes_the_session_calls_its_dated_script_made():
    """Part F of the 2026-12-03c sitting, as sitting_2026_12_03c.sh ran it: suffix with 150 s kept
    for the dynamic-K engine, then dynamic-K with two policies, one tag."""
    text = script(load(ROOT / "calibrate" / "plans" / "v033-1203c.toml"), "F")
    calls = [line for line in text.splitlines() if "session.sh" in line]
    assert calls == [
        "ARGS='--tag v033-1203c' CAP=1024 TP=1 bash calibrate/gpu/session.sh \"$left\" "
        "llama-3.1-8b suffix:24@chat:32:64:validation:hot,chat:64:128:validation,"
        "chat:8:24:validation,code-reasoning:32:128:validation:hot,"
        "math:32:128:validation:repeat:0.5,math:32:96:validation:cap=4096",
        "ARGS='--tag v033-1203c --policies feedback,goodput' CAP=1024 TP=1 bash "
        "calibrate/gpu/session.sh \"$left\" llama-3.1-8b dynamic:12@math:32:128:validation"]
    assert "left=$(( T_END - $(date +%s) - 150 ))" in text


def test_the_034_flags_reach_the_runner_and_engines_of_a_call_share_it():
    text = script(load(ROOT / "calibrate" / "plans" / "v034-first.toml"), "C")
    assert "ARGS='--tag v034a --k-table 1-16:16,17-48:8,49-96:4,97-1024:2'" in text
    assert "ARGS='--tag v034a --adaptive'" in text
    b = script(load(ROOT / "calibrate" / "plans" / "v034-first.toml"), "B", 300)
    assert b.count("session.sh") == 1 and "suffix:4@" in b and "suffix:16@" in b   # one call
    assert "T_END=$(( $(date +%s) + 300 ))" in b
    with pytest.raises(PlanError, match="no part 'Z'"):
        script(load(ROOT / "calibrate" / "plans" / "v034-first.toml"), "Z")


def test_the_script_path_needs_only_the_standard_library():
    """It runs on the GPU machine before vLLM and simkit's dependencies are installed there."""
    code = ("import sys, calibrate.sitting_plans as s; "
            "s.script(s.load('calibrate/plans/v034-first.toml'), 'A'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('simkit', 'numpy', 'pandas', 'traces', 'vllm')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_plugin_dynamic_k_is_estimated_once_per_policy():
    from calibrate.harness import get_adapter
    from calibrate.sitting_plans import Engine, _policies

    forcing, replay = get_adapter("forcing"), get_adapter("trace_replay")
    two = Engine("llama-3.1-8b", "dynamic", 12, ("math:32:128:validation",),
                 args=("--policies", "feedback,goodput"))
    assert _policies(two, forcing) == 2
    assert _policies(Engine("llama-3.1-8b", "dynamic", 12, ("x",)), forcing) == 3
    assert _policies(two, replay) == 1            # 0.34: the engine's table, one pass
    assert _policies(Engine("llama-3.1-8b", "suffix", 8, ("x",)), forcing) == 1
