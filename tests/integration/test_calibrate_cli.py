"""`simkit calibrate` commands that run without a GPU: fit on the committed records, merge, and
clear errors from `run` before any engine starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "calibrate" / "data"


def _simkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simkit", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.mark.slow
def test_fit_on_the_committed_records_writes_a_cross_validated_profile(tmp_path):
    out = tmp_path / "h200.json"
    p = _simkit("calibrate", "fit", "--records", str(DATA), "--out", str(out), "--folds", "2",
                "--vllm-version", "0.26")
    assert p.returncode == 0, p.stderr
    assert "cross-validated MAPE" in p.stdout and f"wrote {out}" in p.stderr.splitlines()
    doc = json.loads(out.read_text())
    assert doc["vllm_version"] == "0.26" and doc["name"] == "h200-vllm026"
    runs = pd.read_parquet(DATA / "runs.parquet")
    # validation runs are held out of the fit; calibration and the unforced vanilla timing
    # checks (purpose "check") are fitted
    fitted = set(runs[runs.purpose != "validation"].run_id)
    assert set(doc["runs"]) == fitted and set(runs[runs.purpose == "check"].run_id) <= fitted
    assert not set(doc["runs"]) & set(runs[runs.purpose == "validation"].run_id)
    assert set(doc["models"]) == {"llama-3.1-8b", "qwen2.5-7b"}
    assert doc["cv"]["mean"]["step"] > 0


def test_run_rejects_bad_input_before_starting_an_engine(tmp_path):
    p = _simkit("calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat",
                "--config", "kpad", "--out", str(tmp_path), "--concurrency", "8,x")
    assert p.returncode == 2 and "concurrency" in p.stderr
    p = _simkit("calibrate", "run", "--model", "llama-3.1-8b", "--corpus", "chat",
                "--config", "kpad", "--out", str(tmp_path), "--requests-dir", str(tmp_path))
    assert p.returncode == 2 and "llama-3.1-8b__chat.jsonl" in p.stderr


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_merge_refuses_duplicate_runs_and_keeps_every_row(tmp_path):
    from calibrate.merge import merge

    import pyarrow.parquet as pq

    n_runs, n_steps = merge([DATA], tmp_path / "once")
    assert (n_runs, n_steps) == (pq.ParquetFile(DATA / "runs.parquet").metadata.num_rows,
                                 pq.ParquetFile(DATA / "steps.parquet").metadata.num_rows)
    assert (tmp_path / "once" / "runs.parquet").read_bytes() == (DATA / "runs.parquet").read_bytes()
    with pytest.raises(ValueError, match="duplicate run ids"):
        merge([DATA, tmp_path / "once"], tmp_path / "twice")
    assert not (tmp_path / "twice").exists()            # refused before anything was written


def _two_runs(folder: Path) -> Path:
    """The committed records of their first two runs, as a records folder."""
    runs = pd.read_parquet(DATA / "runs.parquet").head(2)
    folder.mkdir()
    runs.to_parquet(folder / "runs.parquet", index=False)
    pd.read_parquet(DATA / "steps.parquet", filters=[("run_id", "in", list(runs.run_id))]
                    ).to_parquet(folder / "steps.parquet", index=False)
    return folder


def test_merge_names_the_files_it_wrote(tmp_path):
    """Two committed runs, not all of them: which files merge names does not depend on how many
    rows they hold (the test above merges every committed row)."""
    from typer.testing import CliRunner

    from simkit.cli import app

    into = tmp_path / "merged"
    res = CliRunner().invoke(app, ["calibrate", "merge", str(_two_runs(tmp_path / "two")),
                                   "--into", str(into)])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [f"wrote {into / 'steps.parquet'}",
                                       f"wrote {into / 'runs.parquet'}"]
    assert sorted(p.name for p in into.iterdir()) == ["runs.parquet", "steps.parquet"]


def test_run_names_every_file_it_wrote(tmp_path, monkeypatch):
    """calibrate run (the vLLM engine replaced: no GPU here) names each run's step file and the
    run log on stderr."""
    from typer.testing import CliRunner

    import calibrate.runner as runner
    import simkit.commands.calibration as cmd
    from simkit.cli import app

    def engine(model, config, k, runs, out_dir, *args, **kw):
        return [{"run_id": f"r{i}", "output_tok_s": 100.0, "outputs_match_trace": True}
                for i, _ in enumerate(runs)]

    monkeypatch.setattr(runner, "run_engine", engine)
    monkeypatch.setattr(runner, "requests_for", lambda *a: {})
    from calibrate.harness.versions import choose

    monkeypatch.setattr(cmd, "_require_vllm", lambda: choose("0.33.0"))
    res = CliRunner().invoke(app, ["calibrate", "run", "--model", "llama-3.1-8b", "--corpus",
                                   "chat", "--config", "vanilla", "--out", str(tmp_path),
                                   "--concurrency", "8,32", "--requests-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [f"wrote {tmp_path / 'steps_r0.parquet'}",
                                       f"wrote {tmp_path / 'steps_r1.parquet'}",
                                       f"wrote {tmp_path / 'runs.jsonl'}"]
