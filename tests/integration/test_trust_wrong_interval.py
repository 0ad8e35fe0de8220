"""Issue 41, the silently-wrong class, item 8: a user's own calibration (`calibrate fit`)
carries its own measured interval into every recommendation, stated like the shipped one; a
fit with too few runs to measure one says so and claims no more certainty than the shipped.

Each test here failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run
from cli_helpers import own_cache as _own_cache  # noqa: F401 (autouse)
from user_records import record_folder

PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "code-edit", "--configs",
           "vanilla,suffix", "--seeds", "1", "--num-requests", "96", "--source", "shipped",
           "--workers", "1")


# -- 8. a user's own calibration carries its own interval into every recommendation ------------

def _user_fit(capsys, tmp_path, repeats: bool) -> Path:
    root = tmp_path / ("rec-r" if repeats else "rec")
    record_folder(root, 1, repeats=repeats)
    out = tmp_path / ("fit-r.json" if repeats else "fit.json")
    code, _, err = run(capsys, "calibrate", "fit", "--records", str(root), "--out", str(out),
                       "--folds", "3")
    assert code == 0, err
    return out


def _interval_of(capsys, calibration: str) -> tuple[float | None, str, dict]:
    from simkit.report.render import interval_pct

    code, out, _ = run(capsys, *PREDICT, "--calibration", calibration, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    return interval_pct(doc["assumptions"]), doc["assumptions"]["cost_model"]["text"], doc


def test_a_user_fit_with_repeats_carries_its_own_measured_interval(capsys, tmp_path):
    """A user's own fit printed '+5.0 % over vanilla' with no interval, where the shipped one
    said 'tie within the error'."""
    import math

    from simkit.validation.spread import half_width

    fit = json.loads(_user_fit(capsys, tmp_path, repeats=True).read_text())
    band = fit["interval"]
    assert band["measured"] is True and band["drift_settings"] == 2
    # c0/c0r2 and c1/c1r2 measured 5 % apart: the drift is the pooled sd of their logs
    drift = math.log(1.05) / math.sqrt(2)
    assert band["drift_sigma_log"] == pytest.approx(drift, rel=1e-3)
    sigma = math.hypot(drift, band["residual_sigma_log"])
    assert band["half_width_pct"] == pytest.approx(100 * half_width(sigma), rel=1e-3)
    pct, text, _ = _interval_of(capsys, str(tmp_path / "fit-r.json"))
    assert pct == pytest.approx(max(v["half_width_pct"] for v in band["by_runner"].values()))
    assert "90 % interval for a rerun ±" in text and "no run held out" in text


def test_a_user_fit_without_repeats_says_so_and_claims_no_more_than_the_shipped(capsys,
                                                                                  tmp_path):
    fit = json.loads(_user_fit(capsys, tmp_path, repeats=False).read_text())
    assert fit["interval"]["own"]["measured"] is False
    assert fit["interval"]["borrowed_from"] == "h200-vllm033"
    mine, text, _ = _interval_of(capsys, str(tmp_path / "fit.json"))
    shipped, _, _ = _interval_of(capsys, "h200-vllm033")
    assert mine is not None and mine >= shipped
    assert "its own interval is not measured: no setting among the 3 fitted runs was run " \
           "twice" in " ".join(text.split())


def test_a_lead_inside_a_user_fits_interval_is_a_tie(capsys, tmp_path):
    from simkit.report.recommend import recommendation
    from simkit.engine.summary import Row

    _user_fit(capsys, tmp_path, repeats=False)
    pct, _, doc = _interval_of(capsys, str(tmp_path / "fit.json"))

    class P:                       # a prediction whose suffix leads vanilla by 5 %
        rows = [Row("vanilla", 0, 1000.0, 0.0, 1.0, 0, 0, 0, 0, 0),
                Row("suffix", 24, 1050.0, 0.0, 1.05, 0, 0, 0, 0, 0)]
        request_rate = None
    rec = recommendation(P(), None, pct)
    assert "tie within the error" in rec["line"]
