"""The interval a prediction carries (simkit.validation.spread): drift of the fitted runs'
repeats and the fit's residuals, in quadrature; a calibration without that block keeps the drift
band of its own fitted runs."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from simkit.validation.spread import (Z90, calibration_sigma, coverage, half_width, interval,
                                      rerun_interval, residual_sigma)
from simkit.validation.table import _interval_line

CAL = Path(__file__).resolve().parents[2] / "simkit/data/calibrations/h200-vllm033.json"


def _run(run_id, tok, purpose="calibration", conc=32):
    return {"run_id": run_id, "model": "m", "corpus": "c", "config": "kpad", "k": 4,
            "concurrency": conc, "num_requests": 64, "force_copy": "pinned-ring-fill",
            "history": "cold", "purpose": purpose, "output_tok_s": tok}


def _cell(run_id, pred, meas, purpose="calibration"):
    return {"run_id": run_id, "purpose": purpose, "predicted_tok_s": pred, "measured_tok_s": meas}


def test_residual_sigma_is_the_rms_of_log_errors_of_the_named_runs_only():
    cells = [_cell("a", 110.0, 100.0), _cell("b", 90.0, 100.0), _cell("z", 500.0, 100.0)]
    got = residual_sigma(cells, {"a", "b"})
    want = math.sqrt((math.log(1.1) ** 2 + math.log(0.9) ** 2) / 2)
    assert got["sigma_log"] == pytest.approx(want) and got["runs"] == 2
    assert residual_sigma(cells, set())["sigma_log"] is None


def test_the_interval_adds_drift_and_residual_in_quadrature_from_fitted_runs_only():
    # a and b repeat one setting; c repeats it too but was not fitted (a later day): left out
    runs = pd.DataFrame([_run("a", 100.0), _run("b", 121.0), _run("c", 300.0),
                         _run("v", 50.0, purpose="validation")])
    cells = [_cell("a", 110.0, 100.0), _cell("b", 110.0, 121.0), _cell("c", 110.0, 300.0)]
    block = rerun_interval(cells, runs, {"a", "b"})
    drift = math.sqrt(math.log(1.21) ** 2 / 2)               # ss of the pair over one dof
    resid = math.sqrt((math.log(1.1) ** 2 + math.log(110 / 121) ** 2) / 2)
    assert (block["drift_settings"], block["drift_dof"], block["residual_runs"]) == (1, 1, 2)
    assert block["drift_sigma_log"] == pytest.approx(drift, abs=1e-6)
    assert block["residual_sigma_log"] == pytest.approx(resid, abs=1e-6)
    assert block["sigma_log"] == pytest.approx(math.hypot(drift, resid), abs=1e-6)
    assert block["half_width_pct"] == pytest.approx(100 * math.sinh(Z90 * math.hypot(drift, resid)),
                                                    abs=1e-5)


def test_a_calibration_without_the_block_keeps_the_drift_of_its_own_fitted_runs():
    runs = pd.DataFrame([_run("a", 100.0), _run("b", 121.0), _run("c", 300.0)])
    assert calibration_sigma({"interval": {"sigma_log": 0.2}, "name": "x"}, runs)["sigma_log"] == 0.2
    only_fitted = calibration_sigma({"runs": ["a", "b"]}, runs)
    assert only_fitted["sigma_log"] == pytest.approx(math.sqrt(math.log(1.21) ** 2 / 2))
    assert only_fitted["source"].startswith("drift")
    everything = calibration_sigma(None, runs)["sigma_log"]      # no list: every calibration run
    assert everything > only_fitted["sigma_log"]


def test_coverage_reports_the_median_relative_half_width():
    cells = [{**_cell(r, 1000.0, m, "validation"), "predicted_interval": interval(1000.0, s)}
             for r, m, s in (("a", 1050.0, 0.05), ("b", 1300.0, 0.1), ("c", 1000.0, 0.2))]
    cov = coverage(cells)
    assert (cov["inside"], cov["cells"]) == (2, 3)
    assert cov["median_half_width"] == pytest.approx(half_width(0.1))


def test_the_table_says_how_the_interval_was_made():
    cov = {"inside": 9, "cells": 10, "median_half_width": 0.143}
    drift = _interval_line({"sigma_sources": ["drift of the repeated calibration runs"]}, cov)
    assert drift == ("90 % drift interval (from repeated calibration runs): measured inside it in "
                     "9 of 10 held-out runs")
    both = _interval_line({"sigma_sources": ["calibration h200-vllm033: drift and fit residuals"]},
                          cov)
    assert "fit residuals" in both and "+-14.3 %" in both and "9 of 10" in both


def test_the_shipped_033_calibration_carries_an_interval_from_its_fitted_runs():
    doc = json.loads(CAL.read_text())
    block = doc["interval"]
    assert block["residual_runs"] == len(doc["runs"]) and block["drift_settings"] >= 1
    assert block["sigma_log"] == pytest.approx(math.hypot(block["drift_sigma_log"],
                                                          block["residual_sigma_log"]), abs=1e-5)
    widths = ([f"+-{block['by_runner'][r]['half_width_pct']:.1f} % {r} runner"
               for r in ("synchronous", "async")] if block.get("by_runner")
              else [f"+-{block['half_width_pct']:.1f} %"])
    assert all(w in doc["validation"]["drift_interval_coverage"] for w in widths)
    val = doc["validation"]
    assert val["drift_interval_coverage"].startswith(
        f"{val['interval_inside']} of {val['interval_runs']} held-out runs")
    assert val["interval_runs"] == val["held_out_runs"]


def test_repeat_tie_is_the_90_pct_ratio_of_two_runs():
    from simkit.validation.spread import repeat_tie

    assert repeat_tie(0.1) == pytest.approx(math.exp(Z90 * math.sqrt(2) * 0.1) - 1)
    assert repeat_tie(None) is None


def test_best_configuration_within_the_repeat_spread_is_counted_beside_the_strict_call():
    from simkit.validation.report import best_config_agreement

    def c(corpus, config, meas, pred, tie=0.10):
        return {"purpose": "validation", "model": "m", "corpus": corpus, "concurrency": 32,
                "num_requests": 64, "max_tokens_cap": 1024, "forcing": "overlapped",
                "history": "cold", "config": config, "measured_tok_s": meas,
                "predicted_tok_s": pred, "repeat_tie_frac": tie}
    cells = [c("a", "vanilla", 1000, 900), c("a", "suffix-24", 1050, 950),     # strict hit
             c("b", "vanilla", 1000, 900), c("b", "suffix-24", 1080, 850),     # miss, 8 % gap
             c("d", "vanilla", 1000, 900), c("d", "suffix-24", 1200, 850)]     # miss, 20 % gap
    b = best_config_agreement(cells, "validation")
    assert (b["matched"], b["within_repeat_spread"], b["total"]) == (1, 2, 3)
    assert [g["within_repeat_spread"] for g in b["cells"]] == [True, True, False]
    assert b["cells"][1]["measured_gap"] == pytest.approx(0.08)
    # cells without a tie (a calibration with no interval) give no second figure
    plain = best_config_agreement([{**x, "repeat_tie_frac": None} for x in cells], "validation")
    assert plain["within_repeat_spread"] is None
