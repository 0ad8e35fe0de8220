"""Tune the batch-size -> K table of the dynamic-K `table` policy for one run (CPU host).

`python -m calibrate.dynk_tables --model llama-3.1-8b --corpus math --runs 32:128 --out .gpu/dynk`
does what simkit's simulator does when it tunes the table for the same run (simkit.engine.policies
.BatchSizeTable over the run's requests, their cold acceptance table, and the cost model's price of
a uniform decode batch with graphs captured at Kmax only), and writes the table for
calibrate.runner's dynamic config. The file holds derived numbers only (no token ids).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from traces.calibration_requests import read_requests, select_requests
from calibrate.forcing import FORCE_COPY
from calibrate.runner import (MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS,
                              table_file_name)


def tuned_table(model: str, corpus: str, reqs: list, concurrency: int, ks: tuple[int, ...],
                cap: int) -> dict:
    """The tuned table and the inputs it came from."""
    from simkit.engine.pricing import price_fn_for
    from simkit.engine.policies import BatchSizeTable
    from simkit.engine.scheduler import mean_accepted_per_step
    from simkit.app.cells import run_workload

    run = {"model": model, "corpus": corpus, "run_id": f"dynk-{corpus}", "config": "dynamic",
           "concurrency": concurrency, "tp": 1, "max_model_len": MAX_MODEL_LEN,
           "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS, "max_num_seqs": MAX_NUM_SEQS,
           "cudagraph_mode": "FULL_AND_PIECEWISE", "gpu": "NVIDIA H200", "force_copy": FORCE_COPY,
           "max_tokens_cap": cap}
    workload = run_workload(reqs, run, "concurrent")
    mean_acc = {k: mean_accepted_per_step(workload, "suffix", k) for k in ks}
    ctx = float((workload.prompt_len + workload.output_len / 2).mean())
    table = BatchSizeTable(ks, mean_acc, ctx, price_fn_for(run, list(ks), "kmax")).table
    return {"model": model, "corpus": corpus, "concurrency": concurrency, "num_requests": len(reqs),
            "ks": list(ks), "graphs": "kmax", "mean_accepted": {str(k): v for k, v in mean_acc.items()},
            "mean_context": ctx, "table": [list(e) for e in table]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="calibrate.dynk_tables", description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--runs", default="32:128", help="comma list of concurrency:num_requests")
    ap.add_argument("--requests-dir", type=Path, default=Path(".gpu/requests"))
    ap.add_argument("--out", type=Path, default=Path(".gpu/dynk"))
    ap.add_argument("--ks", default="4,6,12")
    ap.add_argument("--max-tokens-cap", type=int, default=1024)
    a = ap.parse_args(argv)
    ks = tuple(sorted(int(k) for k in a.ks.split(",")))
    loaded = read_requests(a.requests_dir / f"{a.model}__{a.corpus}.jsonl")
    a.out.mkdir(parents=True, exist_ok=True)
    for item in a.runs.split(","):
        conc, n = (int(x) for x in item.split(":"))
        reqs, _ = select_requests(loaded, n, MAX_MODEL_LEN, max(ks), a.max_tokens_cap)
        doc = tuned_table(a.model, a.corpus, reqs, conc, ks, a.max_tokens_cap)
        path = a.out / table_file_name(a.model, a.corpus, conc, n)
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(path, doc["table"], {k: round(v, 3) for k, v in doc["mean_accepted"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
