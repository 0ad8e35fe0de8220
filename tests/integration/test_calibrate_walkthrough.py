"""The README's "Calibrate on your GPU and vLLM" walk-through, on recorded data: plan the runs,
take the records a GPU returned for them (the committed vLLM 0.33 runs of that plan stand in for
your GPU's), fit, and predict with the calibration file. The GPU step itself needs vLLM and a GPU
and is not run here; `calibrate run` says so in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
V033 = ROOT / "calibrate" / "data" / "vllm-0.33"


def _simkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "simkit", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


def _plan_records(plan: dict, out: Path) -> list[str]:
    """The committed runs that the plan's engines and runs name, written as a records folder."""
    runs = pd.read_parquet(V033 / "runs.parquet")
    want = set()
    for e in plan["engines"]:
        for r in e["runs"]:
            corpus, conc, n, _purpose, *hist = r["spec"].split(":")
            want.add((e["config"], e["k"] if e["config"] != "suffix" else 24, corpus, int(conc),
                      int(n)))
            if hist:
                want.add((e["config"], e["k"] if e["config"] != "suffix" else 24, corpus,
                          int(conc), int(n), "hot"))
    keys = runs.apply(lambda r: (r.config, int(r.k), r.corpus, int(r.concurrency),
                                 int(r.num_requests)) + (("hot",) if r.history == "hot" else ()),
                      axis=1)
    # the plan's runs as calibration runs (validation runs of the same settings stay out of a fit)
    mine = runs[keys.isin(want) & ~runs.run_id.str.contains("-rep")
                & (runs.purpose == "calibration")]
    steps = pd.read_parquet(V033 / "steps.parquet")
    out.mkdir(parents=True)
    mine.to_parquet(out / "runs.parquet", index=False)
    steps[steps.run_id.isin(set(mine.run_id))].to_parquet(out / "steps.parquet", index=False)
    return sorted(mine.run_id)


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_walkthrough_plan_fit_predict_on_recorded_runs(tmp_path):
    p = _simkit("calibrate", "plan", "--model", "llama-3.1-8b", "--corpus", "chat",
                "--vllm-version", "0.33", "--format", "json", "--out", str(tmp_path / "plan.sh"))
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["estimated_s"] <= 15 * 60 and plan["vllm_version"] == "0.33"
    assert [e["config"] for e in plan["engines"]] == ["vanilla", "suffix", "kpad", "kpad"]
    script = (tmp_path / "plan.sh").read_text()
    assert script.count("simkit calibrate run ") == len(plan["engines"])
    assert "simkit calibrate requests --model llama-3.1-8b --corpus chat" in script
    assert script.count("simkit calibrate requests") == 1

    recs = tmp_path / "my-records"
    ids = _plan_records(plan, recs)
    assert len(ids) >= 10, ids          # the records hold 11 of the plan's 12 runs x passes
    cal = tmp_path / "my-h200.json"
    p = _simkit("calibrate", "fit", "--records", str(recs), "--vllm-version", "0.33",
                "--name", "my-h200", "--out", str(cal), "--folds", "2")
    assert p.returncode == 0, p.stderr
    doc = json.loads(cal.read_text())
    assert doc["vllm_version"] == "0.33" and set(doc["runs"]) == set(ids)

    p = _simkit("predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--source", "shipped",
                "--history", "hot", "--calibration", str(cal), "--configs", "vanilla,kpad:12",
                "--seeds", "1", "--num-requests", "96", "--format", "json")
    assert p.returncode == 0, p.stderr
    pred = json.loads(p.stdout)
    assert pred["vllm_version"] == "0.33"
    assert pred["assumptions"]["cost_model"]["value"]["label"] == "calibrated my-h200"
    assert all(r["output_tok_s"] > 0 for r in pred["results"])


def test_calibrate_run_without_vllm_says_what_it_needs(tmp_path):
    req = tmp_path / "req"
    req.mkdir()
    (req / "llama-3.1-8b__chat.jsonl").write_text(
        json.dumps({"id": "r0", "prompt_ids": [1, 2, 3], "output_ids": [4, 5]}) + "\n")
    p = _simkit("calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat", "--config",
                "vanilla", "--out", str(tmp_path / "o"), "--requests-dir", str(req),
                "--runs", "chat:8:1:calibration")
    if p.returncode == 0 or "vLLM is not installed" not in p.stderr:
        import importlib.util

        assert importlib.util.find_spec("vllm") is not None, p.stderr
    else:
        assert p.returncode == 2 and p.stderr.count("\n") == 1


def _run_plan(folder: Path) -> list[str]:
    """bash plan.sh in `folder` with a stand-in `simkit` that logs its arguments: the commands
    the script runs, in order."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "simkit"
    stub.write_text('#!/usr/bin/env bash\necho "$*" >> "$SIMKIT_STUB_LOG"\n')
    stub.chmod(0o755)
    log = folder / "calls.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SIMKIT_STUB_LOG=str(log))
    p = subprocess.run(["bash", "plan.sh"], cwd=folder, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return log.read_text().splitlines()


def test_plan_script_makes_the_request_file_once_and_only_when_missing(tmp_path):
    """The README ran `calibrate requests ... && bash plan.sh`, and plan.sh made the requests
    again: the script now makes them only when the file is not already beside it."""
    p = _simkit("calibrate", "plan", "--model", "llama-3.1-8b", "--corpus", "chat",
                "--out", str(tmp_path / "plan.sh"))
    assert p.returncode == 0, p.stderr
    calls = _run_plan(tmp_path)
    assert calls[0] == "calibrate requests --model llama-3.1-8b --corpus chat"
    assert [c.split()[:2] for c in calls[1:]] == [["calibrate", "run"]] * (len(calls) - 1)
    req = tmp_path / ".gpu" / "requests" / "llama-3.1-8b__chat.jsonl"
    req.parent.mkdir(parents=True)
    req.write_text("")                               # made where the corpus is, copied here
    again = _run_plan(tmp_path)
    assert again == calls[1:]


def test_readme_gpu_host_step_is_the_plan_script_alone():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Calibrate on your GPU and vLLM", 1)[1].split("\n## ", 1)[0]
    gpu = [ln for ln in section.splitlines() if ln.startswith("#   ")]
    assert [ln.split()[1:3] for ln in gpu] == [["bash", "plan.sh"]]


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_fit_prints_a_readable_summary_whose_counts_are_runs(tmp_path):
    """calibrate fit printed raw JSON whose "validation runs (held out of the fit)" was a count
    of steps (46,109 for 19 runs): the summary counts runs and steps, JSON under --format json."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from readme_commands import calibration_records

    recs = calibration_records(tmp_path / "calib-out")
    runs = pd.read_parquet(recs / "runs.parquet")
    steps = pd.read_parquet(recs / "steps.parquet", columns=["run_id"])
    held = set(runs[runs.purpose == "validation"].run_id)
    assert held
    args = ("calibrate", "fit", "--records", str(recs), "--vllm-version", "0.33", "--name",
            "my-gpu", "--folds", "2", "--out", str(tmp_path / "my-gpu.json"))
    p = _simkit(*args, "--format", "json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    doc = json.loads((tmp_path / "my-gpu.json").read_text())
    assert summary["runs"] == len(doc["runs"]) == len(set(runs.run_id) - held)
    assert summary["left_out"]["validation runs (held out of the fit)"] == {
        "runs": len(held), "steps": int(steps.run_id.isin(held).sum())}
    text = _simkit(*args).stdout
    assert not text.lstrip().startswith("{")
    assert (f"fitted my-gpu (h200, vLLM 0.33) on {summary['runs']} calibration runs of "
            "llama-3.1-8b") in text
    assert f"left out: {len(held)} validation runs" in text
    assert "cross-validated MAPE per step" in text and "step " in text
