"""`simkit validate` on the committed real H200 records: request reconstruction, the steady
window, the JSON document and its aggregates, and the CLI on a small subset of runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.paths import traces_src_dir
from simkit.validation.measured import DEFAULT_DIR, load_records

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")
SUBSET = ["qwen2.5-32b_vanilla_summarization_c32_n96", "qwen2.5-32b_kpad4_summarization_c32_n96",
          "qwen2.5-32b_suffix24_summarization_c32_n96"]


@pytest.fixture(scope="module")
def records():
    from simkit.costmodel.step_records import select_version

    steps, runs = load_records(DEFAULT_DIR)
    assert runs is not None and len(runs) == 199 + 191         # vLLM 0.26 and 0.33 records
    assert len(select_version(runs, "0.33")) == 191
    return steps, runs


@needs_traces
@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_requests_rebuilt_match_every_run(records):
    """Same requests as the GPU runs: count and total output tokens of every run (runs.
    total_output_tokens and the sum of the steps' emitted tokens): the 199 vLLM 0.26 runs (70B
    at TP=2, hot, repeat and dynamic-K runs included) and the 167 vLLM 0.33 runs of a corpus
    (the fleet streams are rebuilt by tests/integration/test_fleet_validation.py)."""
    from simkit.validation.requests import check_against_run, request_pool, run_requests

    steps, runs = records
    # each run's steps, split once (the same rows in the same order as a mask per run, which
    # compared all 400 k run ids 345 times: 3 s)
    by_run = dict(tuple(steps.groupby("run_id", sort=False)))
    pools: dict = {}
    checked = 0
    for run in runs.to_dict("records"):
        if str(run["corpus"]).startswith("fleet-"):
            continue
        checked += 1
        key = (run["model"], run["corpus"])
        pools.setdefault(key, request_pool(*key))
        reqs, skipped = run_requests(pools[key], run)
        check = check_against_run(reqs, run, by_run.get(run["run_id"], steps.iloc[:0]))
        assert check["ok"], (run["run_id"], check)
        assert skipped == json.loads(run["requests_skipped"])
        assert max(len(r.output_ids) for r in reqs) <= run["max_tokens_cap"]
        # prefill scheduled can only be less than the prompts (prefix-cache hits), never more
        assert check["steps_prefill_tokens"] <= check["prompt_tokens"]
    assert checked == 199 + 167         # 0.33: 50 day-1 and 117 later runs outside the fleet streams


@needs_traces
def test_check_detects_a_wrong_request_set(records):
    from simkit.validation.requests import check_against_run, request_pool, run_requests

    steps, runs = records
    run = runs[runs["run_id"] == SUBSET[0]].iloc[0].to_dict()
    reqs, _ = run_requests(request_pool(run["model"], run["corpus"], seed=1), run)
    assert not check_against_run(reqs, run)["ok"]


def test_window_opens_at_first_completion():
    """window_start_completion=1 is the records' rule (first completion -> last admission);
    the engine default (C-th completion) differs. Two clients, outputs 5, 50, 40, 40 tokens:
    request 0 ends at step 5; request 2, admitted then, ends 39 decode steps after the step
    that prefills it, and request 3 is the last admission there."""
    from calibrate.records import steady_window
    from simkit.costmodel import load_cost_model
    from simkit.engine import ClosedLoop, EngineConfig, Workload, simulate
    from simkit.engine.config import vanilla

    w = Workload(np.array([20, 20, 20, 20], np.int32), np.array([5, 50, 40, 40], np.int32), {})
    cost = load_cost_model("llama-3.1-8b", "h200")
    res = simulate(w, cost, EngineConfig(), vanilla(), load=ClosedLoop(2), shuffle=False,
                   keep_steps=True, window_start_completion=1)
    ends = np.cumsum([c.step_s for _, c in res.step_log])
    prefill2 = next(i for i, (d, _) in enumerate(res.step_log) if i >= 5 and d.num_prefill_tokens)
    r2_end = prefill2 + 39                      # index of the step emitting its 40th token
    m = res.metrics
    assert m.window_kind == "steady"
    assert m.window_start_s == pytest.approx(ends[4])
    assert m.window_end_s == pytest.approx(ends[r2_end])
    ref = steady_window([ends[4], ends[r2_end], ends[49]], ends[r2_end], ends[-1])
    assert (m.window_start_s, m.window_end_s) == pytest.approx((ref.t0, ref.t1))
    default = simulate(w, cost, EngineConfig(), vanilla(), load=ClosedLoop(2), shuffle=False)
    assert default.metrics.window_kind == "full-run"     # 2nd completion == last admission


def test_aggregates_from_cells():
    from simkit.validation.report import best_k_agreement, mape

    def cell(purpose, k, meas, pred, corpus="math"):
        return {"purpose": purpose, "model": "m", "corpus": corpus, "concurrency": 32,
                "num_requests": 128, "config": f"kpad-{k}", "k": k, "measured_tok_s": meas, "predicted_tok_s": pred,
                "error": pred / meas - 1}

    cells = [cell("validation", 4, 100.0, 110.0), cell("validation", 8, 120.0, 96.0),
             cell("calibration", 4, 50.0, 50.0, "chat"), cell("calibration", 8, 40.0, 60.0, "chat")]
    assert mape(cells, "validation") == pytest.approx(15.0)
    assert mape(cells, "calibration") == pytest.approx(25.0)
    b = best_k_agreement(cells, "validation")
    assert (b["matched"], b["total"]) == (0, 1)
    g = b["cells"][0]
    assert (g["measured_best_k"], g["predicted_best_k"]) == (8, 4)
    assert g["lost_tok_s_frac"] == pytest.approx(1 - 100 / 120)
    assert best_k_agreement(cells, "calibration")["cells"][0]["lost_tok_s_frac"] == \
        pytest.approx(1 - 40 / 50)


def test_repeats_are_averaged_per_k_and_regimes_kept_apart():
    """Two runs of K=4 (100 and 140 tok/s, mean 120) against one of K=8 (110): K=4 is the
    measured best only after averaging; a synchronised-forcing run is its own group; the
    repeatability spread of the K=4 pair is 140/100 - 1."""
    from simkit.validation.report import best_k_agreement, repeatability

    def cell(run_id, k, meas, pred, forcing="overlapped"):
        return {"run_id": run_id, "purpose": "validation", "model": "m", "corpus": "math",
                "concurrency": 32, "num_requests": 64, "forcing": forcing,
                "config": f"kpad-{k}", "k": k, "measured_tok_s": meas, "predicted_tok_s": pred,
                "error": pred / meas - 1}

    cells = [cell("a", 4, 100.0, 105.0), cell("b", 4, 140.0, 105.0), cell("c", 8, 110.0, 100.0),
             cell("d", 8, 200.0, 90.0, forcing="synchronised")]
    b = best_k_agreement(cells)
    assert b["total"] == 1                      # the synchronised K=8 run has no K=4 partner
    g = b["cells"][0]
    assert (g["measured_best_k"], g["predicted_best_k"], g["repeats"]) == (4, 4, {4: 2})
    r = repeatability(cells)
    assert [grp["runs"] for grp in r["groups"]] == [["a", "b"]]
    assert r["max_spread"] == pytest.approx(0.4)


@needs_traces
@pytest.mark.slow
def test_cli_json_on_real_subset(tmp_path):
    from simkit.cli import app

    args = ["validate", "--vllm-version", "0.26", "--format", "json", "--plot",
            str(tmp_path / "v.png")]
    for r in SUBSET:
        args += ["--run-id", r]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    # one line of progress, not one "predicted <run>" line per run (196 on the whole records)
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        "predicting each measured run of vLLM 0.26 under its own conditions",
        f"wrote {tmp_path / 'v.png'}"], res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert {"cells", "mape", "mape_calibration", "best_k_agreement", "dynamic_k"} <= set(doc)
    assert [c["run_id"] for c in doc["cells"]] == sorted(SUBSET)
    for c in doc["cells"]:
        assert {"model", "corpus", "config", "k", "concurrency", "measured_tok_s",
                "predicted_tok_s", "error", "measured_accepted_per_step",
                "predicted_accepted_per_step"} <= set(c)
        assert c["requests_match_records"]
        assert c["error"] == pytest.approx(c["predicted_tok_s"] / c["measured_tok_s"] - 1,
                                           abs=1e-5)
        if c["config"] != "vanilla":      # the acceptance replay against vLLM's own counts
            assert c["predicted_accepted_per_step"] == pytest.approx(
                c["measured_accepted_per_step"], rel=0.02)
        else:
            assert c["predicted_tok_s_stock_async"] > 0
    errs = [abs(c["error"]) for c in doc["cells"]]
    assert doc["mape"] == pytest.approx(100 * sum(errs) / len(errs), abs=1e-4)
    assert doc["mape_calibration"] is None
    assert doc["dynamic_k"]["status"] == "not measured"
    assert (tmp_path / "v.png").stat().st_size > 0
    again = CliRunner().invoke(app, args)
    assert again.stdout == res.stdout                       # deterministic
    table = CliRunner().invoke(app, ["validate", "--vllm-version", "0.26", "--run-id", SUBSET[1]])
    assert table.exit_code == 0 and "MAPE held-out" in table.stdout


def test_cli_rejects_bad_options():
    from simkit.cli import app

    res = CliRunner().invoke(app, ["validate", "--purpose", "bogus"])
    assert res.exit_code != 0
    res = CliRunner().invoke(app, ["validate", "--run-id", "no-such-run"])
    assert res.exit_code != 0


def test_run_conditions_cost_on_recorded_steps(records):
    """Synchronous step = device + host (never below the async step); the in-thread front-end
    adds frontend_req_s x requests on top; non-vanilla steps are unchanged by `sync`."""
    from simkit.costmodel.step_records import batch_from_row
    from simkit.costmodel.run_conditions import run_cost

    steps, runs = records
    for rid in ("llama-3.1-8b_vanilla_math_c32_n128", "llama-3.1-8b_kpad8_math_c32_n128"):
        run = runs[runs["run_id"] == rid].iloc[0].to_dict()
        rows = steps[steps["run_id"] == rid].iloc[::50].to_dict("records")
        sync = run_cost(run, serial_frontend=False)
        both = run_cost(run)
        stock = run_cost(run, sync=False, serial_frontend=False)
        front = both.base.coefs.frontend_req_s / both.base.host_speed
        gained = 0
        for row in rows:
            b = batch_from_row(row)
            cs, cb, ck = sync.step_cost(b), both.step_cost(b), stock.step_cost(b)
            assert cs.step_s == pytest.approx(max(cs.device_s + cs.host_s,
                                                  front * b.num_reqs))
            assert cb.step_s == pytest.approx(cs.device_s + cs.host_s + front * b.num_reqs)
            assert cs.step_s >= ck.step_s - 1e-12
            if not b.async_scheduling:
                assert ck.step_s == pytest.approx(cs.step_s)
            gained += cs.step_s > ck.step_s * 1.01
        assert (gained > 0) == (run["config"] == "vanilla")   # overlap removed only there


@needs_traces
def test_a_run_whose_rebuilt_requests_differ_is_refused_before_any_simulation(records):
    """A run the traces here cannot rebuild (one output token more on record) is one error that
    names it and both counts; no prediction of other requests is printed as if it were its own."""
    from simkit.errors import InputError
    from simkit.validation.report import build_cells

    steps, runs = records
    one = runs[runs["run_id"] == SUBSET[0]].copy()
    one["total_output_tokens"] += 1
    with pytest.raises(InputError) as e:
        build_cells(one, steps, purpose="all", calibration="h200-vllm026")
    msg = str(e.value)
    assert SUBSET[0] in msg and "do not match the records of 1 run(s)" in msg
    assert f"{int(one['total_output_tokens'].iloc[0])} recorded" in msg
