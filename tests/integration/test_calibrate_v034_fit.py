"""`calibrate fit` on vLLM 0.34-shaped records.

No vLLM 0.34 run has been recorded yet, so these records are SYNTHESISED from recorded 0.33 steps
(calibrate/data/vllm-0.33): Llama-3.1-8B chat runs of vanilla and K-pad 4 / 12, whose decode
steps already verify exactly K slots per request (the plugin pads with -1), relabelled with the
0.34 column meaning the 0.34 harness writes: vllm_version 0.34.0, Model Runner V2, async
scheduling, draft_count "slots", every scheduled slot a placeholder (num_pad_drafts =
num_spec_tokens), no host drafting (num_drafting_reqs 0), kpad recorded as suffix. Their times
are 0.33's, so no figure of this fit means anything about 0.34: the tests check that the fit reads
0.34 records, keeps them apart from 0.33's, names the version and says how it read the columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simkit.catalog.vllm_versions import VERSIONS
from simkit.costmodel.fit import SLOTS_NOTE, fit_calibration
from simkit.errors import InputError
from tests.cli_helpers import one_line_error, run

SRC = Path(__file__).resolve().parents[2] / "calibrate" / "data" / "vllm-0.33"
PICK = ["llama-3.1-8b_vanilla-v033_chat_c32_n64", "llama-3.1-8b_vanilla-v033_chat_c8_n24",
        "llama-3.1-8b_kpad4-v033_chat_c32_n64", "llama-3.1-8b_kpad4-v033_chat_c8_n24",
        "llama-3.1-8b_kpad12-v033_chat_c32_n64", "llama-3.1-8b_kpad12-v033_chat_c64_n128"]


def synthesise(out: Path) -> tuple[int, int]:
    """out/v033: the picked 0.33 runs as recorded; out/v034: the same steps relabelled as 0.34
    harness records (see the module docstring). Returns (0.33 steps, 0.34 steps)."""
    runs = pd.read_parquet(SRC / "runs.parquet")
    steps = pd.read_parquet(SRC / "steps.parquet")
    runs, steps = runs[runs.run_id.isin(PICK)].copy(), steps[steps.run_id.isin(PICK)].copy()
    assert set(runs.run_id) == set(PICK)
    (out / "v033").mkdir(parents=True)
    runs.to_parquet(out / "v033" / "runs.parquet")
    steps.to_parquet(out / "v033" / "steps.parquet")
    r34, s34 = runs.copy(), steps.copy()
    for df in (r34, s34):
        df["run_id"] = df["run_id"].str.replace("-v033", "-v034synth")
    r34["vllm_version"] = "0.34.0"
    r34["runner"], r34["async_scheduling"], r34["scheduler_cls"] = "v2", True, "AsyncScheduler"
    r34["config"] = r34["config"].replace({"kpad": "suffix"})      # 0.34: K-pad is built in
    r34["harness"], r34["draft_count"], r34["force_copy"] = "trace_replay", "slots", "trace-replay"
    s34["num_pad_drafts"] = s34["num_spec_tokens"]                 # all slots are placeholders
    s34["num_drafting_reqs"] = 0                                   # the drafter is on the GPU
    (out / "v034").mkdir()
    r34.to_parquet(out / "v034" / "runs.parquet")
    s34.to_parquet(out / "v034" / "steps.parquet")
    assert (s34["num_spec_tokens"] > 0).any()                      # K-pad decode steps are in
    return len(steps), len(s34)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("v034records")
    return out, synthesise(out)


def test_fit_reads_034_records_apart_from_033s_and_says_how(records):
    folder, (n33, n34) = records
    doc = fit_calibration(folder, "test-h200-vllm034", "h200", None, (), 2, "0.34")
    assert doc["vllm_version"] == "0.34"
    assert doc["left_out"] == {"runs of another vLLM version than 0.34": {"runs": len(PICK),
                                                                       "steps": n33}}
    assert 0 < doc["n_steps"] <= n34 and sorted(doc["runs"]) == sorted(
        r.replace("-v033", "-v034synth") for r in PICK)
    assert SLOTS_NOTE in doc["notes"]
    if "0.34" not in VERSIONS:      # until the catalogue has 0.34's rules: said, not refused
        assert any("vLLM 0.34 is newer" in n for n in doc["notes"])
    # no host drafting on 0.34: the host drafting terms are not fitted from these runs
    assert {"suffix_step_s", "suffix_req_s", "suffix_accept_s"} <= set(doc["not_fitted"])
    assert "suffix_step_s" not in doc["fitted"]
    # the slot count is what the verify/sampling host terms read: they are fitted
    assert any(k.startswith("sample") or k.startswith("async_runner.sample")
               for k in doc["fitted"]), doc["fitted"]


def test_a_slots_run_with_host_drafting_requests_is_refused(tmp_path):
    synthesise(tmp_path)
    p = tmp_path / "v034" / "steps.parquet"
    s = pd.read_parquet(p)
    s.loc[s.index[5], "num_drafting_reqs"] = 3
    s.to_parquet(p)
    with pytest.raises(InputError, match="not 0.34 harness records") as exc:
        fit_calibration(tmp_path, "x", "h200", None, (), 2, "0.34")
    assert exc.value.field == "num_drafting_reqs"


def test_calibrate_fit_takes_a_newer_version_names_it_and_warns(records, capsys, tmp_path):
    folder, (n33, _) = records
    out = tmp_path / "cal.json"
    code, stdout, err = run(capsys, "calibrate", "fit", "--records", str(folder), "--folds", "2",
                            "--vllm-version", "0.34", "--out", str(out))
    assert code == 0, err
    assert stdout.startswith("fitted h200-vllm034 (h200, vLLM 0.34) on ")
    assert json.loads(out.read_text())["vllm_version"] == "0.34"
    if "0.34" not in VERSIONS:
        assert "warning: vLLM 0.34 is newer than the vLLM versions simkit has engine rules" in err
    assert "note: vLLM 0.34 records: num_spec_tokens counts the K slots" in stdout
    code, stdout, err = run(capsys, "calibrate", "fit", "--records", str(folder), "--folds", "2",
                            "--vllm-version", "0.34", "--format", "json")
    head = json.loads(stdout)
    assert code == 0 and head["name"] == "h200-vllm034" and head["vllm_version"] == "0.34"
    assert any(n.startswith("vLLM 0.34 records: num_spec_tokens counts the K slots")
               for n in head["notes"])


def test_calibrate_fit_refuses_an_older_unknown_version_in_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "calibrate", "fit", "--records", str(tmp_path),
                       "--vllm-version", "0.30")
    assert code != 0
    one_line_error(err, "vLLM version", "0.30")
