"""Host cost of forcing per engine step, for the batch shapes of the calibration runs: the index
arithmetic (calibrate.forcing.forced_rows) and, where torch is installed, the ring applier
(ForceApplier) on a CPU logits tensor of Llama-3's vocabulary. Run:
python tests/benchmarks/bench_forcing.py. Whether the applier waits for a GPU is measured on the
GPU host by calibrate/gpu/force_probe.py (calibrate/data/force_probe.txt)."""

from __future__ import annotations

import time

import numpy as np

from calibrate.forcing import ForceApplier, ForcedOutputs, forced_rows

VOCAB = 128256


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


def bench_apply(n_rows: int, reps: int = 500) -> float | None:
    """Seconds per ForceApplier call on CPU logits (no copy to a device here)."""
    try:
        import torch
    except ImportError:
        return None
    logits = torch.zeros(n_rows, VOCAB)
    rng = np.random.default_rng(0)
    rows = np.arange(n_rows, dtype=np.int64)
    toks = rng.integers(0, VOCAB, n_rows)
    apply = ForceApplier()
    apply(logits, rows, toks)
    t = time.perf_counter()
    for _ in range(reps):
        apply(logits, rows, toks)
    return (time.perf_counter() - t) / reps


if __name__ == "__main__":
    print(f"{'reqs':>5} {'K':>3} {'rows':>5} {'index us':>8} {'apply us':>8}")
    for n, k in ((1, 0), (8, 0), (32, 0), (64, 0), (32, 4), (64, 4), (64, 12), (64, 24)):
        a = bench_apply(n * (k + 1))
        print(f"{n:5d} {k:3d} {n * (k + 1):5d} {bench(n, k) * 1e6:8.1f} "
              f"{'-' if a is None else format(a * 1e6, '8.1f')}")
