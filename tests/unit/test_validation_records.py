"""Validation helpers: record discovery, GPU-name mapping, and the step-level comparison wiring
(records drawn from the cost model itself must come back with zero error; that checks the
hardware/TP/drafter plumbing, not the model's accuracy, which only real records can judge)."""

from __future__ import annotations

import pytest

from simkit.validation import measured as V


def test_gpu_names_map_to_catalogue_hardware():
    from simkit.costmodel.step_records import hardware_of

    assert hardware_of("NVIDIA H200") == "h200"
    assert hardware_of("NVIDIA B200") == "b200"
    assert hardware_of("NVIDIA H100 80GB HBM3") == "h100"
    assert hardware_of("Tesla V100") is None


def test_no_records_is_reported_not_invented(tmp_path):
    assert V.find_records(tmp_path) == ([], [])
    assert V.load_records(tmp_path) == (None, None)


def test_step_comparison_is_exact_on_records_drawn_from_the_model(tmp_path):
    import pandas as pd

    from simkit.costmodel.coefficients import ANALYTIC
    from simkit.costmodel.synthetic import generate_step_records

    parts = []
    for i, (drafter, k) in enumerate((("none", 0), ("suffix", 4))):
        df = generate_step_records("llama-3.1-8b", "h200", 1, ANALYTIC, 200, seed=i,
                                   run_id=f"synthetic-{i}", drafter=drafter, k=k, noise=0.0)
        parts.append(df)
    steps = pd.concat(parts, ignore_index=True)
    runs = pd.DataFrame({"run_id": ["synthetic-0", "synthetic-1"], "model": "llama-3.1-8b",
                         "tp": 1, "async_scheduling": [True, False],
                         "config": ["vanilla", "suffix"], "gpu": "NVIDIA H200", "k": [0, 4]})
    steps.drop(columns=["drafter"]).to_parquet(tmp_path / "steps_x.parquet")
    runs.to_parquet(tmp_path / "runs_x.parquet")
    joined, runs_back = V.load_records(tmp_path)
    assert len(runs_back) == 2 and len(joined) == 400
    cmp_ = V.step_comparison(joined, calibration="analytic")   # the records' own coefficients
    assert len(cmp_) == 400 and set(cmp_["hardware"]) == {"h200"}
    assert cmp_["error"].abs().max() < 1e-9
