"""Benchmark: exact suffix-drafter replay throughput and acceptance-table build time for every corpus of
one model (K = 1..16, sequential order, vLLM default parameters), cached reload time, peak memory.

    python tests/benchmarks/bench_replay.py [--model llama-3.1-8b] [--corpora chat,code,...]
                                            [--max-requests 0] [--jobs 2] [--engine compiled]

Target (issue 3): all corpora of one model within 60 s on the 2-core machine, cached reload < 2 s.
Tables are built without the cache (timed) in --jobs worker processes, one corpus per task.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _build(args: tuple[str, str, int, str, str]) -> dict:
    model, corpus, max_requests, out_dir, engine = args
    from simkit.acceptance.build import build_table
    from simkit.acceptance.cache import save_cached
    from simkit.profiles.sampling import sample_indices
    from traces.corpora import load_corpus

    reqs = load_corpus(corpus, model).requests
    reqs = [reqs[i] for i in sample_indices(len(reqs), max_requests)]
    c0, w0 = time.process_time(), time.perf_counter()
    table = build_table(reqs, kmax=16, model=model, corpus=corpus, engine=engine)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    save_cached(table, Path(out_dir) / corpus)
    return {"corpus": corpus, "requests": len(reqs), "out_tokens": int(table.output_len.sum()),
            "prompt_tokens": int(table.prompt_len.sum()), "cpu_s": cpu, "wall_s": wall,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _sample_bias(model: str, tables: dict) -> None:
    """K=8 mean accepted per step: whole corpus, the profile's sampled requests inside the whole-corpus
    replay, and the shipped profile (warm: should equal the previous column; cold: sample alone)."""
    from simkit.acceptance.stats import summarize
    from simkit.profiles.corpus_profile import load_shipped
    from simkit.profiles.sampling import sample_indices

    print(f"{'corpus':16} {'K=8 acc: whole corpus':>22} {'sampled reqs in corpus':>23} {'shipped (tree)':>20}")
    for c, tab in tables.items():
        idx = sample_indices(tab.num_requests)
        try:
            prof = load_shipped(model, c)
            shipped = f"{summarize(prof.table, 8)['mean_accepted']:.3f} ({prof.provenance.get('tree', 'cold')})"
            shipped = f"{shipped:>20}"
        except Exception as exc:  # noqa: BLE001 - report and go on
            shipped = f"{'n/a (' + type(exc).__name__ + ')':>20}"
        print(f"{c:16} {summarize(tab, 8)['mean_accepted']:22.3f} "
              f"{summarize(tab, 8, idx)['mean_accepted']:23.3f} {shipped}")


def main() -> None:
    from simkit.acceptance.cache import load_cached
    from simkit.paths import traces_src_dir
    from traces.corpora import CORPORA, MIX

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpora", default=",".join(list(CORPORA) + [MIX]))
    ap.add_argument("--max-requests", type=int, default=0, help="0 = every request")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--engine", default="compiled", choices=("compiled", "python"))
    a = ap.parse_args()
    if traces_src_dir() is None:
        sys.exit("raw traces not found (SIMKIT_TRACES_SRC)")
    corpora = [c for c in a.corpora.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        w0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=a.jobs) as pool:
            rows = list(pool.map(_build, [(a.model, c, a.max_requests, tmp, a.engine) for c in corpora]))
        wall = time.perf_counter() - w0
        print(f"{'corpus':16} {'requests':>8} {'out tok':>9} {'prompt tok':>10} {'cpu s':>8} "
              f"{'out tok/s/core':>14} {'worker RSS MB':>13}")
        for r in rows:
            print(f"{r['corpus']:16} {r['requests']:8d} {r['out_tokens']:9d} {r['prompt_tokens']:10d} "
                  f"{r['cpu_s']:8.1f} {r['out_tokens'] / r['cpu_s']:14.0f} {r['rss_mb']:13.0f}")
        tok = sum(r["out_tokens"] for r in rows)
        cpu = sum(r["cpu_s"] for r in rows)
        print(f"all corpora of {a.model}: {tok} output tokens, build wall {wall:.1f} s with {a.jobs} "
              f"jobs (target 60 s), {cpu:.1f} cpu s, {tok / cpu:.0f} output tokens/s per core")
        t0 = time.perf_counter()
        tables = {c: load_cached(Path(tmp) / c) for c in corpora}
        print(f"cached reload of all {len(corpora)} tables: {time.perf_counter() - t0:.2f} s (target < 2 s)")
        if a.max_requests == 0:
            _sample_bias(a.model, tables)
    peak = max(r["rss_mb"] for r in rows)
    print(f"peak memory: worker max RSS {peak:.0f} MB, "
          f"parent max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
