"""Run-to-run drift interval of `simkit validate` (issue 16): pooled log-sd of repeats."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from simkit.validation.spread import Z90, coverage, drift_sigma, interval

DATA = Path(__file__).resolve().parents[2] / "calibrate" / "data" / "runs.parquet"


def _run(tok, purpose="calibration", conc=32, force="pinned-ring-fill", history="cold"):
    return {"model": "m", "corpus": "c", "config": "kpad", "k": 4, "concurrency": conc,
            "num_requests": 64, "force_copy": force, "history": history, "purpose": purpose,
            "output_tok_s": tok}


def test_pooled_sigma_by_hand():
    runs = pd.DataFrame([_run(100.0), _run(121.0), _run(50.0, conc=8), _run(50.0, conc=8),
                         _run(999.0, conc=1), _run(5.0, purpose="validation"),
                         _run(500.0, purpose="validation")])
    d = drift_sigma(runs)
    # group 1: log 100, log 121 -> ss = (ln 1.21)^2 / 2; group 2: ss = 0; one dof each
    assert (d["groups"], d["dof"]) == (2, 2)
    assert d["sigma_log"] == pytest.approx(math.sqrt(math.log(1.21) ** 2 / 2 / 2))
    assert drift_sigma(runs, purpose="validation")["groups"] == 1   # held-out never mixes in


def test_different_forcing_or_history_is_not_a_repeat():
    runs = pd.DataFrame([_run(100.0), _run(200.0, force="pageable-sync"),
                         _run(300.0, history="hot")])
    assert drift_sigma(runs)["sigma_log"] is None


def test_interval_and_coverage():
    lo, hi = interval(1000.0, 0.1)
    assert lo == pytest.approx(1000 * math.exp(-Z90 * 0.1)) and hi == pytest.approx(
        1000 * math.exp(Z90 * 0.1))
    assert interval(1000.0, None) is None
    cells = [{"purpose": "validation", "measured_tok_s": 1100.0, "predicted_interval": (900, 1200)},
             {"purpose": "validation", "measured_tok_s": 1300.0, "predicted_interval": (900, 1200)},
             {"purpose": "calibration", "measured_tok_s": 1.0, "predicted_interval": (2, 3)}]
    assert coverage(cells) == {"inside": 1, "cells": 2, "share": 0.5,
                               "median_half_width": None}     # these cells carry no prediction


def test_committed_records_give_a_drift_band():
    d = drift_sigma(pd.read_parquet(DATA))
    assert d["groups"] >= 5 and 0.01 < d["sigma_log"] < 0.3
