"""History: throughput of every configuration against the share P of requests the server already
served (repeat:P, P = 0 is a fresh server, 1 is hot), with the warm stream beside it; the share
from which speculative decoding starts to pay, and the best K at each share."""

from __future__ import annotations

import math
from pathlib import Path

from simkit.catalog.vllm_versions import get_vllm_version
from simkit.engine.config import FIXED_K_CONFIGS, parse_configs
from simkit.app.options import RunOptions
from simkit.app.verdict import best_kpad, fastest
from simkit.errors import InputError
from simkit.history import WARM, parse_history
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladder_of, requests_per_run, skip_note, skipped_of, workload_note,
    workload_of)

COLUMNS = ["history", "repeat_share", "config", "output_tok_s", "speedup_vs_vanilla",
           "mean_accepted", "tokens_per_step", "is_best"]
DEFAULT_SHARES = "0,0.1,0.25,0.5,0.75,1"


def parse_shares(text: str) -> list[float]:
    """Sorted unique shares in [0, 1]; InputError otherwise."""
    try:
        vals = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"shares must be numbers in [0, 1], got {text!r}", field="shares") from None
    if not vals or any(not math.isfinite(v) or not 0.0 <= v <= 1.0 for v in vals):
        raise InputError(f"shares must be numbers in [0, 1], got {text!r}", field="shares")
    return vals


def crossover(points: list[tuple[float, float]]) -> float | None:
    """The smallest share P at which the best speculative config's speedup reaches 1, linearly
    interpolated between measured shares: 0.0 when it pays at P=0, None when it never pays."""
    found = crossover_between(points)
    if found is None:
        return None
    (p0, s0), (p1, s1) = found
    return p0 if p0 == p1 else p0 + (1.0 - s0) * (p1 - p0) / (s1 - s0)


def crossover_between(points: list[tuple[float, float]]):
    """The two measured (share, speedup) points the break-even lies between (the same point
    twice when it pays at the first share), or None when it never pays."""
    pts = sorted(points)
    if not pts:
        return None
    if pts[0][1] >= 1.0:
        return pts[0], pts[0]
    for a, b in zip(pts, pts[1:]):
        if a[1] < 1.0 <= b[1]:
            return a, b
    return None


def crossover_note(points: list[tuple[float, float]], last: float) -> str:
    """Where speculation starts to pay, said as measured: a share between two measured ones is
    not measured, and two shares in all locate it no better than 'between them'."""
    head = "speculation starts to pay (best speculative config >= vanilla) "
    found = crossover_between(points)
    if found is None:
        return head + f"at no measured share (up to {last:g})"
    (p0, _), (p1, _) = found
    if p0 == p1:
        return head + f"at P = {p0:g} already"
    if len(points) < 3:
        return head + (f"somewhere between P = {p0:g} and {p1:g}, the only shares measured "
                       "(give more --shares to locate it)")
    return head + (f"between the measured shares P = {p0:g} and {p1:g}: about "
                   f"{crossover(points):.2f} on a straight line between them (not measured "
                   "there)")


def history(run: RunOptions = RunOptions(), *, shares: str = DEFAULT_SHARES,
            configs: str = FIXED_K_CONFIGS, warm: bool = True) -> WhatIfResult:
    """The ladder under repeat:P for each P (and warm when `warm`) with the other settings of
    `run` (its history is the one varied); every run replays at least the whole sample."""
    model, corpus, concurrency, seeds = run.model, run.corpus, run.concurrency, run.seeds

    ps = parse_shares(shares)
    specs = parse_configs(configs, run.vllm_version)
    if all(s.speculative for s in specs):
        raise InputError("the history what-if compares against vanilla: include it",
                         field="configs")
    cost = cost_of(run)
    exact_k = get_vllm_version(run.vllm_version).method("suffix").slots == "exact-k"
    histories = [(parse_history(f"repeat:{p:g}"), p) for p in ps] + \
        ([(WARM, None)] if warm else [])
    rows, best_by, origin, ran = [], {}, "", []
    for i, (hist, p) in enumerate(histories, 1):
        label = hist.label
        workload = workload_of(run.but(history=hist))
        origin = origin or (workload.origin or "")
        n = max(requests_per_run(run.num_requests, workload, concurrency), workload.num_requests)
        ran_ladder = ladder_of(run, workload, cost, specs, num_requests=n,
                               phase=f"history {label} ({i} of {len(histories)})")
        ran.append((label, skipped_of(ran_ladder)))
        ladder = ran_ladder.rows
        top = fastest(ladder)
        best_spec = fastest([r for r in ladder if r.config != "vanilla"])
        kpad = best_kpad(ladder, exact_k)
        best_by[label] = {
            "repeat_share": p, "best_config": top.config,
            "best_speculative": best_spec.config if best_spec else None,
            "best_speculative_speedup": best_spec.speedup_vs_vanilla if best_spec else None,
            "best_k": kpad.k if kpad else None}
        for r in ladder:
            rows.append({"history": label, "repeat_share": p, "config": r.config,
                         "output_tok_s": r.output_tok_s,
                         "speedup_vs_vanilla": r.speedup_vs_vanilla,
                         "mean_accepted": r.mean_accepted,
                         "tokens_per_step": r.tokens_per_step,
                         "is_best": r.config == top.config})
    points = [(v["repeat_share"], v["best_speculative_speedup"]) for v in best_by.values()
              if v["repeat_share"] is not None and v["best_speculative_speedup"]]
    between = crossover_between(points)
    # a break-even between only two measured shares is not placed at a share (nor plotted)
    cross = crossover(points) if len(points) >= 3 or (between and between[0] == between[1]) \
        else None
    notes = [cost.describe(),
             f"closed loop, concurrency {concurrency}, {seeds} seed(s); repeat:P = a fresh "
             "server that already served the share P of these requests once (identical greedy "
             "outputs; which ones: simkit.history.repeat_indices); P = 0 is cold, 1 is hot; warm "
             "= the whole corpus served before",
             crossover_note(points, ps[-1]),
             "best K per history: " + ", ".join(f"{h} K={v['best_k']}" for h, v in best_by.items()),
             workload_note(f"{model}/{corpus}", origin) + "; a repeated request's "
             "prompt is also in the prefix cache (vanilla gains through that alone)"]
    if skip_note(ran):
        notes.append(skip_note(ran))
    return WhatIfResult("history", f"throughput vs request history for {model}/{corpus} on "
                        f"{cost.hw.name} TP{cost.tp}", COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": cost.hw.name,
                         "tp": cost.tp, "shares": ps, "configs": configs,
                         "concurrency": concurrency, "seeds": seeds,
                         "num_requests": run.num_requests, "warm": warm}, notes,
                        {"crossover_share": cross,
                         "crossover_between": [between[0][0], between[1][0]] if between
                         else None, "per_history": best_by})


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Left: tok/s against P per config (warm as dashed levels); right: best K against P."""
    plt = plt_agg()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    rep = [r for r in result.rows if r["repeat_share"] is not None]
    for i, name in enumerate(dict.fromkeys(r["config"] for r in rep)):
        pts = [r for r in rep if r["config"] == name]
        line, = a1.plot([r["repeat_share"] for r in pts], [r["output_tok_s"] for r in pts],
                        marker="o", ms=3, label=name)
        warm = [r for r in result.rows if r["history"] == "warm" and r["config"] == name]
        if warm:
            a1.axhline(warm[0]["output_tok_s"], color=line.get_color(), ls=":", lw=0.8)
    cross = result.extra.get("crossover_share")
    if cross is not None:
        a1.axvline(cross, color="k", lw=0.8, ls="--")
        a1.annotate(f"pays from P={cross:.2f}", (cross, a1.get_ylim()[1]), xytext=(3, -12),
                    textcoords="offset points", fontsize=8)
    a1.set_xlabel("share P of requests already served (repeat:P)")
    a1.set_ylabel("output tok/s (dotted: warm)")
    a1.grid(alpha=0.3)
    a1.legend(fontsize=7)
    per = [(v["repeat_share"], v["best_k"]) for v in result.extra["per_history"].values()
           if v["repeat_share"] is not None and v["best_k"] is not None]
    if per:
        a2.step([p for p, _ in per], [k for _, k in per], where="post", marker="o", ms=3)
    a2.set_xlabel("share P")
    a2.set_ylabel("best K (K-pad)")
    a2.grid(alpha=0.3)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
