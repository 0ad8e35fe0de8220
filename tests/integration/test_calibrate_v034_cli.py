"""`simkit calibrate run` and `plan` with vLLM 0.34 (issue 39 item 4): the installed release is read
from its package metadata, the options are checked before vLLM is imported or an engine starts,
trace replay is the harness, and a plan for 0.34 calibrates suffix at several K (K-pad is built
in). No GPU and no vLLM here: the installed vLLM is a dist-info folder, the engine a stub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import one_line_error, run

ROOT = Path(__file__).resolve().parents[2]


def _fake_vllm(site: Path, version: str) -> Path:
    """A site folder where vLLM `version` looks installed (its metadata only, no module)."""
    d = site / f"vllm-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return site


def _requests(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "llama-3.1-8b__chat.jsonl").write_text(
        json.dumps({"id": "r0", "prompt_ids": [1, 2, 3], "output_ids": [4, 5]}) + "\n")
    return folder


def _simkit(*args: str, site: Path | None = None) -> subprocess.CompletedProcess:
    path = [str(ROOT)] + ([str(site)] if site else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run([sys.executable, "-m", "simkit", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


@pytest.mark.parametrize("extra, says", [
    (["--config", "suffix", "--k-table", "1-8:16,10-64:8"], "field 'k-table'"),
    (["--config", "suffix", "--corpus-tokens", "-1"], "field 'corpus-tokens'"),
    (["--config", "eagle"], "field 'config'"),
])
def test_run_refuses_bad_options_before_looking_for_vllm(tmp_path, extra, says, capsys):
    """No vLLM here: the option's error comes first, as one line."""
    code, _, err = run(capsys, "calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--out", str(tmp_path / "o"), "--requests-dir",
                       str(_requests(tmp_path / "req")), "--runs", "chat:8:1:calibration", *extra)
    assert code == 2
    one_line_error(err, says)


def test_run_on_034_checks_the_adapters_rules_before_any_engine(tmp_path):
    """vLLM 0.34 'installed': vanilla with adaptive verification is refused by the trace-replay
    adapter's check, in one line, and vLLM is never imported (there is none to import)."""
    site = _fake_vllm(tmp_path / "site", "0.34.0")
    p = _simkit("calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat", "--config",
                "vanilla", "--adaptive", "--out", str(tmp_path / "o"),
                "--requests-dir", str(_requests(tmp_path / "req")), "--runs",
                "chat:8:1:calibration", site=site)
    assert p.returncode == 2, p.stderr
    one_line_error(p.stderr, "field 'config'", "need --config suffix")


def test_run_on_034_drives_the_engine_with_trace_replay_and_the_flags(tmp_path, monkeypatch,
                                                                      capsys):
    import calibrate.harness.versions as hv
    import calibrate.runner as runner

    got = {}

    def engine(model, config, k, runs, out_dir, *args, **kw):
        got.update(kw, config=config, k=k)
        return []

    monkeypatch.setattr(runner, "run_engine", engine)
    monkeypatch.setattr(hv, "installed_vllm_release", lambda: "0.34.0")
    code, _, err = run(capsys, "calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--config", "dynamic", "--k-table", "1-8:16,9-1024:4",
                       "--out", str(tmp_path / "o"), "--requests-dir",
                       str(_requests(tmp_path / "req")), "--runs", "chat:8:1:calibration")
    assert code == 0, err
    assert got["harness"] == "trace_replay" and got["config"] == "dynamic"
    assert got["flags"].k_table == ((1, 8, 16), (9, 1024, 4))


def test_run_on_a_newer_vllm_warns_and_goes_on(tmp_path, monkeypatch, capsys):
    import calibrate.harness.versions as hv
    import calibrate.runner as runner

    monkeypatch.setattr(runner, "run_engine", lambda *a, **kw: [])
    monkeypatch.setattr(hv, "installed_vllm_release", lambda: "0.35.0")
    code, _, err = run(capsys, "calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--config", "suffix", "--k", "8", "--out", str(tmp_path / "o"),
                       "--requests-dir", str(_requests(tmp_path / "req")), "--runs",
                       "chat:8:1:calibration")
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("warning: vLLM 0.35 is newer than the vLLM versions simkit has")
    assert "driven as 0.34 is (trace_replay)" in lines[0]


def test_plan_for_034_calibrates_suffix_at_several_k_and_no_kpad(capsys):
    code, out, err = run(capsys, "calibrate", "plan", "--vllm-version", "0.34", "--format",
                         "json", "--budget-min", "30")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["vllm_version"] == "0.34"
    assert [(e["config"], e["k"]) for e in plan["engines"]][:4] == [
        ("vanilla", 0), ("suffix", 8), ("suffix", 4), ("suffix", 16)]
    assert {e["k"] for e in plan["engines"]} <= {0, 4, 8, 12, 16, 24}
    specs = [r["spec"] for r in plan["engines"][1]["runs"]]
    assert {int(r.split(":")[1]) for r in specs} == {8, 32, 64, 128}
    assert any(r.endswith(":hot") for r in specs) and any(r.endswith(":repeat:0.5") for r in specs)
    assert all("--config kpad" not in c for c in plan["commands"])
    # asked for kpad:12 on 0.34: planned as suffix at K 12 (K-pad is built in)
    code, out, _ = run(capsys, "calibrate", "plan", "--vllm-version", "0.34.0", "--format",
                       "json", "--configs", "vanilla,kpad:12")
    assert [(e["config"], e["k"]) for e in json.loads(out)["engines"]] == [("vanilla", 0),
                                                                            ("suffix", 12)]


def test_plan_on_a_gpu_host_plans_for_the_installed_vllm(tmp_path):
    p = _simkit("calibrate", "plan", "--format", "json", site=_fake_vllm(tmp_path, "0.34.0"))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["vllm_version"] == "0.34"
