"""Benchmark: the warm table build (whole corpus in the global tree, only the sample drafted).

    python tests/benchmarks/bench_warm.py [--model llama-3.1-8b] [--corpora code,code-edit]
                                          [--engine compiled|python]

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


def _insert_only(reqs, engine: str) -> float:
    """CPU seconds to insert every response into the global tree (no local trees, no drafts)."""
    import numpy as np

    from simkit.drafters.suffix.cache import SuffixCache, SuffixParams
    c0 = time.process_time()
    if engine == "python":
        cache = SuffixCache(SuffixParams())
        for r, req in enumerate(reqs):
            if len(req.output_ids):
                cache.insert_response(r, req.output_ids)
    else:
        from simkit.drafters.suffix.compiled import replay_sequential
        none = np.zeros((0, 16), np.uint8)
        replay_sequential(reqs, SuffixParams(), 16, np.full(len(reqs), -1, np.int64), none, none, None)
    return time.process_time() - c0


def main() -> None:
    from simkit.acceptance.build import build_table, build_warm_table
    from simkit.acceptance.stats import summarize
    from simkit.paths import traces_src_dir
    from simkit.profiles.corpus_profile import KMAX
    from simkit.profiles.sampling import sample_indices
    from traces.corpora import load_corpus

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpora", default="code,code-edit")
    ap.add_argument("--engine", default="compiled", choices=("compiled", "python"))
    a = ap.parse_args()
    if traces_src_dir() is None:
        sys.exit("raw traces not found (SIMKIT_TRACES_SRC)")
    print(f"{'corpus':16} {'requests':>8} {'out tok':>9} {'insert tok/s':>12} {'warm build s':>12} "
          f"{'sampled tok':>11} {'draft tok/s':>11} {'K=8 acc warm':>12} {'cold':>6}")
    first = load_corpus(a.corpora.split(",")[0], a.model).requests[:3]
    build_warm_table(first, [2], kmax=KMAX, engine=a.engine)      # numba: load or compile, untimed
    _insert_only(first, a.engine)
    for corpus in [c for c in a.corpora.split(",") if c]:
        reqs = load_corpus(corpus, a.model).requests
        idx = sample_indices(len(reqs))
        tok = sum(len(r.output_ids) for r in reqs)
        ins = _insert_only(reqs, a.engine)
        c0 = time.process_time()
        warm = build_warm_table(reqs, idx, kmax=KMAX, engine=a.engine)
        wcpu = time.process_time() - c0
        cold = build_table([reqs[i] for i in idx], kmax=KMAX, engine=a.engine)
        stok = int(warm.output_len.sum())
        # drafting time = warm build minus the insert time of the requests it only inserts
        draft_cpu = wcpu - ins * (1 - stok / tok)
        rate = f"{stok / draft_cpu:11.0f}" if draft_cpu > 0.05 * wcpu else f"{'n/a':>11}"  # below timing noise
        print(f"{corpus:16} {len(reqs):8d} {tok:9d} {tok / ins:12.0f} {wcpu:12.1f} {stok:11d} "
              f"{rate} {summarize(warm, 8)['mean_accepted']:12.3f} "
              f"{summarize(cold, 8)['mean_accepted']:6.3f}")
    print(f"peak memory: max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
