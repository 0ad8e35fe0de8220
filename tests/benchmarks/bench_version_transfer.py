"""How the cost model transfers: to runs of a measurement sitting the fit never saw, and to a
vLLM version it was not fitted on. Prints figures; asserts nothing (run by hand, quoted by
docs/validation.md). Needs the raw traces (the runs' requests are rebuilt from them).

    python3 tests/benchmarks/bench_version_transfer.py [--quick]

1. Leave one sitting out (each vLLM version): for each sitting (runs made back to back on one
   machine, simkit.validation.sittings) refit the calibration without that sitting's calibration
   runs (the way the version's shipped calibration is fitted: with or without the step terms)
   and predict its held-out runs: MAPE overall and on hot / repeat runs, beside the same runs
   predicted by the shipped calibration (which saw the sitting's calibration runs).
2. Across versions: the vLLM 0.33 held-out runs predicted with the 0.26 calibration (its rules
   still 0.33's) and with the 0.33 calibration.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _mape(cells, pred=lambda c: True):
    errs = [abs(c["error"]) for c in cells if pred(c)]
    return (100 * sum(errs) / len(errs), len(errs)) if errs else (float("nan"), 0)


def _fit_without(sitting_runs: set[str], version: str, out: Path) -> None:
    from simkit.costmodel.calibrations import write_calibration
    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.fit import load_record_dir

    X, _ = load_record_dir(ROOT / "calibrate" / "data", "h200", version)
    X = X[~X["run_id"].isin(sitting_runs)].reset_index(drop=True)
    from simkit.validation.transfer import shipped_step_terms

    est = StepTimeEstimator(hardware="h200", step_terms=shipped_step_terms(version))
    est.fit(X)
    doc = est.to_calibration(out.stem)
    doc["vllm_version"] = version
    write_calibration(doc, out)


def leave_one_sitting_out(version: str, runs, steps, tmp: Path, quick: bool) -> None:
    """Section 1 for one vLLM version: a line per sitting with held-out runs."""
    from simkit.costmodel.step_records import select_version
    from simkit.validation.report import build_cells

    hot = lambda c: c.get("history", "cold") != "cold"   # noqa: E731
    print(f"1. leave one sitting out, vLLM {version} held-out runs")
    print(f"{'sitting':18} {'runs':>4} {'MAPE shipped':>13} {'MAPE refit':>11} "
          f"{'hot/rep shipped':>16} {'hot/rep refit':>14}")
    rv = select_version(runs, version)
    rv = rv[~rv["corpus"].astype(str).str.startswith("fleet-")]
    for sitting, grp in rv.groupby("sitting"):
        held = grp[grp.purpose == "validation"]
        if held.empty:
            continue
        ids = list(held.run_id)[:12] if quick else list(held.run_id)
        shipped = build_cells(rv, steps, purpose="validation", run_ids=ids, compare_orderings=False)
        cal = tmp / f"without-{version}-{sitting.replace(':', '')}.json"
        _fit_without(set(grp.run_id), version, cal)
        refit = build_cells(rv, steps, purpose="validation", run_ids=ids, compare_orderings=False,
                            calibration=str(cal))
        a, n = _mape(shipped)
        b, _ = _mape(refit)
        ah, nh = _mape(shipped, hot)
        bh, _ = _mape(refit, hot)
        print(f"{sitting:18} {n:4d} {a:12.1f}% {b:10.1f}% {ah:12.1f}% ({nh}) {bh:13.1f}%", flush=True)


def main(argv: list[str]) -> int:
    from simkit.costmodel.step_records import select_version
    from simkit.validation.measured import load_records
    from simkit.validation.report import build_cells
    from simkit.validation.sittings import assign_sittings

    t0 = time.time()
    steps, runs = load_records()
    runs = runs.reset_index(drop=True)
    runs["sitting"] = assign_sittings(runs)
    hot = lambda c: c.get("history", "cold") != "cold"   # noqa: E731
    tmp = Path(tempfile.mkdtemp())
    for version in ("0.26", "0.33"):
        leave_one_sitting_out(version, runs, steps, tmp, "--quick" in argv)
    print("2. vLLM 0.33 held-out runs, predicted with 0.33's rules and each calibration")
    r033 = select_version(runs, "0.33")
    ids = [i for i in r033[r033.purpose == "validation"].run_id if "_fleet-" not in i]
    for cal in ("h200-vllm026", "h200-vllm033"):
        cells = build_cells(r033, steps, purpose="validation", run_ids=ids,
                            compare_orderings=False, calibration=cal)
        a, n = _mape(cells)
        ah, nh = _mape(cells, hot)
        print(f"  calibration {cal}: MAPE {a:.1f} % over {n} runs, hot/repeat {ah:.1f} % ({nh})")
    print(f"wall {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
