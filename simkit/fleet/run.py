"""`simkit fleet`'s library entry: the corpus pool, the traffic, the searches, one result.

The pool is the corpus's real requests (simkit needs their token ids to replay each replica's
stream through the suffix drafter, so the raw traces must be present: ../shared/traces-src or
SIMKIT_TRACES_SRC), outputs cut at max_tokens as the server would stop them; requests the engine
cannot serve (prompt past max_model_len, beyond the whole KV cache, empty output) are left out of
the pool and counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from simkit.app.options import Goals, RunOptions
from simkit.choices import Executor, FleetOrdering
from simkit.errors import InputError
from simkit.fleet.plan import Fleet, check_policies, cost_per_million, search
from simkit.fleet.traffic import Traffic, TrafficSpec, make_traffic


@dataclass(frozen=True)
class PoolRequest:
    """A pool request: prompt and (capped) output token ids."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def load_pool(model: str, corpus: str, *, max_tokens: int, max_model_len: int,
              kv_capacity_tokens: int) -> tuple[list[PoolRequest], list[str], dict[str, int],
                                                str]:
    """(pool, request ids, skip counts, proxy note) of a corpus for the model."""
    from simkit.paths import traces_src_dir
    from traces.corpora import load_corpus

    if traces_src_dir() is None:
        raise InputError("simkit fleet replays each replica's own stream through the suffix "
                         "drafter and needs the raw traces (../shared/traces-src or "
                         "SIMKIT_TRACES_SRC)", field="corpus")
    c = load_corpus(corpus, model)
    pool, ids = [], []
    skipped = {"empty": 0, "prompt_over_max_model_len": 0, "exceeds_kv_capacity": 0}
    for r in c.requests:
        p, o = np.asarray(r.prompt_ids, np.int32), np.asarray(r.output_ids, np.int32)
        if not len(p) or not len(o):
            skipped["empty"] += 1
            continue
        if len(p) >= max_model_len:
            skipped["prompt_over_max_model_len"] += 1
            continue
        o = o[:min(max_tokens, max_model_len - len(p))]
        if len(p) + len(o) > kv_capacity_tokens:
            skipped["exceeds_kv_capacity"] += 1
            continue
        pool.append(PoolRequest(p, o))
        ids.append(r.request_id)
    return pool, ids, {k: v for k, v in skipped.items() if v}, c.proxy_note


def fleet(run: RunOptions | None = None, *, traffic: TrafficSpec,
          policies: str = "round-robin,prefix-affinity,least-outstanding",
          configs: str = "vanilla,suffix", goals: Goals = Goals(), max_replicas: int = 64,
          replicas: int | None = None, gpu_hour_price: float | None = None,
          ordering: FleetOrdering = FleetOrdering.SEQUENTIAL, in_flight: int = 8, executor: Executor = Executor.LOCAL,
          address: str | None = None) -> dict[str, Any]:
    """The fleet document (see simkit.fleet.report for its rendering) of the cell `run` names
    (model, corpus, hardware, TP, calibration, vLLM version, max_tokens, prefix caching; None:
    the defaults) on `run.workers` local processes or Ray replica groups (None: all cores; the
    document does not depend on it). `replicas` fixes n (no search): the figures at that n, met
    or not. `in_flight`: requests in flight for the concurrent ordering."""
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs

    pols = check_policies(policies)
    specs = parse_configs(configs, run.vllm_version)
    for s in specs:
        if s.speculative and s.drafter != "suffix":
            raise InputError(f"{s.name}: the fleet replays arctic-inference's suffix trees only "
                             "(vanilla, suffix, kpad, dynamic on vLLM 0.26/0.33); the "
                             f"{s.drafter} drafter is not modelled in a fleet yet",
                             field="configs")
    from simkit.executors import check_executor
    from simkit.fleet.replica import check_ordering

    ordering, executor = check_ordering(ordering), check_executor(executor)
    if ordering == FleetOrdering.IN_LOOP:
        from simkit.engine.policies import KPolicyName

        for s in specs:
            if s.policy is KPolicyName.TABLE:
                raise InputError(f"{s.name} tunes its K table on an acceptance table; use "
                                 "--ordering sequential or concurrent with it", field="configs")
    traffic.check()
    run = run or RunOptions()
    model, corpus, concurrency = run.model, run.corpus, in_flight
    workers = run.workers or os.cpu_count() or 1
    cost = load_cost_model(model, run.hardware, tp=run.tp, calibration=run.calibration,
                           vllm_version=run.vllm_version)
    eng = run.server(cost)
    pool, ids, skipped, proxy = load_pool(model, corpus, max_tokens=eng.max_tokens,
                                          max_model_len=eng.max_model_len,
                                          kv_capacity_tokens=eng.kv_capacity_tokens)
    tr: Traffic = make_traffic(traffic, pool, ids, corpus=corpus, model=model, skipped=skipped)
    if tr.n < 2:
        raise InputError(f"the traffic has {tr.n} arrival(s); raise --rate or --duration",
                         field="duration")
    fl = Fleet(tr, specs, cost, eng, ordering=ordering, concurrency=concurrency,
               executor=executor, workers=workers, address=address)
    served = float(sum(len(pool[i].output_ids) for i in tr.draws.tolist())) / traffic.duration_s
    rows: list = []
    tried: dict = {}
    from contextlib import nullcontext

    if executor == Executor.RAY:
        from simkit.executors.ray_fleet import session

        ctx = session(address, workers)
    else:
        ctx = nullcontext()
    with ctx:
        _search_all(fl, pols, specs, goals, max_replicas, replicas, gpu_hour_price, served,
                    rows, tried)
    mean_out = float(np.mean([len(pool[i].output_ids) for i in tr.draws.tolist()]))
    return {"fleet": {"model": model, "corpus": corpus, "hardware": cost.hw.name, "tp": cost.tp,
                      "cost_model": cost.describe(), "proxy_note": proxy,
                      "traffic": traffic.as_dict(), "traffic_label": traffic.label,
                      "offered_out_tok_s": served,
                      "mean_output_tokens": mean_out,
                      "goals": {"ttft_ms_p99": goals.ttft_ms_p99,
                                "tpot_ms_p99": goals.tpot_ms_p99},
                      "gpu_hour_price": gpu_hour_price, "ordering": ordering,
                      "concurrency": concurrency if ordering == FleetOrdering.CONCURRENT else None,
                      "max_replicas": max_replicas, "fixed_replicas": replicas,
                      "pool_requests": len(pool), "pool_skipped": skipped,
                      "policies": pols, "configs": [s.name for s in specs]},
            "reuse": tr.summary(), "rows": rows, "evaluated": tried,
            "evaluations": fl.evaluations}


# delivered below this share of the offered output tok/s: the note says the fleet falls behind
KEEPS_UP_SHARE = 0.9


def delivered_figures(point: dict, offered: float, gpu_hour_price: float | None) -> dict:
    """tok/s per GPU and US$ per million output tokens of a fleet point, from the output
    tok/s its replicas delivered in their steady windows (never the traffic's offered load: a
    fleet that falls behind serves less than it is offered), and a note when it fell behind."""
    out_tok_s = float(point["out_tok_s"])
    fig = {"tok_s_per_gpu": out_tok_s / point["gpus"],
           "usd_per_m_tok": cost_per_million(out_tok_s, point["gpus"], gpu_hour_price)}
    if offered > 0 and out_tok_s < KEEPS_UP_SHARE * offered:
        behind = (f"delivered {out_tok_s:,.0f} of the {offered:,.0f} output tok/s offered "
                  f"({out_tok_s / offered:.0%}): the fleet falls behind its traffic")
        fig["note"] = f"{point['note']}; {behind}" if point.get("note") else behind
    return fig


def _search_all(fl: Fleet, pols, specs, goals, max_replicas, replicas, gpu_hour_price, served,
                rows: list, tried: dict) -> None:
    """Fill rows (one per policy x configuration) and tried (the n evaluated for each)."""
    from simkit.fleet.plan import meets

    for pol in pols:
        for s in specs:
            if replicas is not None:
                point, bind, seen = fl.evaluate(pol, replicas)[s.name], "", [replicas]
            else:
                point, bind, seen = search(fl, pol, s.name, goals, max_replicas)
            tried[f"{pol}/{s.name}"] = seen
            if point is None:
                last = fl.evaluate(pol, max_replicas)[s.name]
                rows.append({**last, "meets": False, "replicas": None, "gpus": None,
                             "binding": f"{bind} at {max_replicas} replicas",
                             "tok_s_per_gpu": None, "usd_per_m_tok": None})
                continue
            ok, why = meets(point, goals)
            rows.append({**point, "meets": ok, "binding": bind if ok else why,
                         **delivered_figures(point, served, gpu_hour_price)})
