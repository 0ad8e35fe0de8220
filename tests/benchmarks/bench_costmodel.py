"""Cost-model speed: step_cost evaluations per second (the simulator calls it once per simulated
step; target > 200k/s), plus estimator fit/cross-validation time on synthetic records.

Run: python tests/benchmarks/bench_costmodel.py [--calls N]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from simkit.costmodel import load_cost_model
from simkit.costmodel.synthetic import random_batch

MODELS = [("llama-3.1-8b", "h200"), ("llama-3.1-70b", "h200"), ("deepseek-r1", "b200"), ("k-exaone-236b", "b200")]


def bench_step_cost(calls: int) -> None:
    """Evaluations per second over a fixed, varied set of batches (best of 3 passes)."""
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, d, k, d == "none") for d, k in
               [("none", 0), ("suffix", 8), ("ngram", 4), ("suffix", 4)] for _ in range(256)]
    print(f"step_cost: {calls:,} calls per pass over {len(batches)} distinct batches, best of 3")
    for model, hw in MODELS:
        cm = load_cost_model(model, hw)
        f = cm.step_cost
        reps = max(1, calls // len(batches))
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                for b in batches:
                    f(b)
            best = min(best, time.perf_counter() - t0)
        rate = reps * len(batches) / best
        print(f"  {model:18s} {hw}  TP={cm.tp}  {rate / 1e3:8.0f}k calls/s  ({1e6 / rate:.2f} us/call)")


def bench_fit() -> None:
    """Fit and 3-fold cross-validation on 6 synthetic runs x 400 steps."""
    import pandas as pd

    from simkit.costmodel.coefficients import Coefficients
    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.synthetic import generate_step_records

    runs = [("llama-3.1-8b", 1, "none", 0), ("llama-3.1-8b", 1, "suffix", 8), ("llama-3.1-70b", 2, "suffix", 4)]
    t0 = time.perf_counter()
    X = pd.concat([generate_step_records(m, "h200", tp, Coefficients(), 400, seed=i, run_id=f"synthetic-{i}",
                                         drafter=d, k=k) for i, (m, tp, d, k) in enumerate(runs * 2)],
                  ignore_index=True)
    t1 = time.perf_counter()
    est = StepTimeEstimator(hardware="h200").fit(X)
    t2 = time.perf_counter()
    rep = est.cross_validate_report(X, n_splits=3)
    t3 = time.perf_counter()
    print(f"estimator: {len(X)} synthetic steps generated in {t1 - t0:.2f}s, fit {t2 - t1:.2f}s, "
          f"3-fold CV {t3 - t2:.2f}s; CV step MAPE {rep['mean']['step']:.2f}% (2% noise)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    bench_step_cost(args.calls)
    bench_fit()


if __name__ == "__main__":
    main()
