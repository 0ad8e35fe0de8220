"""The per-run host-speed index (simkit.validation.host_speed), read from a run's own host-stage
records, and the diagnostic that predicts a run on the host speed it shows."""
import math

import pytest

from simkit.costmodel.run_conditions import run_cost
from simkit.costmodel.step_records import select_version
from simkit.paths import traces_src_dir
from simkit.validation.host_speed import (by_sitting, host_indices, known_host_error,
                                          run_host_index, spread)
from simkit.validation.measured import load_records

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="the raw traces (../shared/traces-src) are not here")
CHAT = "llama-3.1-8b_suffix24-v033{}_chat_c32_n64"     # one setting on several hosts


@pytest.fixture(scope="module")
def records():
    steps, runs = load_records(None)
    return steps, select_version(runs, "0.33").reset_index(drop=True)


def _one(records, rid):
    steps, runs = records
    run = runs[runs["run_id"] == rid].iloc[0].to_dict()
    return run, steps[steps["run_id"] == rid]


def test_the_index_reads_host_stage_times_only(records):
    run, st = _one(records, CHAT.format(""))
    cost = run_cost(run).base
    base = run_host_index(run, st, cost)
    assert 0.5 < base["index"] < 2.0 and base["steps"] > 100
    slow = st.copy()                    # the same run on a host twice as slow
    for col in ("t_schedule_s", "t_prepare_s", "t_draft_s", "t_update_s", "t_exec_host_s"):
        slow[col] = 2 * slow[col]
    slow["t_forward_s"] = 2 * slow["t_forward_s"]     # so the same steps count as waited
    halved = run_host_index(run, slow, cost)["index"]
    assert halved == pytest.approx(base["index"] / 2, rel=0.02)
    # its throughput never enters: another measured tok/s, the same index
    assert run_host_index({**run, "output_tok_s": 1.0}, st, cost)["index"] == base["index"]


def test_the_same_setting_on_three_hosts_orders_as_their_throughput(records):
    """Suffix chat c32 on day 1, 6 minutes later, and on another machine: the host stages say
    the hosts ran in the order their throughput did."""
    steps, runs = records
    ids = [CHAT.format(t) for t in ("", "-rep2", "-1203c")]
    idx = host_indices(runs[runs["run_id"].isin(ids)], steps)
    got = [idx[r]["index"] for r in ids]
    tok = [float(runs.loc[runs["run_id"] == r, "output_tok_s"].iloc[0]) for r in ids]
    assert got[0] > got[1] > got[2] and tok[0] > tok[1] > tok[2]


def test_spread_and_sittings():
    idx = {"a": {"log_index": 0.1}, "b": {"log_index": -0.1}, "c": {"log_index": 0.3},
           "d": {"log_index": None}}
    s = spread(idx, {"a", "b"})
    assert s["runs"] == 2 and s["mean_log"] == pytest.approx(0.0)
    assert s["rms_log"] == pytest.approx(0.1) and s["sd_log"] == pytest.approx(math.sqrt(0.02))
    assert spread(idx)["runs"] == 3 and spread(idx, set())["rms_log"] is None
    per = by_sitting(idx, {"a": "m1", "b": "m1", "c": "m2", "d": "m2"})
    assert per["m1"]["runs"] == 2 and per["m2"]["runs"] == 1


@needs_traces
def test_the_slow_host_run_is_predicted_closer_on_its_own_host_speed(records):
    """The held-out suffix chat run on the slow third machine is over-predicted by 44 %; on
    the host speed its records show (0.79), by 28 %: the host explains part of that miss, not
    all; a factor of 1 changes nothing (the plain figure is validate's)."""
    steps, runs = records
    sel = runs[runs["run_id"] == CHAT.format("-1203c")]
    idx = host_indices(sel, steps)
    diag = known_host_error(sel, steps, idx)
    assert diag["runs"] == 1 and idx[CHAT.format("-1203c")]["index"] < 0.9
    assert diag["mape_pct"] > 25 and diag["mape_if_host_speed_known_pct"] < 0.75 * diag["mape_pct"]
    unit = known_host_error(sel, steps, {k: {**v, "index": 1.0} for k, v in idx.items()})
    assert unit["mape_if_host_speed_known_pct"] == pytest.approx(unit["mape_pct"])
