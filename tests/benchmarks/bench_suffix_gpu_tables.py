"""Benchmark: the all-K suffix_gpu table (vLLM 0.34's drafter) against the arctic suffix table
(vLLM 0.26/0.33's), same corpus, same sample. Goal (issue 39): no slower than arctic's.

    python tests/benchmarks/bench_suffix_gpu_tables.py [--model llama-3.1-8b] [--corpus chat]
        [--requests 128] [--repeats 3] [--ordering sequential|concurrent] [--concurrency 32]

Both tables: K = 1..16 at once, the compiled engines, an evenly spaced sample of --requests
requests (0 = all), cold (the sample alone; suffix_gpu with vLLM's default 2^20-token corpus).
Prints the numba start-up (cache load, first build of a tiny table), then per drafter the best of
--repeats CPU-seconds (process time) and wall seconds, and output tokens per CPU-second. Nothing is
asserted; no table is cached.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DRAFTERS = ("suffix", "suffix_gpu")


def _tiny():
    import numpy as np
    from types import SimpleNamespace
    return [SimpleNamespace(prompt_ids=np.array([1, 2, 3, 1, 2], np.int32),
                            output_ids=np.array([3, 1, 2, 3, 1], np.int32))] * 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="chat")
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ordering", default="sequential", choices=("sequential", "concurrent"))
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()

    from simkit.acceptance.build import build_table
    from simkit.profiles.sampling import sample_indices
    from traces.corpora import load_corpus

    for name in DRAFTERS:
        t0 = time.perf_counter()
        build_table(_tiny(), drafter=name, kmax=16, ordering=args.ordering, concurrency=2)
        print(f"start-up {name:<10} {time.perf_counter() - t0:6.2f} s (numba cache load or compile)")
    corp = load_corpus(args.corpus, args.model)
    idx = sample_indices(len(corp.requests), args.requests or len(corp.requests))
    reqs = [corp.requests[int(i)] for i in idx]
    tokens = sum(len(r.output_ids) for r in reqs)
    print(f"{args.model}/{args.corpus}: {len(reqs)} of {len(corp.requests)} requests, {tokens} "
          f"output tokens, K = 1..16, {args.ordering}"
          + (f" at {args.concurrency}" if args.ordering == "concurrent" else ""))
    best = {}
    for name in DRAFTERS:
        cpu = wall = float("inf")
        for _ in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            build_table(reqs, drafter=name, kmax=16, ordering=args.ordering,
                        concurrency=args.concurrency)
            cpu = min(cpu, time.process_time() - c0)
            wall = min(wall, time.perf_counter() - w0)
        best[name] = cpu
        print(f"{name:<10} cpu {cpu:7.2f} s  wall {wall:7.2f} s  {tokens / cpu:12,.0f} tokens/CPU-s")
    print(f"suffix_gpu / suffix CPU time: {best['suffix_gpu'] / best['suffix']:.2f}")


if __name__ == "__main__":
    main()
