"""How far a profile sample's predictions are from the whole corpus's, per configuration.

For each (model, corpus): the same ladder (same engine, cost model, seeds, requests per run) on
three profiles of the same warm whole-corpus replay: EVERY request (the reference), the shipped
rule's sample (stratified, weighted: simkit.profiles.sampling) and the old evenly spaced, unweighted sample
of the same size. Prints tok/s per configuration and each sample's relative error. The reference
is run on two seed sets (0..S-1 and S..2S-1) so its own seed noise is printed beside the errors:
with 1,024 requests per run the draw of 1,024 of the corpus's requests differs per seed, and the
heavy tail makes that noise ~2 % on mix; `--num-requests 0` runs every corpus request the same
number of times per run (whole cycles of the corpus: the fewest that reach 8,192 requests, fewer
when that would pass 5 M output tokens, at least one; each sample drawn to the same count),
where the reference's noise is ~0.1-0.5 %. No timed assertions. Needs
SIMKIT_TRACES_SRC.

    python3 tests/benchmarks/bench_sample_error.py --pairs llama-3.1-8b/mix,llama-3.1-8b/math \
        [--num-requests 1024|0] [--seeds 3] [--sample-size 128]
"""

from __future__ import annotations

import argparse
import time


def _ladder(workload, cost, specs, seeds: list[int], n_req: int, workers: int) -> dict[str, float]:
    """Mean tok/s per config over the given seeds (closed loop, concurrency 32)."""
    import numpy as np

    from simkit.engine.runner import Cell, Job, engine_config, prepare, run_jobs
    from simkit.engine.sim import ClosedLoop

    cell = Cell(workload, cost, engine_config(cost))
    prepare(cell, specs)
    flat = run_jobs(cell, [Job(s, seed, ClosedLoop(32), n_req) for s in specs for seed in seeds],
                    workers)
    out = {}
    for i, spec in enumerate(specs):
        vals = [r.metrics.output_tok_s for r in flat[i * len(seeds):(i + 1) * len(seeds)]]
        out[spec.name] = float(np.mean(vals))
    return out


def bench_pair(model: str, corpus: str, args) -> list[dict]:
    """Rows (one per config) of reference, new-rule and old-rule tok/s for one (model, corpus)."""
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.workload import Workload
    from simkit.history import WARM
    from simkit.profiles.corpus_profile import profile_from_raw

    t0 = time.time()
    from traces.corpora import load_corpus

    n = len(load_corpus(corpus, model).requests)
    full = profile_from_raw(model, corpus, sample_size=n, history=WARM)   # first: its table is
    new = profile_from_raw(model, corpus, sample_size=args.sample_size, history=WARM)  # reused
    old = profile_from_raw(model, corpus, sample_size=args.sample_size, history=WARM, rule="even")
    t1 = time.time()
    cost = load_cost_model(model, "h200")
    specs = parse_configs(args.configs)
    tokens = int(full.table.output_len.sum())
    cycles = max(1, min(-(-8192 // n), 5_000_000 // max(tokens, 1)))
    n_req = args.num_requests or n * cycles              # 0: whole cycles of the corpus
    seeds = list(range(args.seeds))
    alt = list(range(args.seeds, 2 * args.seeds))
    w_full = Workload.from_profile(full)
    ref = _ladder(w_full, cost, specs, seeds, n_req, args.workers)
    ref2 = _ladder(w_full, cost, specs, alt, n_req, args.workers)
    got_new = _ladder(Workload.from_profile(new), cost, specs, seeds, n_req, args.workers)
    got_old = _ladder(Workload.from_profile(old), cost, specs, seeds, n_req, args.workers)
    t2 = time.time()
    info = new.provenance.get("sample", {})
    strata = ", ".join(f"{k} {v['sample']}/{v['corpus']}" for k, v in info.get("strata", {}).items())
    print(f"\n{model}/{corpus}: {n:,} requests; new rule {new.table.num_requests} "
          f"({info.get('rule')}{'; ' + strata if strata else ''}; tilt "
          f"{info.get('weight_tilt_range')}), {new.table.accepted.shape[0]:,} positions; old rule "
          f"{old.table.num_requests}, {old.table.accepted.shape[0]:,} positions; {n_req:,} requests "
          f"per run, seeds {seeds[0]}..{seeds[-1]} (reference also {alt[0]}..{alt[-1]}); "
          f"profiles {t1 - t0:.0f} s, runs {t2 - t1:.0f} s")
    print(f"{'config':10} {'whole tok/s':>11} {'seed noise':>10} {'new tok/s':>10} {'new err':>8} "
          f"{'old tok/s':>10} {'old err':>8}")
    rows = []
    for name, base in ref.items():
        row = {"model": model, "corpus": corpus, "config": name, "whole": base,
               "noise": ref2[name] / base - 1, "new": got_new[name] / base - 1,
               "old": got_old[name] / base - 1}
        rows.append(row)
        print(f"{name:10} {base:11,.0f} {row['noise']:+10.2%} {got_new[name]:10,.0f} "
              f"{row['new']:+8.2%} {got_old[name]:10,.0f} {row['old']:+8.2%}")
    print(f"max |err| new {max(abs(r['new']) for r in rows):.2%}, old "
          f"{max(abs(r['old']) for r in rows):.2%}; reference seed-set difference "
          f"{max(abs(r['noise']) for r in rows):.2%}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default="llama-3.1-8b/mix",
                    help="comma-separated model/corpus pairs; 'model/*' = every corpus of it")
    ap.add_argument("--configs", default="vanilla,suffix,kpad:4,8,12")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--num-requests", type=int, default=1024,
                    help="requests per run, both sides; 0 = whole cycles of the corpus")
    ap.add_argument("--sample-size", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    from traces.corpora import CORPORA, MIX

    pairs = []
    for item in args.pairs.split(","):
        model, corpus = item.strip().split("/")
        pairs += [(model, c) for c in (list(CORPORA) + [MIX] if corpus == "*" else [corpus])]
    rows = []
    for model, corpus in pairs:
        rows += bench_pair(model, corpus, args)
    print("\n| model | corpus | config | whole tok/s | seed noise | new rule | old rule |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['corpus']} | {r['config']} | {r['whole']:,.0f} | "
              f"{r['noise']:+.2%} | {r['new']:+.2%} | {r['old']:+.2%} |")
    worst = max(rows, key=lambda r: abs(r["new"]))
    print(f"\nworst new-rule error {worst['new']:+.2%} ({worst['model']}/{worst['corpus']} "
          f"{worst['config']}); worst old-rule error {max(abs(r['old']) for r in rows):.2%}; "
          f"largest reference seed-set difference {max(abs(r['noise']) for r in rows):.2%}")


if __name__ == "__main__":
    main()
