"""The per-day split of `simkit validate` (simkit.validation.transfer): days from started_utc,
figures per day and purpose, the one-day case said as not measured, and the refits fitted ahead
in a forked process the same as in place."""

import json
import os

import pandas as pd
import pytest

from simkit.validation.table import render
from simkit.validation.transfer import by_day, run_days, unseen_days


def cell(run_id, purpose, error, history="cold"):
    return {"run_id": run_id, "purpose": purpose, "error": error, "history": history}


def test_days_come_from_the_start_time_in_utc():
    runs = pd.DataFrame({"run_id": ["a", "b", "c"],
                         "started_utc": ["2026-12-02T05:53:05+00:00", "2026-12-02T23:59:59-01:00",
                                         "2026-12-03T08:00:00+00:00"]})
    assert run_days(runs) == {"a": "2026-12-02", "b": "2026-12-03", "c": "2026-12-03"}


def test_figures_per_day_and_purpose():
    days = {"a": "d1", "b": "d1", "c": "d2", "d": "d2"}
    cells = [cell("a", "validation", 0.10), cell("b", "validation", -0.02, "hot"),
             cell("c", "validation", 0.04), cell("d", "calibration", -0.06)]
    got = by_day(cells, days)
    assert got["d1"]["validation"]["mape"] == pytest.approx(6.0) and got["d1"]["validation"]["runs"] == 2
    assert got["d1"]["validation"]["mape_hot_repeat"] == pytest.approx(2.0)
    assert "calibration" not in got["d1"]
    assert got["d2"]["calibration"]["mape"] == pytest.approx(6.0)


def test_one_day_is_not_measured_and_says_why():
    runs = pd.DataFrame({"run_id": ["a", "b"], "purpose": ["calibration", "validation"],
                         "corpus": ["chat", "math"],
                         "started_utc": ["2026-12-02T05:53:05+00:00", "2026-12-02T06:00:00+00:00"]})
    got = unseen_days(runs, None, "0.33")
    assert got["status"] == "not measured" and "2026-12-02" in got["why"]
    doc = {"cells": [], "mape": None, "mape_calibration": None, "best_k_agreement": {"total": 0},
           "best_k_agreement_calibration": {"total": 0}, "acceptance_replay": {},
           "dynamic_k": {"status": "measured", "sign_agreement": "0 of 0", "mean_abs_gain_error": 0,
                         "cells": []},
           "by_day": {"2026-12-02": {"validation": {"runs": 1, "mape": 5.0, "hot_repeat_runs": 0,
                                                     "mape_hot_repeat": None}}},
           "unseen_day": got}
    text = render(doc)
    assert "2026-12-02 held-out 5.0 % (1 runs)" in text and "unseen-day error: not measured" in text


def test_an_unseen_day_is_refitted_the_way_the_shipped_calibration_was():
    from simkit.validation.transfer import shipped_step_terms

    assert shipped_step_terms("0.26") is False     # h200-vllm026 predates the step terms
    assert shipped_step_terms("0.33") is True


def test_a_refit_that_is_the_shipped_calibration_reuses_its_predictions(tmp_path):
    """shipped_fit names the shipped calibration only when the refit has its fitted runs and
    coefficients (then validate's own predictions are the refit's); any other fit is simulated."""
    import json

    from simkit.costmodel.calibrations import default_calibration
    from simkit.validation.refresh import CAL033
    from simkit.validation.transfer import shipped_fit

    doc = json.loads(CAL033.read_text())
    refit = {k: v for k, v in doc.items() if k not in ("interval", "validation")}
    path = tmp_path / "refit.json"
    path.write_text(json.dumps(refit))
    assert shipped_fit(path, "0.33") == default_calibration("h200", "0.33")
    other = dict(refit, runs=refit["runs"][1:])
    path.write_text(json.dumps(other))
    assert shipped_fit(path, "0.33") is None
    coefs = dict(refit["coefficients"])
    name = next(iter(coefs))
    coefs[name] = coefs[name] * 1.01 + 1e-9
    path.write_text(json.dumps(dict(refit, coefficients=coefs)))
    assert shipped_fit(path, "0.33") is None


def test_refits_fitted_ahead_are_the_refits_fitted_in_place(monkeypatch):
    """Refits.start fits every day after the first in a forked process; fitted() reads the same
    files and step counts a fit in this process writes, and falls back to that fit when the
    forked one failed."""
    from simkit.validation import transfer

    def fake_fit(fittable, version, run_ids, out):
        out.write_text(json.dumps(sorted(run_ids)))
        return len(run_ids) * 10

    monkeypatch.setattr(transfer, "_fit_on", fake_fit)
    monkeypatch.setattr("simkit.costmodel.fit.load_record_dir", lambda *a: (None, None))
    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"],
                         "purpose": ["calibration", "validation", "calibration", "validation"],
                         "corpus": ["chat", "math", "chat", "math"],
                         "started_utc": ["2026-12-02T05:00:00+00:00", "2026-12-02T06:00:00+00:00",
                                         "2026-12-03T05:00:00+00:00", "2026-12-04T06:00:00+00:00"]})
    ahead, here = transfer.Refits.start(runs, "0.33"), transfer.Refits(runs, "0.33", None)
    try:
        assert ahead.fitted() == here.fitted() == {"2026-12-03": 10, "2026-12-04": 20}
        for day in ("2026-12-03", "2026-12-04"):
            assert ahead.path(day).read_text() == here.path(day).read_text()
    finally:
        ahead.close()
        here.close()
    monkeypatch.setattr("simkit.validation.background.Background._child",
                        lambda self: os._exit(1))
    failed = transfer.Refits.start(runs, "0.33")
    try:
        assert failed.fitted() == {"2026-12-03": 10, "2026-12-04": 20}
    finally:
        failed.close()
    assert not failed.dir.exists()


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_refits_from_the_records_validate_holds_equal_refits_read_again():
    """Refits given the records validate has read (`loaded`) write, byte for byte, the refits
    made from reading the record folder again (fit_frame is load_record_dir's filter)."""
    from simkit.costmodel.step_records import select_version
    from simkit.validation.measured import load_records
    from simkit.validation.transfer import Refits

    steps, runs = load_records()
    if runs is None:
        pytest.skip("no committed records")
    sel = select_version(runs, "0.33")
    read, held = Refits(sel, "0.33", None), Refits(sel, "0.33", None, (steps, runs))
    try:
        fitted = read.fitted()
        assert fitted and held.fitted() == fitted
        for day in fitted:
            assert held.path(day).read_bytes() == read.path(day).read_bytes()
    finally:
        read.close()
        held.close()
