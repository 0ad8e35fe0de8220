"""Benchmark: a 16-replica fleet over 10 minutes of traffic at 40 req/s (24,000 requests).

    PYTHONPATH=$PWD python tests/benchmarks/bench_fleet.py [--replicas 16] [--rate 40]
        [--duration 600] [--corpus mix] [--policies round-robin] [--configs vanilla,suffix]
        [--workers 2] [--executor local|ray] [--warm]

One evaluation of simkit.fleet.plan.Fleet at a fixed replica count (no search): traffic
generation, then per replica its suffix table drafted over its own stream (the real compiled
drafter; a fresh acceptance cache unless --warm) and every configuration simulated open-loop.
Prints (nothing is asserted): wall time per phase, CPU seconds drafting and simulating summed over
replicas, per replica and per request, output tokens drafted per CPU-second, the fleet's figures,
and the extrapolation the issue asks for (a 256-replica day on a Ray cluster of W workers), which
assumes the per-request cost measured here and perfect spreading of replica groups over workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="mix")
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--policies", default="round-robin")
    ap.add_argument("--configs", default="vanilla,suffix")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--executor", default="local")
    ap.add_argument("--warm", action="store_true", help="keep the acceptance cache (default: a "
                    "fresh one, so drafting is measured)")
    a = ap.parse_args()
    if not a.warm:
        os.environ["SIMKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-fleet-")
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import engine_config
    from simkit.fleet.plan import Fleet
    from simkit.fleet.run import load_pool
    from simkit.fleet.traffic import TrafficSpec, make_traffic

    t0 = time.perf_counter()
    cost = load_cost_model(a.model, "h200")
    eng = engine_config(cost)
    pool, ids, skipped, _ = load_pool(a.model, a.corpus, max_tokens=eng.max_tokens,
                                      max_model_len=eng.max_model_len,
                                      kv_capacity_tokens=eng.kv_capacity_tokens)
    tr = make_traffic(TrafficSpec(rate=a.rate, duration_s=a.duration), pool, ids)
    t1 = time.perf_counter()
    fl = Fleet(tr, parse_configs(a.configs), cost, eng, executor=a.executor, workers=a.workers)
    t2 = time.perf_counter()
    results = {}
    for pol in a.policies.split(","):
        results[pol] = fl.evaluate(pol, a.replicas)
    t3 = time.perf_counter()
    cpu = fl.cpu_s
    tokens = int(sum(len(pool[i].output_ids) for i in tr.draws.tolist()))
    n_pol = len(results)
    draft = sum(c["draft"] for c in cpu)
    sim = sum(c["simulate"] for c in cpu)
    print(f"fleet benchmark: {a.model}/{a.corpus}, {a.replicas} replicas, {tr.n:,} requests "
          f"({a.rate:g} req/s x {a.duration:g} s), {tokens:,} output tokens, policies "
          f"{a.policies}, configs {a.configs}, {a.executor} x {a.workers} workers, "
          f"{'warm' if a.warm else 'fresh'} acceptance cache, {os.cpu_count()} cores")
    print(f"  pool + traffic: {t1 - t0:.1f} s wall ({len(pool):,} pool requests)")
    print(f"  block hashes of the pool: {t2 - t1:.1f} s wall")
    print(f"  evaluate: {t3 - t2:.1f} s wall for {n_pol} polic(ies)")
    if cpu:
        print(f"  CPU (summed over replica jobs, in whichever process ran them): drafting {draft:.1f} s "
              f"({tokens * n_pol / draft / 1e3 if draft else float('nan'):,.0f} k tokens/CPU-s), "
              f"simulating {sim:.1f} s ({sim / (tr.n * n_pol) * 1e3:.2f} ms per request over "
              f"{len(parse_configs(a.configs))} configs)")
        per_req = (draft + sim) / (tr.n * n_pol)
        print(f"  per replica: {(draft + sim) / (a.replicas * n_pol):.2f} CPU-s; per request: "
              f"{per_req * 1e3:.2f} CPU-ms")
        day = 256 * (tr.n / a.replicas) * 86400 / a.duration
        for w in (16, 64, 256):
            print(f"  extrapolated 256-replica day ({day:,.0f} requests at this per-replica "
                  f"load), Ray cluster of {w} one-core workers: {day * per_req / w / 3600:.1f} h")
    for pol, res in results.items():
        for cfg, p in res.items():
            print(f"  {pol}/{cfg}: p99 TTFT {p['ttft_ms_p99']:.0f} ms, p99 TPOT "
                  f"{p['tpot_ms_p99']:.1f} ms, out {p['out_tok_s']:,.0f} tok/s, effective repeat "
                  f"share {p['effective_repeat_share']:.1%}, prefix hit "
                  f"{p['prefix_hit_rate']:.1%}, accepted/step {p['accepted_per_step'] or 0:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
