"""The rerun interval of a calibration fitted on a user's own records (`simkit calibrate fit`).

The shipped calibrations carry an "interval" block (simkit.validation.spread.rerun_interval:
the run-to-run drift of the repeated settings among the fitted runs and the fit's residuals on
them, in quadrature), and every recommendation calls a lead inside it a tie within the error.
A user's fit gets the same block from its own records, so that it never reads more certain than
the shipped one. Two differences, both stated in the block: the residual of a fitted run is the
fit pricing that run's own recorded steps (costmodel.fit.run_residuals: no requests need to be
replayed), and nothing is held out (no coverage figure). Without a repeated setting among the
fitted runs the drift a rerun sees is not measured: the block says so, and predictions use the
shipped calibration's interval of the same vLLM version as a floor (`borrowed_interval`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simkit.validation.spread import rerun_interval

NOT_MEASURED = ("no setting among the {n} fitted runs was run twice, so the run-to-run drift a "
                "rerun sees is not measured (record each setting twice: calibrate run --tag r2)")


def load_runs(records: str | Path) -> Any:
    """Every runs*.parquet under the records folder, one frame."""
    import pandas as pd

    from simkit.costmodel.step_records import read_parquet

    files = sorted(Path(records).glob("**/runs*.parquet"))
    return pd.concat([read_parquet(p, ("run_id",)) for p in files], ignore_index=True)


def fit_interval(doc: dict[str, Any], runs: Any) -> dict[str, Any]:
    """The "interval" block of a user fit `doc` (with its "runs" and "fit_residuals") from the
    runs frame of its records: rerun_interval per runner class, or measured False and why."""
    resid = doc.get("fit_residuals") or {}
    fitted = {str(r) for r in doc.get("runs") or []}
    rows = runs.to_dict("records")
    cells = [{"run_id": str(r["run_id"]), "measured_tok_s": float(r["output_tok_s"]),
              "predicted_tok_s": float(r["output_tok_s"]) * math.exp(-resid[str(r["run_id"])])}
             for r in rows if str(r["run_id"]) in fitted and str(r["run_id"]) in resid
             and r.get("output_tok_s") == r.get("output_tok_s") and float(r["output_tok_s"]) > 0]
    frame = runs[runs["run_id"].astype(str).isin(fitted)].copy()
    if "purpose" not in frame:
        frame["purpose"] = "calibration"
    block = rerun_interval(cells, frame, fitted, by_runner=True)
    block["source"] = ("your records: drift of the repeated settings among the fitted runs, and "
                       "the fit's residual on each fitted run's own recorded steps; no run held "
                       "out")
    if not block["drift_dof"] or block["sigma_log"] is None:
        return {"measured": False, "why": NOT_MEASURED.format(n=len(fitted)),
                "fitted_runs": len(fitted), "residual_sigma_log": block["residual_sigma_log"],
                "residual_runs": block["residual_runs"]}
    return {"measured": True, **block}


def interval_block(doc: dict[str, Any], records: str | Path) -> dict[str, Any]:
    """What a user fit's "interval" key holds: its own measured interval, or (not measured)
    the shipped one of its vLLM version with 'borrowed_from' and 'own' saying why, or (none
    ships) the reason alone."""
    own = fit_interval(doc, load_runs(records))
    if own["measured"]:
        return own
    borrowed = borrowed_interval(doc)
    return {**borrowed, "own": own} if borrowed else own


def borrowed_interval(doc: dict[str, Any]) -> dict[str, Any] | None:
    """For a calibration whose own interval is not measured: the interval block of the shipped
    calibration of its vLLM version (default for h200), with a 'borrowed_from' name, or None
    when none ships. A prediction then claims no more certainty than the shipped one."""
    from simkit.costmodel.calibrations import (calibration_version, default_calibration,
                                               read_calibration)

    from simkit.errors import UnknownNameError

    try:
        name = default_calibration("h200", calibration_version(doc))
    except UnknownNameError:          # a release newer than simkit's rules ships no calibration
        name = None
    if name is None:
        return None
    band = read_calibration(name).get("interval")
    return {**band, "borrowed_from": name} if band else None


__all__ = ["NOT_MEASURED", "borrowed_interval", "fit_interval", "interval_block", "load_runs"]
