"""Host cost of the forcing index arithmetic per engine step (calibrate.forcing.forced_rows),
for the batch shapes of the calibration runs. Run: python tests/benchmarks/bench_forcing.py
(The GPU side, one small copy and one index_put kernel, is not measured here.)"""

from __future__ import annotations

import time

import numpy as np

from calibrate.forcing import ForcedOutputs, forced_rows


def bench(n_reqs: int, k: int, reps: int = 2000) -> float:
    rng = np.random.default_rng(0)
    f = ForcedOutputs()
    ids = [f"r{i}" for i in range(n_reqs)]
    for rid in ids:
        f.register(rid, 300, rng.integers(0, 128000, 1024))
    internal = [f"{rid}-abcdef12" for rid in ids]  # vLLM's internal ids, as the hook sees them
    last = np.full(n_reqs, 300 + 500 + k, dtype=np.int64)
    rows = np.full(n_reqs, k + 1, dtype=np.int64)
    forced_rows(f, internal, last, rows)  # warm the alias cache, as after the first step
    t = time.perf_counter()
    for _ in range(reps):
        forced_rows(f, internal, last, rows)
    return (time.perf_counter() - t) / reps


if __name__ == "__main__":
    print(f"{'reqs':>5} {'K':>3} {'rows':>5} {'us/step':>8}")
    for n, k in ((1, 0), (8, 0), (32, 0), (64, 0), (32, 4), (64, 4), (64, 12), (64, 24)):
        print(f"{n:5d} {k:3d} {n * (k + 1):5d} {bench(n, k) * 1e6:8.1f}")
