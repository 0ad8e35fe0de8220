"""Hardware: the same model and traffic (closed loop, the study's concurrency) on other GPUs or
TP degrees. Per (hardware, TP) the whole ladder runs with that hardware's cost model and KV
capacity; throughput is reported per replica and per GPU."""

from __future__ import annotations

from pathlib import Path

from simkit.app.options import RunOptions
from simkit.engine.config import WHATIF_CONFIGS, parse_configs
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladder_of, requests_per_run, skip_note, skipped_of, workload_note,
    workload_of)

COLUMNS = ["hardware", "tp", "config", "output_tok_s", "tok_s_per_gpu", "speedup_vs_vanilla",
           "vs_first_hardware", "tpot_ms_p50", "host_frac", "kv_capacity_tokens"]


def hardware(run: RunOptions = RunOptions(model="llama-3.1-70b"), *,
             targets: str = "h100,h200,b200", tps: str | None = None,
             configs: str = WHATIF_CONFIGS, workload: Workload | None = None) -> WhatIfResult:
    """Ladder per (hardware, TP) under the settings `run` (its hardware and TP are the ones
    varied). `targets` is a comma list of catalogue names or JSON paths; `tps` a comma list of
    TP degrees tried on each (default: each hardware's chosen TP)."""
    model, corpus, seeds = run.model, run.corpus, run.seeds
    hws = [h.strip() for h in targets.split(",") if h.strip()]
    if not hws:
        raise InputError("no hardware given", field="targets")
    tp_list: list[int | None] = [None]
    if tps:
        try:
            tp_list = [int(t) for t in tps.split(",") if t.strip()]
        except ValueError:
            raise InputError(f"TP degrees must be integers, got {tps!r}", field="tps") from None
        from simkit.serving_checks import check_tp

        for tp in tp_list:                     # vLLM's refusal, before any work
            check_tp(model, tp, field="tps")
    workload = workload_of(run, workload)
    num_requests = requests_per_run(run.num_requests, workload, run.concurrency)
    specs = parse_configs(configs, run.vllm_version)
    rows, notes, first, failures, ran = [], [], {}, [], []
    setups = [(hw, tp) for hw in hws for tp in tp_list]
    for i, (hw, tp) in enumerate(setups, 1):
        try:
            cost = cost_of(run, hw, tp)
        except InputError as exc:          # e.g. does not fit at this TP: say so, go on
            failures.append(f"{hw} TP{tp or 'auto'}: {exc}")
            continue
        notes.append(cost.describe())
        ran_ladder = ladder_of(run, workload, cost, specs, num_requests=num_requests,
                               phase=f"{hw} TP{cost.tp} (setup {i} of {len(setups)})")
        ran.append((f"{hw} TP{tp}", skipped_of(ran_ladder)))
        ladder = ran_ladder.rows
        for r in ladder:
            first.setdefault(r.config, r.output_tok_s)
            rows.append({"hardware": cost.hw.name, "tp": cost.tp, "config": r.config,
                         "output_tok_s": r.output_tok_s,
                         "tok_s_per_gpu": r.output_tok_s / cost.tp,
                         "speedup_vs_vanilla": r.speedup_vs_vanilla,
                         "vs_first_hardware": r.output_tok_s / first[r.config]
                         if first[r.config] > 0 else None,
                         "tpot_ms_p50": r.tpot_ms_p50, "host_frac": r.host_frac,
                         "kv_capacity_tokens": cost.kv_capacity_tokens})
    notes.append(f"closed loop, concurrency {run.concurrency}, {num_requests} requests, {seeds} "
                 f"seed(s); {workload_note(workload.name, workload.origin)}; "
                 "vs_first_hardware = throughput / the first (hardware, TP) row of that config")
    if workload.proxy_note:
        notes.append(workload.proxy_note)   # "proxy outputs: ..." or "own outputs"
    if skip_note(ran):
        notes.append(skip_note(ran))
    return WhatIfResult("hardware", f"{model} on {', '.join(hws)}"
                        + (f" at TP {tps}" if tps else " (chosen TP)"), COLUMNS, rows,
                        {"model": model, "corpus": corpus, "targets": hws, "tps": tps,
                         "configs": configs, "concurrency": run.concurrency, "seeds": seeds,
                         "num_requests": num_requests}, notes, failures=failures)


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Grouped bars: output tok/s per configuration, one bar per (hardware, TP)."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    configs = list(dict.fromkeys(r["config"] for r in result.rows))
    setups = list(dict.fromkeys((r["hardware"], r["tp"]) for r in result.rows))
    width = 0.8 / max(1, len(setups))
    for j, (hw, tp) in enumerate(setups):
        vals = {r["config"]: r["output_tok_s"] for r in result.rows
                if (r["hardware"], r["tp"]) == (hw, tp)}
        xs = [i + j * width for i in range(len(configs))]
        ax.bar(xs, [vals.get(c, 0) for c in configs], width, label=f"{hw} TP{tp}")
    ax.set_xticks([i + width * (len(setups) - 1) / 2 for i in range(len(configs))], configs)
    ax.set_ylabel("output tok/s per replica")
    ax.set_title(result.question, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
