"""Engine speed: simulated output tokens per CPU second per config, wall time of one predict (all
configs, mix corpus) and of the full sweep (11 models x all corpora). Targets on the 2-core CI
machine: predict < 10 s, sweep < 5 min. Prints figures; asserts nothing about time.

    python tests/benchmarks/bench_engine.py [--model llama-3.1-8b] [--corpus mix] [--no-sweep]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time


def gpu_recipe_scenario(hardware: str = "h200") -> None:
    """The one measured H200 run in docs (gpu-recipe.md): Llama-3.1-8B, 32 prompts x 512 tokens,
    max_tokens 256, max_num_seqs 32, max_model_len 4096; dummy weights accepted every draft.
    Printed beside the measurement as a sanity check of engine + cost model (not a fit)."""
    import numpy as np

    from simkit.acceptance.table import AcceptanceTable
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import EngineConfig, parse_configs
    from simkit.engine.sim import ClosedLoop, simulate
    from simkit.engine.workload import Workload

    n, plen, olen, kmax = 32, 512, 256, 8
    offsets = np.arange(n + 1, dtype=np.int64) * olen
    full = np.tile(np.arange(1, kmax + 1, dtype=np.uint8), (n * olen, 1))   # d = a = K
    table = AcceptanceTable("llama-3.1-8b", "gpu-recipe", "suffix", {}, kmax, "sequential",
                            np.full(n, plen, np.int32), np.full(n, olen, np.int32), offsets,
                            full, full.copy())
    cost = load_cost_model("llama-3.1-8b", hardware, max_model_len=4096)
    cfg = EngineConfig(max_num_seqs=32, max_model_len=4096,
                       kv_capacity_tokens=cost.kv_capacity_tokens)
    measured = {"vanilla": 5576, "suffix-4": 12270}
    for spec in parse_configs("vanilla,suffix:4"):
        m = simulate(Workload.from_table(table), cost, cfg, spec, load=ClosedLoop(32)).metrics
        sim = m.output_tokens / m.sim_time_s
        print(f"gpu-recipe scenario {spec.name:9s}: simulated {sim:7,.0f} tok/s (whole run), "
              f"measured {measured[spec.name]:,} tok/s on H200 ({sim / measured[spec.name] - 1:+.0%}); "
              f"cost model {cost.label}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="mix")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--sweep-seeds", type=int, default=1)
    args = ap.parse_args()

    from simkit.engine.config import parse_configs
    from simkit.engine.config import DEFAULT_CONFIGS
    from simkit.app.predict import predict
    from simkit.engine.runner import engine_config
    from simkit.app.cells import load_cell
    from simkit.app.options import RunOptions
    from simkit.engine.sim import ClosedLoop, simulate

    print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    gpu_recipe_scenario(args.hardware)
    t0 = time.perf_counter()
    workload, cost = load_cell(RunOptions(args.model, args.corpus, hardware=args.hardware))
    print(f"load profile + cost model ({args.model}/{args.corpus}): "
          f"{time.perf_counter() - t0:.2f} s; {workload.num_requests} requests, "
          f"{int(workload.output_len.sum()):,} output tokens, origin {workload.origin}")
    cfg = engine_config(cost)
    print(f"{'config':18s} {'steps':>7s} {'out tokens':>11s} {'wall s':>7s} {'cpu s':>7s} "
          f"{'sim tok/wall-s':>15s} {'sim tok/cpu-s':>14s} {'steps/cpu-s':>12s}")
    for spec in parse_configs(DEFAULT_CONFIGS):
        c0, w0 = time.process_time(), time.perf_counter()
        res = simulate(workload, cost, cfg, spec, load=ClosedLoop(32), seed=0,
                       num_requests=max(workload.num_requests, 128))
        dt, wall = time.process_time() - c0, time.perf_counter() - w0
        m = res.metrics
        print(f"{spec.name:18s} {m.steps:7d} {m.output_tokens:11,d} {wall:7.2f} {dt:7.2f} "
              f"{m.output_tokens / wall:15,.0f} {m.output_tokens / dt:14,.0f} {m.steps / dt:12,.0f}")

    t0 = time.perf_counter()
    pred = predict(RunOptions(args.model, args.corpus, hardware=args.hardware))
    wall = time.perf_counter() - t0
    print(f"predict {args.model}/{args.corpus}: {len(pred.rows)} configs x {pred.seeds} seeds, "
          f"{pred.num_requests} requests each: wall {wall:.2f} s (target < 10 s)")

    if not args.no_sweep:
        from simkit.catalog.models import list_models
        from simkit.app.sweep import sweep
        from traces.corpora import list_corpora

        models, corpora = list_models(), list_corpora()
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            res = sweep(models, corpora, out, configs=DEFAULT_CONFIGS,
                        run=RunOptions(hardware=args.hardware, seeds=args.sweep_seeds))
            wall = time.perf_counter() - t0
        print(f"sweep {len(models)} models x {len(corpora)} corpora ({res['cells']} cells, "
              f"{res['rows']} rows, {args.sweep_seeds} seed): wall {wall:.1f} s (target < 300 s); "
              f"cells not run: {len(res['failed'])}")
        for cell, err in sorted(res["failed"].items()):
            print(f"  not run {cell}: {err}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the parent process: {peak:.0f} MiB; load average at end: "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
