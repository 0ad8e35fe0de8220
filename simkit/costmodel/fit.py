"""Fit a calibration (cost-model coefficients) from measured step records (steps*.parquet + runs*.parquet) and write
it as JSON: the one call the calibration command (or a person) needs.

python -m simkit.costmodel.fit --records calibrate/data --name h200-vllm026 --out calibration.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simkit.errors import InputError, SimkitError


def load_record_dir(root: str | Path, hardware: str,
                    vllm_version: str | None = None) -> tuple[Any, dict[str, int]]:
    """Every steps*.parquet under root joined with the runs*.parquet beside them, kept only for
    runs on `hardware` (the runs' 'gpu' column, e.g. 'NVIDIA H200') made with `vllm_version`
    (None: any); returns the frame and the number of steps left out per reason."""
    from simkit.costmodel.step_records import join_runs

    S, R = read_record_dir(root)
    return fit_frame(join_runs(S, R), R, hardware, vllm_version, str(root))


def read_record_dir(root: str | Path) -> tuple[Any, Any]:
    """The steps and the runs (one row per run_id) of every steps*.parquet / runs*.parquet
    under root."""
    import pandas as pd

    from simkit.costmodel.step_records import (
        RUN_KEYS, STEP_KEYS, check_unique_runs, check_unique_steps, read_parquet)

    root = Path(root)
    steps = sorted(root.glob("**/steps*.parquet"))
    runs = sorted(root.glob("**/runs*.parquet"))
    if not steps or not runs:
        raise InputError("no steps*.parquet / runs*.parquet found", path=str(root))
    step_frames = [(p, read_parquet(p, STEP_KEYS)) for p in steps]
    run_frames = [(p, read_parquet(p, RUN_KEYS)) for p in runs]
    check_unique_runs(run_frames)           # the same runs twice: refused, as validate does
    check_unique_steps(step_frames)
    S = pd.concat([f for _, f in step_frames], ignore_index=True)
    R = pd.concat([f for _, f in run_frames], ignore_index=True)
    return S, R


def fit_frame(X: Any, R: Any, hardware: str, vllm_version: str | None = None,
              where: str = "the records") -> tuple[Any, dict[str, dict[str, int]]]:
    """The steps a calibration is fitted on, out of step records joined with their runs (`X`,
    join_runs; `R` the runs): those of runs on `hardware` made with `vllm_version` (None: any)
    that are not validation runs; returns the frame and, per reason, the runs and steps left
    out ({"runs": r, "steps": s}). A
    caller that holds the records already (validate's refits) filters them here without
    reading them again."""
    left_out: dict[str, dict[str, int]] = {}

    def leave_out(reason: str, mask) -> None:
        """Count what `mask` leaves out: its runs and their steps (a count of steps alone read
        as if it were runs: "validation runs: 46109")."""
        left_out[reason] = {"runs": int(X.loc[mask, "run_id"].nunique()), "steps": int(mask.sum())}

    if vllm_version is not None and "vllm_version" in X:
        from simkit.catalog.nearest_version import resolve_vllm_version
        from simkit.costmodel.step_records import release_keys

        key = resolve_vllm_version(vllm_version).key     # a newer release keeps its own key
        same = release_keys(X["vllm_version"]) == key
        if (~same).any():
            leave_out(f"runs of another vLLM version than {key}", ~same)
        X = X[same]
    if "gpu" in X:
        on_hw = X["gpu"].astype(str).str.contains(hardware, case=False)
        if (~on_hw).any():
            leave_out(f"runs not on {hardware}", ~on_hw)
        X = X[on_hw]
    if "purpose" in R and "purpose" not in X:
        X = X.merge(R[["run_id", "purpose"]], on="run_id", how="left")
    if "purpose" in X:
        held = X["purpose"].astype(str) == "validation"
        if held.any():
            leave_out("validation runs (held out of the fit)", held)
        X = X[~held]
    if X.empty:
        bare = runs_without_steps(X, R, hardware, vllm_version)
        raise InputError(f"no calibration steps on {hardware}"
                         + (f": run(s) {_some(bare)} have no step records" if bare else ""),
                         path=where)
    return X.reset_index(drop=True), left_out


def run_residuals(est: Any, X: Any) -> dict[str, float]:
    """Per fitted run: log(predicted / measured) of its recorded steps' total time, the fit
    pricing each step as recorded. A run's tok/s scales with the inverse of its steps' time
    for the same batches, so this is the fit's residual on that run's throughput (sign
    reversed), the part of a calibration's rerun interval that does not need the run's
    requests replayed (simkit.validation.own_interval)."""
    import numpy as np

    timed = X["t_step_s"].notna().to_numpy()
    frame = X[timed]
    pred = est.predict(frame)
    meas = frame["t_step_s"].to_numpy(float)
    out = {}
    for rid in sorted(set(frame["run_id"].astype(str))):
        sel = (frame["run_id"].astype(str) == rid).to_numpy()
        p, m = float(np.sum(pred[sel])), float(np.sum(meas[sel]))
        if p > 0 and m > 0:
            out[rid] = round(float(np.log(p / m)), 6)
    return out


def _some(ids: list[str], most: int = 5) -> str:
    """Up to `most` run ids, and how many more."""
    more = len(ids) - most
    return ", ".join(ids[:most]) + (f" and {more} more" if more > 0 else "")


def runs_without_steps(X: Any, R: Any, hardware: str, vllm_version: str | None) -> list[str]:
    """Ids of the calibration runs on `hardware` made with `vllm_version` that have no step in
    `X` (a run recorded without its steps, or whose steps file is missing): the fit cannot use
    them, and says so rather than leave them out silently."""
    runs = R
    if vllm_version is not None and "vllm_version" in runs:
        from simkit.catalog.nearest_version import resolve_vllm_version
        from simkit.costmodel.step_records import release_keys

        key = resolve_vllm_version(vllm_version).key     # a newer release keeps its own key
        runs = runs[release_keys(runs["vllm_version"]) == key]
    if "gpu" in runs:
        runs = runs[runs["gpu"].astype(str).str.contains(hardware, case=False)]
    if "purpose" in runs:
        runs = runs[runs["purpose"].astype(str) != "validation"]
    have = set(X["run_id"].astype(str)) if "run_id" in X else set()
    return sorted(str(r) for r in runs["run_id"] if str(r) not in have)


def fit_calibration(records: str | Path, name: str, hardware: str = "h200", out: str | Path | None = None,
                default_for: tuple[str, ...] = (), n_splits: int = 5,
                vllm_version: str | None = None) -> dict[str, Any]:
    """Cross-validate, fit on all calibration steps of one vLLM version (None: the newest), and
    (if out) write the calibration JSON, which names that version. A release newer than simkit's
    rules (resolve_vllm_version) is fitted on its own runs and named after itself; the
    document's notes say so, and say how its draft columns were read."""
    from simkit.catalog.nearest_version import resolve_vllm_version
    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.calibrations import write_calibration
    from simkit.costmodel.step_records import join_runs

    resolved = resolve_vllm_version(vllm_version if vllm_version is not None else
                                    get_default_key())
    version = resolved.key
    S, R = read_record_dir(records)
    X, left_out = fit_frame(join_runs(S, R), R, hardware, version, str(records))
    notes = [resolved.warning] if resolved.warning else []
    notes += draft_column_notes(X)
    est = StepTimeEstimator(hardware=hardware)
    est.cross_validate_report(X, n_splits=n_splits)
    est.fit(X)
    doc = est.to_calibration(name)
    doc["fit_residuals"] = run_residuals(est, X)
    doc["default_for"] = sorted(default_for)
    doc["left_out"] = left_out
    doc["skipped"] = est.skipped_
    doc["vllm_version"] = version
    doc["runs_without_steps"] = runs_without_steps(X, R, hardware, version)
    if notes:
        doc["notes"] = notes
    if out:
        write_calibration(doc, out)
    return doc


def get_default_key() -> str:
    """The newest vLLM version simkit has rules for (what a fit without a version means)."""
    from simkit.catalog.vllm_versions import get_vllm_version

    return get_vllm_version(None).key


SLOTS_NOTE = ("vLLM 0.34 records: num_spec_tokens counts the K slots every decoding request "
              "verifies (fillers included), which is what the verify work and the rejection "
              "sampler cost depend on, so the device and sampling terms read it as it is; the "
              "drafter runs on the GPU inside the step (no host drafting per request: "
              "num_drafting_reqs is 0), so the host drafting terms are not fitted from these runs; the "
              "host time of its propose call (t_draft_s: kernel launches, inside sampling's host "
              "time) is not modelled apart, so the draft component's cross-validated error "
              "compares it with none")


def draft_column_notes(X: Any) -> list[str]:
    """How the fit reads the draft columns of these records: 0.34's count verified slots, not
    real drafts (runs.draft_count 'slots'); a slots run that still reports host-drafting
    requests would be fitted wrongly and is refused."""
    if "draft_count" not in X:
        return []
    slots = X["draft_count"].astype(str) == "slots"
    if not slots.any():
        return []
    bad = slots & (X["num_drafting_reqs"] > 0)
    if bad.any():
        run = str(X.loc[bad.idxmax(), "run_id"])
        raise InputError("a run whose draft columns count slots (vLLM 0.34) reports requests "
                         "drafted on the host; its records are not 0.34 harness records",
                         path=run, field="num_drafting_reqs")
    return [SLOTS_NOTE]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", required=True, help="folder with steps*.parquet and runs*.parquet")
    ap.add_argument("--name", required=True)
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--out", default=None)
    ap.add_argument("--default-for", action="append", default=[], help="mark default for this hardware")
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args(argv)
    try:
        doc = fit_calibration(args.records, args.name, args.hardware, args.out, tuple(args.default_for), args.folds)
    except SimkitError as exc:
        print(f"error: {exc}")
        return 2
    print(json.dumps({k: doc[k] for k in ("name", "hardware", "models", "n_steps", "left_out", "skipped",
                                          "fitted", "not_fitted")}, indent=1))
    print("cross-validated MAPE % (" + doc["cv"]["grouping"] + "):",
          json.dumps({k: (round(v, 2) if v is not None else None) for k, v in doc["cv"]["mean"].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
