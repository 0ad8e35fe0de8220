"""Prefix caching against the records: predicted vs recorded scheduled prefill tokens per run.

Each measured run is rebuilt request by request (simkit.validation.requests) and simulated under
its conditions (simkit.validation.run_prediction.predict_run) with its request history's cache contents
at start (`history_prefixes`). The recorder's `num_prefill_tokens` counts, per step, the scheduled
tokens at prompt positions, so its sum over a run is the prompt tokens minus prefix-cache hits
(plus prompt tokens recomputed after a preemption). The comparison is over all steps of the run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simkit.app.cells import run_history
from simkit.block_hash import prompt_block_hashes
from simkit.engine.prefix_cache import history_prefixes
from simkit.validation.measured import DEFAULT_DIR

__all__ = ["check_runs", "history_prefixes", "prefill_check", "summary", "throughput_effect"]


def prefill_check(run: dict[str, Any], steps, reqs: list, *,
                  prefix_caching: bool = True) -> dict[str, Any]:
    """One run: recorded vs predicted scheduled prefill tokens, prompt tokens and hit rate."""
    from simkit.validation.run_prediction import predict_run

    chains = [prompt_block_hashes(r.prompt_ids).tolist() for r in reqs]
    history = run_history(run)
    pred = predict_run(reqs, run, prefix_caching=prefix_caching,
                       cached_prefixes=history_prefixes(chains, history) if prefix_caching else None)
    prompt = int(sum(len(r.prompt_ids) for r in reqs))
    recorded = int(steps["num_prefill_tokens"].sum())
    p = pred.prefix or {}
    predicted = int(p["prefill_tokens"]) if p.get("modelled") else prompt
    return {"run_id": str(run["run_id"]), "history": history.label, "prompt_tokens": prompt,
            "recorded_prefill": recorded, "predicted_prefill": predicted,
            "recorded_hit_rate": 1 - recorded / prompt if prompt else float("nan"),
            "predicted_hit_rate": p.get("hit_rate"),
            "error": predicted / recorded - 1 if recorded else float("nan"),
            "predicted_tok_s": pred.output_tok_s, "measured_tok_s": float(run["output_tok_s"])}


def check_runs(run_ids: list[str] | None = None, *, prefix_caching: bool = True,
               data_dir=None) -> list[dict[str, Any]]:
    """prefill_check over the committed records (all runs, or the named ones), in file order."""
    import pandas as pd

    from simkit.validation.requests import request_pool, run_requests

    base = data_dir or DEFAULT_DIR
    runs = pd.read_parquet(base / "runs.parquet")
    steps = pd.read_parquet(base / "steps.parquet")
    if run_ids is not None:
        missing = sorted(set(run_ids) - set(runs["run_id"]))
        if missing:
            from simkit.errors import InputError

            raise InputError(f"runs not in the records: {', '.join(missing)}",
                             path=str(base / "runs.parquet"), field="run_id")
        runs = runs[runs["run_id"].isin(run_ids)]
    pools: dict[tuple[str, str], list] = {}
    out = []
    for run in runs.to_dict("records"):
        key = (str(run["model"]), str(run["corpus"]))
        if key not in pools:
            pools[key] = request_pool(*key)
        reqs, _ = run_requests(pools[key], run)
        s = steps[steps["run_id"] == run["run_id"]]
        out.append(prefill_check(run, s, reqs, prefix_caching=prefix_caching))
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Worst and mean absolute prefill error, and the share of runs within 2 %."""
    err = np.array([abs(r["error"]) for r in rows], float)
    return {"runs": len(rows), "mean_abs_error": float(err.mean()) if err.size else float("nan"),
            "max_abs_error": float(err.max()) if err.size else float("nan"),
            "within_2pct": float((err <= 0.02).mean()) if err.size else float("nan")}


def throughput_effect(on: list[dict[str, Any]], off: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run: throughput error (predicted / measured - 1) with caching on and off."""
    by_id = {r["run_id"]: r for r in off}
    out = []
    for r in on:
        o = by_id[r["run_id"]]
        m = r["measured_tok_s"]
        out.append({"run_id": r["run_id"], "history": r["history"], "measured_tok_s": m,
                    "error_on": r["predicted_tok_s"] / m - 1, "error_off": o["predicted_tok_s"] / m - 1})
    return out


def main(argv: list[str]) -> None:
    """python -m simkit.validation.prefix [--compare-off] [run_id ...]: the prefill table;
    --compare-off adds the throughput error with caching off beside the one with it on."""
    compare = "--compare-off" in argv
    ids = [a for a in argv if not a.startswith("--")] or None
    rows = check_runs(ids)
    for r in rows:
        hit = r["predicted_hit_rate"]
        print(f"{r['run_id']:58s} {r['history']:12s} prompt {r['prompt_tokens']:8d} "
              f"rec {r['recorded_prefill']:8d} pred {r['predicted_prefill']:8d} "
              f"err {r['error']:+7.2%} hit rec {r['recorded_hit_rate']:6.1%} "
              f"pred {'n/a' if hit is None else format(hit, '6.1%')}")
    print(summary(rows))
    if compare:
        for t in throughput_effect(rows, check_runs(ids, prefix_caching=False)):
            print(f"{t['run_id']:58s} {t['history']:12s} measured {t['measured_tok_s']:8.0f} "
                  f"tok/s error on {t['error_on']:+7.2%} off {t['error_off']:+7.2%}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
