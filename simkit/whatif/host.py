"""Host: how throughput moves with the host CPU's speed (a factor on the hardware's host_speed;
2.0 = host work takes half the time). A configuration is *host-bound* when its throughput
elasticity to host speed between factors 1 and 2 (d log throughput / d log speed) is at least
HOST_BOUND_ELASTICITY; the share of step time the device waits for the host is printed beside."""

from __future__ import annotations

import math
from pathlib import Path

from simkit.costmodel import CostModel
from simkit.app.options import RunOptions
from simkit.engine.config import WHATIF_CONFIGS, parse_configs
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladder_of, requests_per_run, skip_note, skipped_of, workload_note,
    workload_of)

HOST_BOUND_ELASTICITY = 0.25   # our threshold: a 2x faster host gives >= +19 % throughput

COLUMNS = ["config", "host_factor", "output_tok_s", "vs_factor_1", "speedup_vs_vanilla",
           "host_frac"]


def with_host_factor(cost: CostModel, factor: float) -> CostModel:
    """The same cost model on a host `factor` times the hardware's host speed."""
    if not factor > 0:
        raise InputError(f"host factor must be > 0, got {factor}", field="host_factor")
    label = cost.label if factor == 1 else f"{cost.label}, host x{factor:g}"
    return CostModel(cost.model, cost.hw, cost.tp, cost.coefs, label, cost.kv_capacity_tokens,
                     cost.tp_chosen, host_speed=cost.host_speed * factor,
                     vllm_version=cost.vllm_version)


def elasticity(t1: float, t2: float, f1: float, f2: float) -> float:
    """d log throughput / d log host speed between two factors."""
    if t1 <= 0 or t2 <= 0:
        return float("nan")
    return math.log(t2 / t1) / math.log(f2 / f1)


def host(run: RunOptions = RunOptions(hardware="b200"), *,
         factors: str = "0.5,0.75,1,1.5,2,4", configs: str = WHATIF_CONFIGS,
         workload: Workload | None = None) -> WhatIfResult:
    """Ladder per host factor under the settings `run`; the summary says which configurations
    are host-bound."""
    model, corpus, concurrency, seeds = run.model, run.corpus, run.concurrency, run.seeds
    try:
        given = [float(f) for f in factors.split(",") if f.strip()]
    except ValueError:
        raise InputError(f"factors must be numbers, got {factors!r}", field="factors") from None
    from simkit.checks import positive_rate

    for f in given:              # nan or inf used to fail only after the other factors ran
        positive_rate(f, "factors")
    fs = sorted(set(given) | {1.0, 2.0})
    workload = workload_of(run, workload)
    num_requests = requests_per_run(run.num_requests, workload, concurrency)
    base = cost_of(run)
    specs = parse_configs(configs, run.vllm_version)
    rows, ran = [], []
    by: dict[tuple[str, float], float] = {}
    frac: dict[tuple[str, float], float] = {}
    for i, f in enumerate(fs, 1):
        cost = with_host_factor(base, f)
        ran_ladder = ladder_of(run, workload, cost, specs, num_requests=num_requests,
                               phase=f"host x{f:g} (factor {i} of {len(fs)})")
        ran.append((f"host x{f:g}", skipped_of(ran_ladder)))
        ladder = ran_ladder.rows
        for r in ladder:
            by[(r.config, f)] = r.output_tok_s
            frac[(r.config, f)] = r.host_frac
            rows.append({"config": r.config, "host_factor": f, "output_tok_s": r.output_tok_s,
                         "speedup_vs_vanilla": r.speedup_vs_vanilla, "host_frac": r.host_frac})
    for row in rows:
        one = by.get((row["config"], 1.0))
        row["vs_factor_1"] = row["output_tok_s"] / one if one else None
    summary = []
    for name in dict.fromkeys(r["config"] for r in rows):
        e = elasticity(by[(name, 1.0)], by[(name, 2.0)], 1.0, 2.0)
        summary.append({"config": name, "elasticity_1_to_2": e,
                        "host_frac_at_1": frac[(name, 1.0)],
                        "host_bound": bool(e >= HOST_BOUND_ELASTICITY)})
    notes = [base.describe(),
             f"host factor multiplies the hardware's host_speed ({base.host_speed:g}); host "
             "coefficients are divided by it (docs/costmodel.md)",
             f"host-bound = throughput elasticity to host speed between x1 and x2 >= "
             f"{HOST_BOUND_ELASTICITY} (our threshold)",
             f"closed loop, concurrency {concurrency}, {num_requests} requests, {seeds} seed(s); "
             + workload_note(workload.name, workload.origin)]
    notes += [f"{s['config']}: elasticity {s['elasticity_1_to_2']:.2f}, host share "
              f"{s['host_frac_at_1']:.0%} -> {'HOST-BOUND' if s['host_bound'] else 'device-bound'}"
              for s in summary]
    if skip_note(ran):
        notes.append(skip_note(ran))
    return WhatIfResult("host", f"host-CPU speed sweep for {model} on {base.hw.name} TP{base.tp}",
                        COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": base.hw.name,
                         "tp": base.tp, "factors": fs, "configs": configs,
                         "concurrency": concurrency, "seeds": seeds,
                         "num_requests": num_requests}, notes, {"summary": summary})


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Throughput against host factor (log x), one line per configuration."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name in dict.fromkeys(r["config"] for r in result.rows):
        pts = [(r["host_factor"], r["output_tok_s"]) for r in result.rows if r["config"] == name]
        ax.plot(*zip(*pts), marker="o", ms=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("host speed factor (x the hardware's host)")
    ax.set_ylabel("output tok/s")
    ax.set_title(result.question, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
