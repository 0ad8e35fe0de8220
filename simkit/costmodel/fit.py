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
    import pandas as pd

    from simkit.costmodel.step_records import RUN_KEYS, STEP_KEYS, join_runs, read_parquet

    root = Path(root)
    steps = sorted(root.glob("**/steps*.parquet"))
    runs = sorted(root.glob("**/runs*.parquet"))
    if not steps or not runs:
        raise InputError("no steps*.parquet / runs*.parquet found", path=str(root))
    S = pd.concat([read_parquet(p, STEP_KEYS) for p in steps], ignore_index=True)
    R = pd.concat([read_parquet(p, RUN_KEYS) for p in runs],
                  ignore_index=True).drop_duplicates("run_id", keep="last")
    return fit_frame(join_runs(S, R), R, hardware, vllm_version, str(root))


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
        from simkit.catalog.vllm_versions import get_vllm_version
        from simkit.costmodel.step_records import versions_of

        key = get_vllm_version(vllm_version).key
        same = versions_of(X["vllm_version"]) == key
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
        raise InputError(f"no calibration steps on {hardware}", path=where)
    return X.reset_index(drop=True), left_out


def fit_calibration(records: str | Path, name: str, hardware: str = "h200", out: str | Path | None = None,
                default_for: tuple[str, ...] = (), n_splits: int = 5,
                vllm_version: str | None = None) -> dict[str, Any]:
    """Cross-validate, fit on all calibration steps of one vLLM version (None: the newest), and
    (if out) write the calibration JSON, which names that version."""
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.calibrations import write_calibration

    version = get_vllm_version(vllm_version).key
    X, left_out = load_record_dir(records, hardware, version)
    est = StepTimeEstimator(hardware=hardware)
    est.cross_validate_report(X, n_splits=n_splits)
    est.fit(X)
    doc = est.to_calibration(name)
    doc["default_for"] = sorted(default_for)
    doc["left_out"] = left_out
    doc["skipped"] = est.skipped_
    doc["vllm_version"] = version
    if out:
        write_calibration(doc, out)
    return doc


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
