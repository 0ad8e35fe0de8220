"""The error of a 15-minute calibration: fit only on the runs `simkit calibrate plan` asks for
(its default: Llama-3.1-8B chat, vanilla / suffix / K-pad 4 / K-pad 12, c32 cold+hot, c64, c8),
taken from the committed vLLM 0.33 records, and predict every held-out 0.33 run with it, beside
the shipped calibration fitted on every 0.33 calibration run. Prints figures; asserts nothing.

    python3 tests/benchmarks/bench_quick_calibration.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))   # test_calibrate_walkthrough


def main() -> int:
    import pandas as pd

    from simkit.costmodel.step_records import select_version
    from simkit.validation.measured import load_records
    from simkit.validation.report import best_config_agreement, build_cells, mape_by_history
    from test_calibrate_walkthrough import _plan_records

    t0 = time.time()
    tmp = Path(tempfile.mkdtemp())
    plan = json.loads(subprocess.run(
        [sys.executable, "-m", "simkit", "calibrate", "plan", "--vllm-version", "0.33",
         "--format", "json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    ids = _plan_records(plan, tmp / "recs")
    runs = pd.read_parquet(tmp / "recs" / "runs.parquet")
    starts = runs.groupby(["config", "k"])["engine_start_s"].first()
    gpu_s = float(starts.sum() + 30 * len(starts) + runs["total_duration_s"].sum())
    cal = tmp / "quick.json"
    subprocess.run([sys.executable, "-m", "simkit", "calibrate", "fit", "--records",
                    str(tmp / "recs"), "--vllm-version", "0.33", "--name", "quick", "--out",
                    str(cal)], check=True, capture_output=True, cwd=ROOT)
    print(f"plan: {len(plan['engines'])} engines, estimated {plan['estimated_s'] / 60:.1f} min; "
          f"recorded runs of it: {len(ids)}, their GPU time {gpu_s / 60:.1f} min "
          "(engine start + 30 s around it + run wall)")
    steps, all_runs = load_records()
    r033 = select_version(all_runs, "0.33")
    held = [i for i in r033[r033.purpose == "validation"].run_id if "_fleet-" not in i]
    for name in (str(cal), "h200-vllm033"):
        cells = build_cells(r033, steps, purpose="validation", run_ids=held,
                            compare_orderings=False, calibration=name)
        errs = [abs(c["error"]) for c in cells]
        b = best_config_agreement(cells, "validation")
        hist = {h: round(v, 1) for h, v in mape_by_history(cells).items() if v is not None}
        print(f"  {Path(name).stem}: held-out MAPE {100 * sum(errs) / len(errs):.1f} % over "
              f"{len(errs)} runs, by history {hist}, best configuration {b['matched']}/"
              f"{b['total']}")
    print(f"wall {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
