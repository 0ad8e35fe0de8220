"""Capacity: how many replicas (and GPUs = replicas x TP) serve a traffic target under p99 TTFT
and p99 TPOT goals, per configuration of the ladder.

Method: open-loop Poisson arrivals at rate r per replica (the engine's OpenLoop). A rate
*meets the goals* when, for every seed, p99 TTFT and p99 TPOT over requests arriving in the
steady window are within the goals. The largest such rate is found per configuration by
doubling from `start_rate` until a rate fails (or halving until one passes), then bisecting the
bracket until hi/lo <= 1 + rel_tol; the answer is the lower end (a rate that passed). Each
seed's arrival gaps are the same exponential draws scaled by 1/r (common random numbers), so
the check is close to monotone in r. replicas = ceil(target_rate / r_max).

Steady state needs the arrival span to be long against a request's latency (Little's law: about
r x W requests are in flight). A request meeting the goals lasts at most
W = TTFT goal + mean output x TPOT goal, so a run at rate r replays
N = max(min_requests, span_factor x r x W / 0.9) requests (the engine's open-loop window starts
at the arrival of 10 % of them). A rate needing more than max_requests is not simulated: a short
burst would pass any goal without the server ever filling, so such a rate counts as *not
verified* (binding "request cap") and the answer is the largest rate that could be verified.
The search starts at the request throughput of a closed-loop pilot at concurrency 32. Every
simulation of a search runs on one JobPool (workers forked once), a rate's seeds one after
another until one misses a goal (max_sustainable_rates says why the figures are still those
of every seed).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simkit.engine.config import WHATIF_CONFIGS, EngineConfig, SpecConfig, parse_configs
from simkit.engine.pool import JobPool, results
from simkit.engine.runner import Cell, Job, engine_config, prepare
from simkit.app.options import Goals, RunOptions
from simkit.engine.sim import ClosedLoop, OpenLoop, RunResult, request_order
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, mean_output_tokens, skip_note, workload_note, workload_of)

COLUMNS = ["config", "max_rate_per_replica", "out_tok_s_per_replica", "ttft_ms_p99",
           "tpot_ms_p99", "binding", "replicas", "gpus", "requests", "iterations"]


def _check(runs: list[RunResult], goals: Goals) -> tuple[bool, float, float, str]:
    """(meets, worst p99 TTFT, worst p99 TPOT, binding goal) over the seeds of one rate."""
    ttft = max(r.metrics.ttft_ms_p99 for r in runs)
    tpot = max(r.metrics.tpot_ms_p99 for r in runs)
    bad_ttft = not ttft <= goals.ttft_ms_p99        # NaN (no request in window) fails
    bad_tpot = not tpot <= goals.tpot_ms_p99
    binding = "ttft" if bad_ttft else ("tpot" if bad_tpot else "")
    return not (bad_ttft or bad_tpot), ttft, tpot, binding


def _misses(res: RunResult, goals: Goals) -> str:
    """The goal one seed's run misses, TTFT first ('' when it meets both; NaN misses)."""
    return _check([res], goals)[3]


def run_seeds(pool: JobPool, rates: list[tuple[SpecConfig, float, int, range]], goals: Goals,
              stop_on: tuple[str, ...]) -> list[list[RunResult]]:
    """Per (spec, rate, requests, seeds): the runs of those seeds, in seed order, one seed after
    another and no further once a seed misses a goal in `stop_on` (() runs every seed, all at
    once). The rates advance side by side on the pool: a free worker takes the next seed of
    whichever rate it can."""
    def job(i: int, seed: int) -> Job:
        spec, rate, n, _ = rates[i]
        return Job(spec, seed, OpenLoop(rate=rate), n)

    runs: list[list[RunResult]] = [[] for _ in rates]
    if not stop_on:
        futures = [[pool.submit(job(i, s)) for s in seeds] for i, (_, _, _, seeds) in
                   enumerate(rates)]
        flat = results(pool, [f for fs in futures for f in fs])
        it = iter(flat)
        return [[next(it) for _ in fs] for fs in futures]
    flying = {pool.submit(job(i, seeds[0])): i for i, (_, _, _, seeds) in enumerate(rates)
              if len(seeds)}
    while flying:
        for fut in pool.done(list(flying)):
            i = flying.pop(fut)
            res = fut.result()
            runs[i].append(res)
            seeds = rates[i][3]
            if len(runs[i]) < len(seeds) and _misses(res, goals) not in stop_on:
                flying[pool.submit(job(i, seeds[len(runs[i])]))] = i
    return runs


def requests_for(rate: float, goals: Goals, mean_out: float, *, span_factor: float,
                 min_requests: int, max_requests: int) -> tuple[int, bool]:
    """(requests to replay at `rate`, whether that fits under max_requests)."""
    w = goals.ttft_ms_p99 / 1e3 + mean_out * goals.tpot_ms_p99 / 1e3
    need = max(min_requests, math.ceil(span_factor * rate * w / 0.9))
    return min(need, max_requests), need <= max_requests


def pilot_rates(cell: Cell, specs: list[SpecConfig], *, workers: int | None,
                concurrency: int = 32, pool: JobPool | None = None) -> list[float]:
    """Closed-loop request throughput at `concurrency` per spec: where the search starts
    (on `pool` when given, else on a pool of its own)."""
    from simkit.progress import phase

    jobs = [Job(s, 0, ClosedLoop(concurrency), 4 * concurrency) for s in specs]
    with phase(f"capacity search: closed-loop pilot (C={concurrency}) of {len(specs)} "
               "configuration(s)", len(jobs)):
        if pool is None:
            with JobPool(cell, workers, width=len(jobs)) as own:
                flat = results(own, [own.submit(j) for j in jobs])
        else:
            flat = results(pool, [pool.submit(j) for j in jobs])
    return [r.metrics.request_throughput if r.metrics.request_throughput > 0 else 1.0
            for r in flat]


def max_sustainable_rates(workload: Workload, cost: Any, specs: list[SpecConfig], goals: Goals, *, seeds: int, min_requests: int,
                          max_requests: int, workers: int | None, span_factor: float = 3.0,
                          rel_tol: float = 0.05, max_iter: int = 40,
                          cfg: EngineConfig | None = None,
                          start_rates: list[float] | None = None,
                          early_stop: bool = True) -> list[dict[str, Any]]:
    """Per spec, the largest per-replica Poisson rate meeting the goals (bisection; all specs
    advance together on one pool of workers forked once). `early_stop`: a rate's seeds run one
    after another and stop once a seed misses a goal: the rate then fails whatever the other
    seeds say (worst p99s over seeds only grow, and only a passing rate's figures are printed).
    The binding goal of a failed rate is TTFT when any seed misses it: where a seed missed only
    TPOT, the seeds left are run for the one failed rate whose binding is printed (the lowest),
    after the search, again one after another until one misses TTFT. So every printed figure
    is the one all seeds give."""
    from simkit.progress import phase

    if rel_tol <= 0 or span_factor <= 0 or min_requests < 1 or max_requests < min_requests:
        raise InputError("need rel_tol > 0, span_factor > 0, 1 <= min_requests <= max_requests",
                         field="search")
    cell = Cell(workload, cost, cfg or engine_config(cost))
    prepare(cell, specs)
    mean_out = mean_output_tokens(workload, cell.engine.max_tokens, cell.engine.max_model_len)
    every = range(seeds)
    with JobPool(cell, workers, width=len(specs)) as pool:
        starts = start_rates or pilot_rates(cell, specs, workers=workers, pool=pool)
        state = [{"spec": s, "lo": 0.0, "hi": math.inf, "next": r0, "start": r0, "lo_m": None,
                  "hi_bind": "", "hi_open": None, "it": 0, "done": False}
                 for s, r0 in zip(specs, starts)]
        for st_round in range(1, max_iter + 1):
            live = [st for st in state if not st["done"]]
            if not live:
                break
            sims = []
            for st in live:
                n, fits = requests_for(st["next"], goals, mean_out, span_factor=span_factor,
                                       min_requests=min_requests, max_requests=max_requests)
                st["n_next"] = n
                if fits:
                    sims.append(st)
            with phase(f"capacity search: round {st_round} (at most {max_iter}) of "
                       f"{len(sims)} configuration(s) still searching x "
                       f"{'up to ' if early_stop and seeds > 1 else ''}{seeds} seed(s)",
                       len(sims) * seeds):
                ran = run_seeds(pool, [(st["spec"], st["next"], st["n_next"], every)
                                       for st in sims], goals,
                                ("ttft", "tpot") if early_stop else ())
            runs = {id(st): r for st, r in zip(sims, ran)}
            for st in live:
                open_seeds = None
                if st in sims:
                    ok, ttft, tpot, bind = _check(runs[id(st)], goals)
                    left = range(len(runs[id(st)]), seeds)
                    if not ok and bind == "tpot" and len(left):
                        open_seeds = left          # a later seed may still miss TTFT
                else:
                    ok, ttft, tpot, bind = False, math.nan, math.nan, "request cap"
                r = st["next"]
                st["it"] += 1
                if ok:
                    st["lo"], st["lo_m"] = r, (ttft, tpot, st["n_next"])
                else:
                    st["hi"], st["hi_bind"] = r, bind
                    st["hi_open"] = None if open_seeds is None else (st["n_next"], open_seeds)
                if st["hi"] == math.inf:
                    st["next"] = r * 2.0
                elif st["lo"] == 0.0:
                    st["next"] = r / 2.0
                    if r < st["start"] * 2.0 ** -10:          # fails even at a trickle
                        st["done"] = True
                else:
                    st["next"] = math.sqrt(st["lo"] * st["hi"])
                if st["lo"] > 0 and st["hi"] < math.inf and st["hi"] / st["lo"] <= 1 + rel_tol:
                    st["done"] = True
        _settle_binding(pool, [st for st in state if st["hi_open"] is not None], goals)
    out = []
    for st in state:
        ttft, tpot, n = st["lo_m"] or (math.nan, math.nan, 0)
        out.append({"config": st["spec"].name, "max_rate_per_replica": st["lo"],
                    "ttft_ms_p99": ttft, "tpot_ms_p99": tpot, "requests": n,
                    "failed_rate": st["hi"] if st["hi"] < math.inf else None,
                    "binding": st["hi_bind"] or "none found", "iterations": st["it"],
                    "converged": st["done"] and st["lo"] > 0})
    return out


def _settle_binding(pool: JobPool, open_states: list[dict[str, Any]], goals: Goals) -> None:
    """The binding goal of each state's lowest failed rate, where its seeds so far missed only
    TPOT: its seeds not yet run, one after another until one misses TTFT (then 'ttft')."""
    from simkit.progress import phase

    if not open_states:
        return
    total = sum(len(st["hi_open"][1]) for st in open_states)
    with phase(f"capacity search: the binding goal at the lowest failed rate of "
               f"{len(open_states)} configuration(s), up to {total} more seed run(s)", total):
        ran = run_seeds(pool, [(st["spec"], st["hi"], st["hi_open"][0], st["hi_open"][1])
                               for st in open_states], goals, ("ttft",))
    for st, runs in zip(open_states, ran):
        if any(_misses(r, goals) == "ttft" for r in runs):
            st["hi_bind"] = "ttft"


def capacity(run: RunOptions = RunOptions(), *, target_rate: float | None = None,
             target_tok_s: float | None = None, goals: Goals = Goals(),
             configs: str = WHATIF_CONFIGS, min_requests: int = 128, max_requests: int = 5000,
             span_factor: float = 3.0, rel_tol: float = 0.05, workload: Workload | None = None,
             cost: Any = None) -> WhatIfResult:
    """Replicas and GPUs for a traffic target, per configuration (see the module docstring),
    under the settings `run` (open loop: its concurrency and requests per run do not apply)."""
    model, corpus, seeds, workers = run.model, run.corpus, run.seeds, run.workers
    if (target_rate is None) == (target_tok_s is None):
        raise InputError("give exactly one of a request-rate target and an output tok/s target",
                         field="target")
    if (target_rate or target_tok_s or 0) <= 0:
        raise InputError("target must be > 0", field="target")
    workload = workload_of(run, workload)
    cost = cost or cost_of(run)
    cfg = run.server(cost)
    mean_out = mean_output_tokens(workload, cfg.max_tokens, cfg.max_model_len)
    rate = target_rate if target_rate is not None else target_tok_s / mean_out
    rows = max_sustainable_rates(workload, cost, parse_configs(configs, run.vllm_version), goals, seeds=seeds,
                                 min_requests=min_requests, max_requests=max_requests,
                                 span_factor=span_factor, workers=workers, rel_tol=rel_tol,
                                 cfg=cfg)
    for r in rows:
        r["out_tok_s_per_replica"] = r["max_rate_per_replica"] * mean_out
        if r["max_rate_per_replica"] > 0:
            r["replicas"] = math.ceil(rate / r["max_rate_per_replica"] - 1e-9)
            r["gpus"] = r["replicas"] * cost.tp
        else:
            r["replicas"] = r["gpus"] = None
    target = (f"{target_rate:g} req/s" if target_rate is not None else
              f"{target_tok_s:g} output tok/s (= {rate:.3g} req/s at {mean_out:.0f} tokens/request)")
    notes = [cost.describe(),
             workload_note(workload.name, workload.origin) + "; "
             f"mean output {mean_out:.0f} tokens/request",
             f"goals: p99 TTFT <= {goals.ttft_ms_p99:g} ms, p99 TPOT <= {goals.tpot_ms_p99:g} ms "
             f"(worst p99 over {seeds} seed(s) of Poisson arrivals)",
             f"search: from the closed-loop (C=32) request throughput, doubling/halving, then "
             f"bisection to hi/lo <= {1 + rel_tol:g}; max rate = the highest rate that met the "
             "goals; binding = the goal the next higher rate missed",
             f"requests per run = max({min_requests}, {span_factor:g} x rate x (TTFT goal + "
             f"mean output x TPOT goal) / 0.9); rates needing more than {max_requests} are not "
             "simulated (binding 'request cap': raise --max-requests to verify higher rates)"]
    if workload.proxy_note:
        notes.append(workload.proxy_note)   # "proxy outputs: ..." or "own outputs"
    skipped = request_order(workload, cfg, 1, 0)[1]     # every run of the search skips these
    if skip_note([("every rate", skipped)]):
        notes.append(skip_note([("every rate", skipped)]))
    for r in rows:
        if r["binding"] == "request cap":
            notes.append(f"{r['config']}: limited by the request cap, not by the goals: the "
                         "true capacity is at least this (raise --max-requests)")
        if not r["converged"]:
            notes.append(f"{r['config']}: no rate met the goals (down to 1/1024 of the "
                         "pilot's rate) or the search did not converge")
    return WhatIfResult("capacity", f"replicas for {target} on {cost.hw.name} TP{cost.tp}",
                        COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": cost.hw.name, "tp": cost.tp,
                         "target_rate": rate, "target_tok_s": target_tok_s,
                         "ttft_ms_p99_goal": goals.ttft_ms_p99, "tpot_ms_p99_goal": goals.tpot_ms_p99,
                         "configs": configs, "seeds": seeds, "min_requests": min_requests,
                         "max_requests": max_requests, "span_factor": span_factor,
                         "mean_output_tokens": mean_out}, notes)


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Bars: GPUs needed per configuration, annotated with the per-replica max rate."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = [r["config"] for r in result.rows]
    gpus = [r["gpus"] or 0 for r in result.rows]
    bars = ax.bar(names, gpus, color="#4C72B0")
    for b, r in zip(bars, result.rows):
        ax.annotate(f"{r['max_rate_per_replica']:.2g} req/s/replica",
                    (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    fontsize=7)
    ax.set_ylabel("GPUs needed")
    ax.set_title(result.question, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
