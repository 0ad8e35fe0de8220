"""The interval's drift per runner class (simkit.validation.spread) and the rule that decides
whether a calibration ships it (simkit.validation.interval_rule)."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from simkit.validation.interval_rule import choose
from simkit.validation.spread import class_sigma, rerun_interval

CAL = Path(__file__).resolve().parents[2] / "simkit/data/calibrations/h200-vllm033.json"


def _run(run_id, tok, config, purpose="calibration"):
    return {"run_id": run_id, "model": "m", "corpus": "c", "config": config,
            "k": 0 if config == "vanilla" else 4, "concurrency": 32, "num_requests": 64,
            "force_copy": "pinned-ring-fill", "history": "cold", "purpose": purpose,
            "async_scheduling": config == "vanilla", "output_tok_s": tok}


def _cell(run_id, pred, meas, runner, purpose="calibration"):
    return {"run_id": run_id, "purpose": purpose, "predicted_tok_s": pred,
            "measured_tok_s": meas, "runner": runner}


RUNS = pd.DataFrame([_run("v1", 100.0, "vanilla"), _run("v2", 102.0, "vanilla"),
                     _run("k1", 100.0, "kpad"), _run("k2", 130.0, "kpad"),
                     _run("hv", 100.0, "vanilla", "validation"),
                     _run("hk", 100.0, "kpad", "validation")])
FIT = {"v1", "v2", "k1", "k2"}


def _cells(held_k_meas=100.0, held_v_meas=100.0):
    return [_cell("v1", 101.0, 100.0, "async"), _cell("v2", 101.0, 102.0, "async"),
            _cell("k1", 115.0, 100.0, "synchronous"), _cell("k2", 115.0, 130.0, "synchronous"),
            _cell("hv", 100.0, held_v_meas, "async", "validation"),
            _cell("hk", 100.0, held_k_meas, "synchronous", "validation")]


def test_each_class_takes_its_own_drift_and_the_residual_of_every_fitted_run():
    cells = _cells()
    block = rerun_interval(cells, RUNS, FIT, by_runner=True)
    resid = block["residual_sigma_log"]
    for runner, (a, b) in (("async", (100.0, 102.0)), ("synchronous", (100.0, 130.0))):
        drift = abs(math.log(b / a)) / math.sqrt(2)           # one pair: ss over one dof
        part = block["by_runner"][runner]
        assert part["drift_sigma_log"] == pytest.approx(drift, abs=1e-6)
        assert part["sigma_log"] == pytest.approx(math.hypot(drift, resid), abs=1e-6)
        assert class_sigma(block, runner) == part["sigma_log"]
    assert class_sigma(block, None) == block["sigma_log"]            # no class: the one sigma
    assert "by_runner" not in rerun_interval(cells, RUNS, FIT)
    assert block["by_runner"]["async"]["sigma_log"] < block["sigma_log"] < \
        block["by_runner"]["synchronous"]["sigma_log"]


def test_a_class_without_repeats_among_the_fitted_runs_takes_the_pooled_drift():
    block = rerun_interval(_cells(), RUNS, {"v1", "k1", "k2"}, by_runner=True)
    assert block["by_runner"]["async"]["drift_dof"] == 0
    assert block["by_runner"]["async"]["drift_sigma_log"] == block["drift_sigma_log"]


def test_the_rule_ships_the_class_interval_only_where_it_covers_more_unseen_runs():
    sittings = {r: "s1" for r in FIT} | {"hv": "s2", "hk": "s2"}
    # the held-out K-pad run measured 28 % under: inside the synchronous band only (+-41 %),
    # outside the one sigma (+-30 %)
    ship, doc = choose(_cells(held_k_meas=72.0), RUNS, FIT, sittings)
    assert ship and doc["shipped"] == "by runner class"
    assert doc["by_runner"]["unseen_sittings"]["inside"] == 2
    assert doc["one_sigma"]["unseen_sittings"]["inside"] == 1
    # both inside either band: no gain, so the one sigma stays
    ship, doc = choose(_cells(), RUNS, FIT, sittings)
    assert not ship and doc["shipped"] == "one sigma"
    # held-out runs of the fitted sitting are no evidence for another machine
    ship, _ = choose(_cells(held_k_meas=72.0), RUNS, FIT, {r: "s1" for r in sittings})
    assert not ship


def test_the_shipped_033_interval_says_what_the_rule_chose_and_scores_both():
    doc = json.loads(CAL.read_text())
    choice = doc["validation"]["interval_choice"]
    assert choice["shipped"] == ("by runner class" if doc["interval"].get("by_runner")
                                 else "one sigma")
    val = doc["validation"]
    shipped = choice["by_runner" if doc["interval"].get("by_runner") else "one_sigma"]
    assert shipped["held_out"] == {"inside": val["interval_inside"], "runs": val["interval_runs"]}
    for part in doc["interval"].get("by_runner", {}).values():
        assert part["sigma_log"] == pytest.approx(
            math.hypot(part["drift_sigma_log"], doc["interval"]["residual_sigma_log"]), abs=2e-6)
