"""Benchmark: the warm table build (whole corpus in the global tree, only the sample drafted).

    python tests/benchmarks/bench_warm.py [--model llama-3.1-8b] [--corpora code,code-edit]

Per corpus: the insert-only path over the whole corpus (output tokens per CPU-second), the full
warm build (insert + drafting of the 128 sampled requests), the drafting rate of the sampled tokens,
and K=8 mean accepted tokens per step warm vs cold (sample alone). No cache is used or written.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from simkit.acceptance.build import build_table, build_warm_table
    from simkit.acceptance.stats import summarize
    from simkit.drafters.suffix import SuffixCache, SuffixParams
    from simkit.paths import traces_src_dir
    from simkit.profiles import KMAX, sample_indices
    from traces.corpora import load_corpus

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpora", default="code,code-edit")
    a = ap.parse_args()
    if traces_src_dir() is None:
        sys.exit("raw traces not found (SIMKIT_TRACES_SRC)")
    print(f"{'corpus':16} {'requests':>8} {'out tok':>9} {'insert tok/s':>12} {'warm build s':>12} "
          f"{'sampled tok':>11} {'draft tok/s':>11} {'K=8 acc warm':>12} {'cold':>6}")
    for corpus in [c for c in a.corpora.split(",") if c]:
        reqs = load_corpus(corpus, a.model).requests
        idx = sample_indices(len(reqs))
        tok = sum(len(r.output_ids) for r in reqs)
        cache = SuffixCache(SuffixParams())
        c0 = time.process_time()
        for r, req in enumerate(reqs):
            if len(req.output_ids):
                cache.insert_response(r, req.output_ids)
        ins = time.process_time() - c0
        del cache
        c0 = time.process_time()
        warm = build_warm_table(reqs, idx, kmax=KMAX)
        wcpu = time.process_time() - c0
        cold = build_table([reqs[i] for i in idx], kmax=KMAX)
        stok = int(warm.output_len.sum())
        # drafting time = warm build minus the insert time of the requests it only inserts
        draft_cpu = wcpu - ins * (1 - stok / tok)
        print(f"{corpus:16} {len(reqs):8d} {tok:9d} {tok / ins:12.0f} {wcpu:12.1f} {stok:11d} "
              f"{stok / max(draft_cpu, 1e-9):11.0f} {summarize(warm, 8)['mean_accepted']:12.3f} "
              f"{summarize(cold, 8)['mean_accepted']:6.3f}")
    print(f"peak memory: max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
