"""Benchmark: compiled vs pure-Python suffix replay, arctic-inference for one K, whole corpus set.

    python tests/benchmarks/bench_compiled_drafter.py [--model llama-3.1-8b] [--corpus code]
        [--requests 40] [--set-corpora all] [--jobs 2] [--cold-compile]

Prints (nothing is asserted):
1. numba start-up: loading the cached machine code in this process (and, with --cold-compile, a
   compile from scratch in a subprocess with an empty NUMBA_CACHE_DIR);
2. on the first --requests requests of --corpus (sequential, vLLM defaults, K = 1..16 at once):
   output tokens per CPU-second of the compiled and of the pure-Python engine (tables compared
   byte for byte), and of arctic-inference's SuffixDecodingCache replaying ONE K (K = 8;
   start_request / speculate / add_active_response per position, as vLLM drives it) when importable;
3. the whole corpus set of --model: every request of every corpus, K = 1..16, sequential
   whole-corpus replay (each request drafted with all earlier responses in the global tree), in
   --jobs worker processes, largest corpus first; wall time, and per corpus CPU-s and tokens/CPU-s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
K_ARCTIC = 8


def _tiny():
    import numpy as np
    from types import SimpleNamespace
    return [SimpleNamespace(prompt_ids=np.array([1, 2, 3, 1, 2], np.int32),
                            output_ids=np.array([3, 1, 2, 3, 1], np.int32))] * 3


def _startup() -> float:
    """Seconds for the first compiled builds (sequential + concurrent): cache load or compile."""
    from simkit.acceptance.build import build_table, build_warm_table
    t0 = time.perf_counter()
    build_table(_tiny(), kmax=16, engine="compiled")
    build_table(_tiny(), kmax=16, engine="compiled", ordering="concurrent", concurrency=2)
    build_warm_table(_tiny(), [1], kmax=16, engine="compiled")
    return time.perf_counter() - t0


def _cold_compile() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        code = ("import sys; sys.path.insert(0, %r); from tests.benchmarks.bench_compiled_drafter "
                "import _startup; print(_startup())" % str(Path(__file__).resolve().parents[2]))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])


def _arctic_one_k(reqs, k: int) -> float | None:
    """CPU seconds of arctic-inference's own cache replaying `reqs` sequentially for one K."""
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except ImportError:
        return None
    import numpy as np

    from simkit.drafters.suffix.cache import SuffixParams
    p = SuffixParams()
    cache = SuffixDecodingCache(max_tree_depth=p.max_tree_depth, max_cached_requests=p.max_cached_requests)
    c0 = time.process_time()
    for r, req in enumerate(reqs):
        prompt = np.ascontiguousarray(req.prompt_ids, np.int32)
        out = np.ascontiguousarray(req.output_ids, np.int32)
        if not len(out):
            continue
        cache.start_request(r, prompt)
        cache.add_active_response(r, out[:1])
        ctx = np.concatenate([prompt, out])
        for t in range(1, len(out)):
            end = len(prompt) + t
            cache.speculate(r, ctx[max(0, end - p.max_tree_depth):end], max_spec_tokens=k,
                            max_spec_factor=p.max_spec_factor, max_spec_offset=p.max_spec_offset,
                            min_token_prob=p.min_token_prob)
            cache.add_active_response(r, out[t:t + 1])
        cache.stop_request(r)
    return time.process_time() - c0


def _compare(model: str, corpus: str, n: int) -> None:
    import numpy as np

    from simkit.acceptance.build import build_table
    from traces.corpora import load_corpus

    reqs = load_corpus(corpus, model).requests[:n]
    tok = sum(len(r.output_ids) for r in reqs)
    rates = {}
    tables = {}
    for engine in ("compiled", "python"):
        c0 = time.process_time()
        tables[engine] = build_table(reqs, kmax=16, engine=engine)
        rates[engine] = tok / (time.process_time() - c0)
    same = all(np.array_equal(getattr(tables["compiled"], f), getattr(tables["python"], f))
               for f in ("accepted", "drafted"))
    print(f"{corpus}, first {len(reqs)} requests, {tok} output tokens, sequential, K = 1..16 at once:")
    print(f"  compiled      {rates['compiled']:10.0f} output tokens/CPU-s")
    print(f"  pure Python   {rates['python']:10.0f} output tokens/CPU-s   "
          f"(x{rates['compiled'] / rates['python']:.1f}; tables byte-identical: {same})")
    arctic = _arctic_one_k(reqs, K_ARCTIC)
    if arctic is None:
        print("  arctic-inference: not importable")
    else:
        print(f"  arctic-inference SuffixDecodingCache, ONE K (K={K_ARCTIC}): {tok / arctic:10.0f} output "
              f"tokens/CPU-s (x16 for all K one by one: {tok / arctic / 16:.0f})")


def _build(args: tuple[str, str]) -> dict:
    model, corpus = args
    from simkit.acceptance.build import build_table
    from traces.corpora import load_corpus

    _startup()
    w0 = time.perf_counter()
    reqs = load_corpus(corpus, model).requests
    load = time.perf_counter() - w0
    c0, w1 = time.process_time(), time.perf_counter()
    table = build_table(reqs, kmax=16, model=model, corpus=corpus)
    import resource
    return {"corpus": corpus, "requests": len(reqs), "tok": int(table.output_len.sum()),
            "cpu": time.process_time() - c0, "wall": time.perf_counter() - w1, "load": load,
            "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _corpus_set(model: str, corpora: list[str], jobs: int) -> None:
    from traces.corpora import load_corpus

    sizes = {c: sum(len(r.output_ids) for r in load_corpus(c, model).requests) for c in corpora}
    order = sorted(corpora, key=lambda c: -sizes[c])
    print(f"load average before the set: {os.getloadavg()[0]:.1f} (other jobs share the cores)")
    w0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(_build, [(model, c) for c in order]))
    wall = time.perf_counter() - w0
    print(f"whole corpus set of {model}: every request, K = 1..16, sequential whole-corpus replay, "
          f"{jobs} worker processes")
    print(f"  {'corpus':16} {'requests':>8} {'out tok':>9} {'load s':>7} {'build cpu s':>11} "
          f"{'build wall s':>12} {'tok/CPU-s':>10} {'worker max RSS MB':>17}")
    for r in rows:
        print(f"  {r['corpus']:16} {r['requests']:8d} {r['tok']:9d} {r['load']:7.1f} {r['cpu']:11.1f} "
              f"{r['wall']:12.1f} {r['tok'] / r['cpu']:10.0f} {r['rss']:17.0f}")
    tok, cpu = sum(r["tok"] for r in rows), sum(r["cpu"] for r in rows)
    print(f"  all: {tok} output tokens, {cpu:.1f} build CPU-s ({tok / cpu:.0f} tokens/CPU-s), "
          f"wall {wall:.1f} s incl. corpus loading and worker start-up (target 60 s)")


def main() -> None:
    from simkit.paths import traces_src_dir
    from traces.corpora import CORPORA, MIX

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpus", default="code")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--set-corpora", default="all", help="comma list, 'all' or 'none'")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cold-compile", action="store_true")
    a = ap.parse_args()
    if traces_src_dir() is None:
        sys.exit("raw traces not found (SIMKIT_TRACES_SRC)")
    print(f"numba start-up in this process (on-disk cache load, or compile if absent): {_startup():.1f} s")
    if a.cold_compile:
        print(f"numba cold compile (empty cache, subprocess): {_cold_compile():.1f} s")
    _compare(a.model, a.corpus, a.requests)
    corpora = list(CORPORA) + [MIX] if a.set_corpora == "all" else \
        [c for c in a.set_corpora.split(",") if c and c != "none"]
    if corpora:
        _corpus_set(a.model, corpora, a.jobs)


if __name__ == "__main__":
    main()
