"""What the host terms buy: each vLLM version's calibration fitted without them (the estimator as
it was: one host coefficient set for both runners, no dispatch or prefill front-end terms) and
with them (StepTimeEstimator(step_terms=True), the default), on the same calibration runs, scored
on the same held-out runs. Prints figures; asserts nothing (run by hand, quoted by
docs/validation.md). Needs the raw traces (the runs' requests are rebuilt from them).

    python3 tests/benchmarks/bench_host_terms.py [--version 0.33] [--version 0.26]

Per version and fit: held-out MAPE, MAPE per request history (hot, repeat:P), best configuration
right per setting group, runs inside the 90 % drift band, and the calibration runs' MAPE.
Validation runs are never in a fit.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def fit(version: str, step_terms: bool, out: Path, runs: set[str] | None = None) -> Path:
    """The calibration of `version` fitted on its calibration runs (only `runs` if given)."""
    from simkit.costmodel.calibrations import write_calibration
    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.fit import load_record_dir

    X, _ = load_record_dir(ROOT / "calibrate" / "data", "h200", version)
    if runs is not None:
        X = X[X["run_id"].isin(runs)].reset_index(drop=True)
    est = StepTimeEstimator(hardware="h200", step_terms=step_terms).fit(X)
    doc = est.to_calibration(out.stem)
    doc["vllm_version"] = version
    write_calibration(doc, out)
    return out


def figures(cells: list[dict]) -> dict:
    """The issue's four figures (and the calibration MAPE) over built cells."""
    from simkit.validation.report import best_config_agreement, mape, mape_by_history
    from simkit.validation.spread import coverage

    best = best_config_agreement(cells, "validation")
    cov = coverage(cells, "validation")
    return {"mape": mape(cells, "validation"), "by_history": mape_by_history(cells),
            "hot_repeat": mape([c for c in cells if c.get("history", "cold") != "cold"], "validation"),
            "best": f"{best['matched']}/{best['total']}", "interval": f"{cov['inside']}/{cov['cells']}",
            "calibration_mape": mape(cells, "calibration")}


def cells_for(runs, steps, version: str, calibration: str, purpose: str = "all") -> list[dict]:
    from simkit.costmodel.step_records import select_version
    from simkit.validation.report import FLEET_PREFIX, build_cells

    sel = select_version(runs, version)
    sel = sel[~sel["corpus"].astype(str).str.startswith(FLEET_PREFIX)]
    keep = sel[sel["purpose"].isin(["validation", "calibration"])] if purpose == "all" else \
        sel[sel["purpose"] == purpose]
    return build_cells(sel, steps, purpose="all", run_ids=list(keep.run_id), compare_orderings=False,
                       calibration=calibration)


def line(name: str, f: dict) -> str:
    hist = ", ".join(f"{h} {v:.1f} %" for h, v in f["by_history"].items() if v is not None)
    return (f"  {name:22} held-out MAPE {f['mape']:5.2f} %  hot+repeat {f['hot_repeat']:5.2f} %  "
            f"({hist})  best config {f['best']}  interval {f['interval']}  "
            f"calibration MAPE {f['calibration_mape']:5.2f} %")


def main(argv: list[str]) -> int:
    from simkit.validation.measured import load_records

    versions = [argv[i + 1] for i, a in enumerate(argv) if a == "--version"] or ["0.33", "0.26"]
    t0 = time.time()
    steps, runs = load_records()
    tmp = Path(tempfile.mkdtemp())
    for version in versions:
        print(f"vLLM {version}")
        for name, terms in (("before (no host terms)", False), ("after (host terms)", True)):
            cal = fit(version, terms, tmp / f"v{version}-{int(terms)}.json")
            print(line(name, figures(cells_for(runs, steps, version, str(cal)))), flush=True)
    print(f"wall {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
