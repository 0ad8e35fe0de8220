"""Make token-id request files for calibration runs from the real corpora (CPU host).

`python -m calibrate.make_requests --model llama-3.1-8b --corpus chat --out .gpu/requests`
writes <out>/<model>__<corpus>.jsonl (token ids of third-party traces: never commit it) and a
.meta.json beside it (counts, sources, producing models, seed). Requests are shuffled with a fixed
seed so the first N of a file are a random sample of the corpus, not its first source only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from traces.calibration_requests import CalRequest, write_requests


def make(model: str, corpus: str, out_dir: Path, n: int = 400, seed: int = 0,
         own_only: bool = True, cap: int = 1024) -> dict:
    """Write the request file; returns its metadata (the mean output as recorded and, as
    output_len_mean_capped, cut at `cap`, the runs' output cap)."""
    from traces.model_outputs import model_outputs
    from traces.corpora import load_corpus

    from traces.user import list_user_corpora

    c = load_corpus(corpus, model)
    own = model_outputs(model).own
    reqs = list(c.requests)
    producer_counts = Counter(r.model for r in reqs)
    if corpus in list_user_corpora():
        own_only = False           # your own traffic: its outputs are what your model produced
    if own_only:
        reqs = [r for r in reqs if r.model == own]
    reqs = [r for r in reqs if len(r.prompt_ids) and len(r.output_ids)]
    perm = np.random.default_rng(seed).permutation(len(reqs))
    chosen = [reqs[i] for i in perm[:n]]
    cal = [CalRequest(f"r{i}", np.asarray(r.prompt_ids, np.int32), np.asarray(r.output_ids, np.int32),
                      f"{r.source}|{r.model}|greedy={r.greedy}|turn={r.turn}")
           for i, r in enumerate(chosen)]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{model}__{corpus}.jsonl"
    write_requests(path, cal)
    meta = {
        "model": model, "corpus": corpus, "seed": seed, "count": len(cal),
        "corpus_size": len(c.requests), "own_only": own_only,
        "producers_in_corpus": dict(producer_counts),
        "sources": dict(Counter(r.source for r in chosen)),
        "producers": dict(Counter(r.model for r in chosen)),
        "greedy": dict(Counter(str(r.greedy) for r in chosen)),
        "prompt_len_mean": float(np.mean([len(r.prompt_ids) for r in chosen])) if chosen else 0,
        "output_len_mean": float(np.mean([len(r.output_ids) for r in chosen])) if chosen else 0,
        "output_len_mean_capped": float(np.mean([min(len(r.output_ids), cap) for r in chosen]))
        if chosen else 0, "output_cap": cap,
        "corpus_skipped": c.skipped, "proxy_note": c.proxy_note,
    }
    path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    """CLI entry: one (model, corpus) file per call."""
    ap = argparse.ArgumentParser(prog="calibrate.make_requests", description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", type=Path, default=Path(".gpu/requests"))
    ap.add_argument("-n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--any-producer", action="store_true",
                    help="keep proxy outputs too (default: the model's own outputs only)")
    a = ap.parse_args(argv)
    meta = make(a.model, a.corpus, a.out, a.n, a.seed, not a.any_producer)
    print(json.dumps({k: meta[k] for k in ("model", "corpus", "count", "sources", "producers",
                                           "prompt_len_mean", "output_len_mean")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
