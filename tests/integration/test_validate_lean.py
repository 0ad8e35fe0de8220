"""What `simkit validate` skips where nothing reads it: the unseen-day refits' cells without the
diagnosis (no recorded-step pricing, no stock-async second simulation), with the same error and
interval as the full cells; a run's steps sliced, not copied, where the records keep them
together."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from simkit.paths import traces_src_dir
from simkit.validation.measured import DEFAULT_DIR, load_records

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")


@needs_traces
def test_cells_without_diagnosis_keep_the_figures_and_skip_its_work(monkeypatch):
    from simkit.costmodel.step_records import forcing_synchronised, select_version
    from simkit.validation import report

    steps, runs = load_records(DEFAULT_DIR)
    runs = select_version(runs, "0.26")        # its synchronised vanilla runs (0.33 has none)
    sync_vanilla = runs[(runs["config"].astype(str) == "vanilla")
                       & runs["force_copy"].astype(str).map(forcing_synchronised)
                       & (runs["num_requests"] <= 128)]
    assert len(sync_vanilla), "no synchronised vanilla run to check the saved simulation on"
    ids = [str(sync_vanilla["run_id"].iloc[0])]
    monkeypatch.setattr(os, "cpu_count", lambda: 1)        # in this process: calls counted
    calls = {"predict": 0, "recorded": 0}
    real_predict, real_recorded = report.predict_run, report.recorded_step_error

    def predict(*a, **kw):
        calls["predict"] += 1
        return real_predict(*a, **kw)

    def recorded(*a, **kw):
        calls["recorded"] += 1
        return real_recorded(*a, **kw)

    monkeypatch.setattr(report, "predict_run", predict)
    monkeypatch.setattr(report, "recorded_step_error", recorded)
    full = report.build_cells(runs, steps, purpose="all", run_ids=ids)
    full_calls = dict(calls)
    calls.update(predict=0, recorded=0)
    lean = report.build_cells(runs, steps, purpose="all", run_ids=ids, diagnosis=False)
    assert full_calls == {"predict": 2, "recorded": 1}       # the stock-async run is a second one
    assert calls == {"predict": 1, "recorded": 0}
    for a, b in zip(full, lean):
        assert "diagnosis" in a and "diagnosis" not in b
        assert "predicted_tok_s_stock_async" in a and "predicted_tok_s_stock_async" not in b
        for key in ("run_id", "purpose", "history", "measured_tok_s", "predicted_tok_s", "error",
                    "predicted_interval"):
            assert a[key] == b[key], key


def test_rows_at_is_the_take_it_replaces():
    from simkit.validation.report import _rows_at

    frame = pd.DataFrame({"run_id": ["a", "a", "b", "b", "b", "a"], "x": np.arange(6),
                          "s": pd.array(list("uvwxyz"), dtype="string")}, index=[9, 8, 7, 6, 5, 4])
    at = frame.groupby("run_id", sort=False).indices
    for positions in (at["a"], at["b"], np.array([], np.int64)):
        got, want = _rows_at(frame, positions), frame.iloc[positions]
        assert got.equals(want) and list(got.index) == list(want.index)


def test_a_prompt_is_hashed_once_per_process_with_the_same_chains(monkeypatch):
    from simkit import block_hash
    from simkit.app import cells
    from simkit.choices import Ordering
    from simkit.validation.requests import RunRequest

    rng = np.random.default_rng(7)
    reqs = [RunRequest(rng.integers(0, 50000, n).astype(np.int32), np.arange(5, dtype=np.int32))
            for n in (40, 7, 300, 40)]
    run = {"model": "m", "corpus": "c", "run_id": "r", "config": "vanilla", "history": "cold"}
    want = block_hash.pack(block_hash.prompt_block_hashes(r.prompt_ids) for r in reqs)
    monkeypatch.setattr(cells, "_CHAINS", {})
    hashed = []
    real = block_hash.prompt_block_hashes
    monkeypatch.setattr(block_hash, "prompt_block_hashes",
                        lambda ids, *a: hashed.append(len(ids)) or real(ids, *a))
    for _ in range(2):
        got = cells.run_workload(reqs, run, Ordering.CONCURRENT).block_hashes
        assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))
    assert sorted(hashed) == [7, 40, 40, 300]          # each prompt once, not once per run


def test_run_conditions_closure_prices_as_its_methods():
    """RunConditionsCost.step_cost (the closure validate prices every step with) gives the
    StepCost of the method path it folds (_step_cost -> _one_thread), float for float, on a
    measured run's recorded batches, also after pickling."""
    import pickle

    from simkit.costmodel.run_conditions import run_cost
    from simkit.costmodel.step_records import batches, select_version

    steps, runs = load_records(DEFAULT_DIR)
    runs = select_version(runs, "0.33")
    checked = 0
    vanilla = runs["config"].astype(str) == "vanilla"
    for pick in (vanilla, ~vanilla):
        run = runs[pick].iloc[0].to_dict()
        cost = run_cost(run)
        assert cost.step_cost.__name__ == "step_cost" and cost._step_terms and not cost.sync
        again = pickle.loads(pickle.dumps(cost))
        for b in batches(steps[steps["run_id"] == run["run_id"]].iloc[::7]):
            want = cost._step_cost(b)
            assert cost.step_cost(b) == want and again.step_cost(b) == want
            checked += 1
    assert checked > 100
