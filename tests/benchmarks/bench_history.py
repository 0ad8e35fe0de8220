"""Benchmark: acceptance tables under a request history against first-pass (cold) tables.

    python tests/benchmarks/bench_history.py [--model llama-3.1-8b] [--corpora all]
        [--histories cold,repeat:0.5,hot] [--engine compiled|python]

Per corpus and history: CPU seconds to build the 128-request profile table (K = 1..16,
sequential), the ratio to the cold build of the same requests (measured in the same run: the
machine is shared, compare ratios), and K=8 mean accepted tokens per step. Then the total for the
model's whole profile set per history (the issue's bar: under a minute). No cache is used.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from simkit.acceptance import build
    from simkit.acceptance.history_tables import prelude_outputs
    from simkit.acceptance.stats import summarize
    from simkit.history import parse_history
    from simkit.paths import traces_src_dir
    from simkit.profiles.corpus_profile import KMAX
    from simkit.profiles.sampling import sample_indices
    from traces.corpora import CORPORA, MIX, load_corpus

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--corpora", default="all")
    ap.add_argument("--histories", default="cold,repeat:0.5,hot")
    ap.add_argument("--engine", default=None, help="compiled | python (when the build has both)")
    a = ap.parse_args()
    if traces_src_dir() is None:
        sys.exit("raw traces not found (SIMKIT_TRACES_SRC)")
    corpora = list(CORPORA) + [MIX] if a.corpora == "all" else a.corpora.split(",")
    hists = [h for h in a.histories.split(",") if h]
    kw = {}
    if a.engine and "engine" in inspect.signature(build.build_table).parameters:
        kw["engine"] = a.engine
    totals = {h: 0.0 for h in hists}
    print(f"{'corpus':15} {'history':12} {'out tok':>8} {'cpu s':>7} {'x cold':>7} {'K=8 acc':>8}")
    for corpus in corpora:
        reqs = load_corpus(corpus, a.model).requests
        sample = [reqs[i] for i in sample_indices(len(reqs))]
        tok = sum(len(r.output_ids) for r in sample)
        base = None
        for h in hists:
            c0 = time.process_time()
            table = build.build_table(sample, kmax=KMAX, prelude=prelude_outputs(sample, parse_history(h)), **kw)
            cpu = time.process_time() - c0
            totals[h] += cpu
            base = cpu if h == "cold" else base
            ratio = f"{cpu / base:7.2f}" if base else "      -"
            print(f"{corpus:15} {h:12} {tok:8d} {cpu:7.2f} {ratio} "
                  f"{summarize(table, 8)['mean_accepted']:8.3f}")
    print("whole profile set of " + a.model + ": " +
          ", ".join(f"{h} {s:.1f} CPU-s" for h, s in totals.items()))


if __name__ == "__main__":
    main()
