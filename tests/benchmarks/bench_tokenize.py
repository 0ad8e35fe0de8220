"""Tokenization throughput over the whole traces-src source set, and cached corpus reload time.

Run: python tests/benchmarks/bench_tokenize.py [--families llama3,qwen]
Targets (issue 2): all corpora of one tokenizer in < 60 s cold on a 2-core machine; cached
re-load of a corpus < 2 s. Uses a fresh temporary cache so the first load is really cold.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--families", default="llama3,qwen")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SIMKIT_CACHE_DIR"] = tmp
        from simkit.paths import traces_src_dir
        from traces.corpora import CORPORA, MIX, load_corpus
        from traces.sources import SOURCES
        from traces.tokenize import tokenize_records
        from traces.tokenizers import get_tokenizer

        src = traces_src_dir()
        if src is None:
            print("traces-src not found (set SIMKIT_TRACES_SRC)")
            return 1
        print(f"cpus: {os.cpu_count()}  traces-src: {src}")
        model_of = {"llama3": "llama-3.1-8b", "qwen": "qwen2.5-7b", "r1-qwen":
                    "ds-r1-distill-qwen-7b", "r1-llama": "ds-r1-distill-llama-70b"}
        for family in args.families.split(","):
            t = time.perf_counter()
            get_tokenizer(family)
            t_load = time.perf_counter() - t
            # 1) the whole source set: every source x every producing model, this tokenizer.
            n_req = n_tok = 0
            t_parse = t_tok = 0.0
            for source in SOURCES.values():
                for producer in source.producers:
                    t = time.perf_counter()
                    records = source.load(src, producer, Counter())
                    t_parse += time.perf_counter() - t
                    t = time.perf_counter()
                    block = tokenize_records(family, records, {}, {})
                    t_tok += time.perf_counter() - t
                    n_req += len(block)
                    n_tok += len(block.prompt_tokens) + len(block.output_tokens)
            print(f"[{family}] tokenizer load {t_load:.2f} s; whole source set: {n_req} requests, "
                  f"{n_tok:,} tokens; parse {t_parse:.1f} s, tokenize {t_tok:.1f} s "
                  f"= {n_tok / t_tok:,.0f} tokens/s")
            # 2) all corpora for one model of this family, cold (parse + tokenize + write cache).
            model = model_of[family]
            t = time.perf_counter()
            sizes = {c: len(load_corpus(c, model)) for c in CORPORA}
            t_cold = time.perf_counter() - t
            print(f"[{family}] all corpora for {model}, cold: {t_cold:.1f} s "
                  f"({sum(sizes.values())} requests) target < 60 s")
            # 3) cached reload of every corpus and of mix.
            t = time.perf_counter()
            for c in CORPORA:
                load_corpus(c, model)
            t_warm_all = time.perf_counter() - t
            t = time.perf_counter()
            mix = load_corpus(MIX, model)
            t_mix = time.perf_counter() - t
            print(f"[{family}] cached reload: all corpora {t_warm_all:.2f} s, mix ({len(mix)} "
                  f"requests) {t_mix:.2f} s  target < 2 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
