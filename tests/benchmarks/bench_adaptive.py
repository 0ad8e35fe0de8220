"""Adaptive verification's cost in the engine: CPU seconds of one simulated run of suffix and of
suffix-av (vLLM 0.34) on a shipped profile at one concurrency, and the extra share a predict
ladder pays for its default suffix-av row. Prints figures; asserts nothing about time.

    python tests/benchmarks/bench_adaptive.py [--model llama-3.1-8b] [--corpus chat] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    from simkit.app.cells import load_cell
    from simkit.app.options import RunOptions
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import default_num_requests
    from simkit.engine.sim import ClosedLoop, simulate

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="chat")
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    run = RunOptions(model=args.model, corpus=args.corpus, vllm_version="0.34",
                     concurrency=args.concurrency)
    workload, cost = load_cell(run)
    cfg = run.server(cost)
    n = default_num_requests(workload, args.concurrency)
    print(f"{args.model}/{args.corpus}, vLLM 0.34, concurrency {args.concurrency}, {n} requests")
    seconds = {}
    for spec in parse_configs("suffix,suffix-av", "0.34"):
        t0 = time.process_time()
        res = simulate(workload, cost, cfg, spec, load=ClosedLoop(args.concurrency), seed=0,
                       num_requests=n)
        seconds[spec.name] = time.process_time() - t0
        extra = "" if res.adaptive is None else (
            f", {res.adaptive['mean_admitted_slots']:.2f} admitted slots per request-step "
            f"({res.adaptive['budget_share_of_k']:.0%} of K)")
        print(f"  {spec.name:10s} {seconds[spec.name]:6.2f} CPU s, {res.metrics.steps} steps, "
              f"{res.metrics.output_tok_s:,.0f} tok/s{extra}")
    print(f"  suffix-av / suffix CPU time: {seconds['suffix-av'] / seconds['suffix']:.2f}x")


if __name__ == "__main__":
    main()
