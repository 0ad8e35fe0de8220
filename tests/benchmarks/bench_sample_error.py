"""How far the 128-request profile sample's predictions are from the whole corpus's.

For one (model, corpus): predict the ladder twice with the same engine, cost model, seeds and
request count, once on the shipped-rule profile (128 sampled requests, warm tree) and once on a
profile of EVERY request of the corpus (the same warm whole-corpus replay, all rows kept), and
print tok/s per configuration and the relative difference. Needs SIMKIT_TRACES_SRC.

    python3 tests/benchmarks/bench_sample_error.py --model llama-3.1-8b --corpus mix \
        [--sample-sizes 128,512,1024]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="mix")
    ap.add_argument("--configs", default="vanilla,suffix,kpad:4,8,12")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--num-requests", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample-sizes", default="",
                    help="also compare samples of these sizes (same rule, same warm tree)")
    args = ap.parse_args()

    from simkit.costmodel import load_cost_model
    from simkit.engine import predict as P
    from simkit.engine.workload import Workload
    from simkit.profiles import profile_from_raw

    kw = dict(configs=args.configs, seeds=args.seeds, num_requests=args.num_requests,
              workers=args.workers, source="raw")
    t0 = time.time()
    sample = P.predict(args.model, args.corpus, **kw)
    t1 = time.time()
    n = sample.workload_provenance["corpus_requests"]
    full_prof = profile_from_raw(args.model, args.corpus, sample_size=n, tree="warm")
    full = Workload.from_profile(full_prof)
    cost = load_cost_model(args.model, "h200")
    t2 = time.time()
    whole = P.predict(args.model, args.corpus, workload=full, cost=cost, **kw)
    t3 = time.time()
    n_sample = len(sample.workload_provenance["sample_indices"])
    print(f"{args.model}/{args.corpus}: sample {n_sample} of {n} requests vs all {full.num_requests}; {args.num_requests} requests per run, "
          f"{args.seeds} seeds; times: sample predict {t1 - t0:.0f} s, full table {t2 - t1:.0f} s, "
          f"full predict {t3 - t2:.0f} s")
    print(f"{'config':10} {'sample tok/s':>13} {'full tok/s':>11} {'rel diff':>9} "
          f"{'acc/step s':>10} {'acc/step f':>10}")
    worst = 0.0
    for a, b in zip(sample.rows, whole.rows):
        rel = a.output_tok_s / b.output_tok_s - 1
        worst = max(worst, abs(rel))
        print(f"{a.config:10} {a.output_tok_s:13,.0f} {b.output_tok_s:11,.0f} {rel:+9.1%} "
              f"{a.mean_accepted:10.2f} {b.mean_accepted:10.2f}")
    print(f"max |rel diff| {worst:.1%}; best config sample {sample.best_config} "
          f"(K {sample.best_k}), full {whole.best_config} (K {whole.best_k})")
    for size in [int(x) for x in args.sample_sizes.split(",") if x.strip()]:
        prof = profile_from_raw(args.model, args.corpus, sample_size=size, tree="warm")
        other = P.predict(args.model, args.corpus, workload=Workload.from_profile(prof),
                          cost=cost, **kw)
        rels = [a.output_tok_s / b.output_tok_s - 1 for a, b in zip(other.rows, whole.rows)]
        print(f"sample {size}: " + ", ".join(f"{a.config} {r:+.1%}" for a, r in
                                            zip(other.rows, rels))
              + f"; max |rel diff| {max(abs(r) for r in rels):.1%}; best {other.best_config}")


if __name__ == "__main__":
    main()
