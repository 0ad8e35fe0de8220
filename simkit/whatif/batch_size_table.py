"""Batch-size K table (vLLM 0.34's num_speculative_tokens_per_batch_size) derived from the
traffic: simulate a K set at each load level, keep the best K per level, join the levels into
ranges (simkit.whatif.ktable), then simulate that table at every level (with vLLM's one-step
lag and its graph tiers) against the best static K per level and the one static K a user would
otherwise deploy for the whole range.

The one static K is the K whose throughput, relative to each level's best, has the highest
geometric mean over the levels (every level weighs the same).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simkit.app.options import RunOptions
from simkit.catalog.vllm_versions import get_vllm_version
from simkit.engine.config import parse_configs
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import WhatIfResult, cost_of, ladder_of, workload_note, workload_of
from simkit.whatif.ktable import best_k_per_level, format_table, k_at, table_from_choices

TABLE_VERSION = "0.34"          # the vLLM of num_speculative_tokens_per_batch_size
COLUMNS = ["level", "best_k", "best_tok_s", "table_k", "table_tok_s", "table_vs_best_k",
           "static_k", "static_tok_s", "table_vs_static"]


def _ints(text: str, option: str, low: int) -> list[int]:
    try:
        vals = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise InputError(f"expected integers, got {text!r}", field=option) from None
    if not vals or vals[0] < low:
        raise InputError(f"values must be >= {low}, got {text!r}", field=option)
    return vals


def config_text(ks: list[int]) -> str:
    """The config list of a K set: K 0 is vanilla, the others suffix:K (exactly K slots)."""
    spec = [f"suffix:{k}" for k in ks if k > 0]
    return ",".join((["vanilla"] if 0 in ks else []) + spec)


def name_of_k(specs, ks: list[int]) -> dict[int, str]:
    """K -> the row label of its config (vanilla for 0)."""
    return {k: next(s.name for s in specs if (s.k if s.speculative else 0) == k) for k in ks}


def static_over_range(levels: list[int], tok_s: dict[int, list[float]]) -> tuple[int, float]:
    """(K, geometric mean of its tok/s over each level's best): the one K for the whole range."""
    best = [max(row[i] for row in tok_s.values()) for i in range(len(levels))]

    def score(k: int) -> float:
        return math.exp(sum(math.log(tok_s[k][i] / best[i]) for i in range(len(levels)))
                        / len(levels))

    k = min(tok_s, key=lambda kk: (-score(kk), kk))
    return k, score(k)


def batch_size_table(run: RunOptions = RunOptions(), *, levels: str = "8,32,64,128",
                     ks: str = "0,2,4,8,12,16", min_requests: int = 128,
                     workload: Workload | None = None) -> WhatIfResult:
    """The K set at each level (closed loop, max(min_requests, 4 x level) requests, or the run's
    --num-requests), the derived table, and the table simulated at every level, on vLLM 0.34
    unless `run` names another version (refused: only 0.34 has the table)."""
    run = run.but(vllm_version=run.vllm_version or TABLE_VERSION)
    version = get_vllm_version(run.vllm_version)
    if version.batch_size_table:
        raise InputError(f"a batch-size K table is not available on {version.label}: "
                         f"{version.batch_size_table}", field="vllm-version")
    cs = _ints(levels, "levels", 1)
    kset = _ints(ks, "ks", 0)
    if len(kset) < 2:
        raise InputError("give at least two K to choose from (0 = no speculation)", field="ks")
    if kset[-1] > 64:
        raise InputError("K must be in 0..64", field="ks")
    specs = parse_configs(config_text(kset), version.key)
    workload = workload_of(run, workload)
    cost = cost_of(run)
    server = run.server(cost)
    if cs[-1] > server.max_num_seqs:
        raise InputError(f"level {cs[-1]} is above --max-num-seqs {server.max_num_seqs}",
                         field="levels")
    label = name_of_k(specs, kset)
    tok_s: dict[int, list[float]] = {k: [] for k in kset}
    tpot: dict[int, list[float]] = {k: [] for k in kset}
    nreq: dict[int, int] = {}
    unsteady: list[str] = []
    for i, c in enumerate(cs, 1):
        n = run.num_requests or max(min_requests, 4 * c)
        nreq[c] = n
        lad = ladder_of(run, workload, cost, specs, server=server, num_requests=n, concurrency=c,
                        phase=f"static K at batch size {c} (level {i} of {len(cs)})")
        if lad.unavailable:                  # the same at every level: stop at the first
            raise InputError("cannot derive a table: " + "; ".join(
                f"{n}: {why}" for n, why in sorted(lad.unavailable.items())), field="ks")
        by = {r.config: r for r in lad.rows}
        unsteady += [f"{r.config} at {c}" for r in lad.rows if not r.steady_window]
        for k in kset:
            r = by.get(label[k])
            tok_s[k].append(r.output_tok_s if r else float("nan"))
            tpot[k].append(r.tpot_ms_p50 if r else float("nan"))
    choices = best_k_per_level(cs, tok_s)
    table = table_from_choices(choices, server.max_num_seqs)
    static_k, static_score = static_over_range(cs, tok_s)
    table_tok: list[float] = []
    table_cfg = None
    if max(k for _, _, k in table) > 0:
        text = "ktable:" + "/".join(f"{a}-{b}={k}" for a, b, k in table)
        table_cfg = parse_configs(text, version.key)[0]
        for i, c in enumerate(cs, 1):
            lad = ladder_of(run, workload, cost, [table_cfg], server=server,
                            num_requests=nreq[c], concurrency=c,
                            phase=f"the table at batch size {c} (level {i} of {len(cs)})")
            table_tok.append(lad.rows[0].output_tok_s)
            unsteady += [f"the table at {c}" for r in lad.rows if not r.steady_window]
    else:                                    # every level's best is no speculation
        table_tok = list(tok_s[0])
    rows = []
    for i, (c, ch) in enumerate(zip(cs, choices)):
        rows.append({"level": c, "best_k": ch.k, "best_tok_s": ch.tok_s,
                     "table_k": k_at(table, c), "table_tok_s": table_tok[i],
                     "table_vs_best_k": table_tok[i] / ch.tok_s,
                     "static_k": static_k, "static_tok_s": tok_s[static_k][i],
                     "table_vs_static": table_tok[i] / tok_s[static_k][i]})
    gm_table = math.exp(sum(math.log(r["table_tok_s"] / r["best_tok_s"]) for r in rows) / len(rows))
    notes = _notes(run, cost, workload, cs, nreq, choices, table, static_k, static_score,
                   gm_table, kset, version)
    if unsteady:
        notes.append("no steady window (start-up and drain counted), so these figures are not "
                     f"steady-state ones: {', '.join(unsteady)}; raise "
                     "--min-requests (or --num-requests)")
    from simkit.report.deploy import serve_args, table_settings

    settings = table_settings(table)
    return WhatIfResult(
        "ktable", f"a K per batch-size range for {run.model} on {cost.hw.name} TP{cost.tp}, "
        f"vLLM {version.key}, corpus {run.corpus}", COLUMNS, rows,
        {"model": run.model, "corpus": run.corpus, "hardware": cost.hw.name, "tp": cost.tp,
         "vllm_version": version.key, "levels": cs, "ks": kset, "seeds": run.seeds,
         "num_requests": nreq},
        notes, {"tok_s": {str(k): v for k, v in tok_s.items()},
                "tpot_ms_p50": {str(k): v for k, v in tpot.items()},
                "table": [list(r) for r in table], "table_tok_s": table_tok,
                "table_config": table_cfg.name if table_cfg else "vanilla",
                "static_k": static_k, "serve_args": serve_args(settings)})


def _notes(run, cost, workload, cs, nreq, choices, table, static_k, static_score, gm_table,
           kset, version) -> list[str]:
    from simkit.report.deploy import table_settings
    from simkit.report.settings import settings_text

    counts = sorted(set(nreq.values()))
    notes = [cost.describe(),
             f"closed loop at each level (the level = the batch size a step schedules once every "
             f"client is in); {counts[0] if len(counts) == 1 else f'{counts[0]}-{counts[-1]}'} "
             f"requests per level and {run.seeds} seed(s): kept small for run time, so the "
             f"choice between Ks a few % apart is not firm (more: --num-requests, --seeds); "
             + workload_note(workload.name, workload.origin),
             f"K set {','.join(map(str, kset))} (0 = no speculation); best K per level: "
             + ", ".join(f"{ch.level}: K {ch.k}" + (f" (+{ch.margin:.1%} over K {ch.runner_up_k})"
                                                      if ch.runner_up_k is not None else "")
                         for ch in choices),
             f"table (ranges joined at the geometric mean of two levels whose best K differs; "
             f"batch sizes between levels are not simulated): {format_table(table)}",
             f"the table simulated with vLLM's rules (K from the previous step's batch size, "
             f"graphs per K tier): {gm_table - 1:+.1%} against the best K of each level "
             f"(geometric mean over the levels)",
             f"one static K for the whole range: K {static_k} ({static_score - 1:+.1%} against "
             f"the best K of each level); the table's gain over it is its row's table vs static",
             f"settings of the table: {settings_text(table_settings(table), breakable=True)}"]
    stop = [ch.level for ch in choices if ch.k == 0]
    if stop:
        notes.append(f"speculation does not pay at level(s) {', '.join(map(str, stop))} (no "
                     f"K of the set beats vanilla there)")
    else:
        notes.append(f"speculation pays at every level simulated (up to {cs[-1]})")
    if version.calibration_note:
        notes.append(f"every figure rests on a calibration {version.calibration_note}: rank "
                     "Ks within its unmeasured error only after measuring them on your GPU")
    return notes


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Output tok/s vs level per K, the derived table's line on top."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = result.params["levels"]
    for k, ys in result.extra["tok_s"].items():
        ax.plot(xs, ys, marker="o", ms=3, lw=1, alpha=0.8,
                label="vanilla" if k == "0" else f"K={k}")
    ax.plot(xs, result.extra["table_tok_s"], color="k", lw=2.2, marker="s", ms=4,
            label=f"table {result.extra['table_config']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (closed-loop clients = batch size)")
    ax.set_ylabel("output tok/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
