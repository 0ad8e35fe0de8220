"""Open-loop simulation of replicas behind a router: one SimPy environment, one engine loop per
replica (simkit.engine's Scheduler, PrefixCache and Recorder, unchanged), one arrival process.

Why not simkit.engine.sim.simulate: a fleet needs (a) several engines sharing one clock when the
router reads their load (least-outstanding-requests) and (b) every request's latencies, to take
the fleet-wide p99 over all replicas' requests (RunMetrics has only each run's own percentiles).
A replica alone here is exactly `simulate(..., load=OpenLoop(timestamps=...), shuffle=False)`:
the same engine loop and arrival code, tested equal figure for figure (tests/integration/test_fleet.py).

`run_replica`: one replica, a fixed stream (load-independent routing: each replica simulated on
its own, so groups of replicas can run anywhere). `run_joint`: N replicas and a load-aware router
choosing at each arrival the replica with the fewest outstanding (queued or running) requests,
ties to the lowest index. Both run on the engine's compiled loop where it takes the run
(`compiled_replica`; `compiled_joint`, its joint mode: simkit.engine.fast.joint); the SimPy
loops here stay their reference (tests/unit/test_fast_engine.py, test_fast_joint.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import simpy

from simkit.engine.config import EngineConfig, SpecConfig
from simkit.engine.metrics import Recorder, RunMetrics, summarize_open
from simkit.engine.prefix_cache import PrefixCache
from simkit.engine.scheduler import Req, Scheduler
from simkit.engine.workload import Workload


@dataclass
class ReplicaRun:
    """One replica's run: its summary metrics, per-request latencies inside its steady window
    (TTFT ms; TPOT ms of requests with > 1 output token), the prefix-cache counts, and which
    workload requests it served, in arrival order."""

    metrics: RunMetrics
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    served: list[int]
    prefix: dict
    accepted: int                   # accepted drafts over the whole run
    decode_steps: int               # decode request-steps over the whole run


class _Engine:
    """One replica: scheduler, block pool, recorder and the engine-loop process."""

    def __init__(self, env, workload: Workload, cost, cfg: EngineConfig, spec: SpecConfig):
        self.env, self.cost = env, cost
        self.chains = workload.hash_chains() if cfg.prefix_caching else None
        self.pc = PrefixCache(cfg.num_blocks) if self.chains is not None else None
        self.sched = Scheduler(cfg, spec, workload, cost, self.pc)
        self.rec = Recorder()
        self.wake: simpy.Event | None = None
        self.outstanding = 0
        self.served: list[int] = []
        self.closed = False
        self.prefill = 0
        self.offsets = workload.offsets()
        self.plen = workload.prompt_len.tolist()
        self.olen = np.minimum(np.minimum(workload.output_len, cfg.max_tokens),
                               cfg.max_model_len - workload.prompt_len).tolist()

    def submit(self, idx: int) -> None:
        req = Req(len(self.served), idx, self.plen[idx], self.olen[idx], self.offsets[idx],
                  self.env.now)
        if self.chains is not None:
            req.keys = self.chains[idx]
        self.served.append(idx)
        self.outstanding += 1
        self.sched.add(req)
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    def _finish(self, req: Req, now: float) -> None:
        self.rec.finish(req, now)
        self.outstanding -= 1

    def loop(self):
        sched, cm, env = self.sched, self.cost, self.env
        while True:
            if not sched.has_work():
                if self.closed:
                    return
                self.wake = env.event()
                yield self.wake
                continue
            plan = sched.schedule()
            cost = cm.step_cost(plan.desc)
            yield env.timeout(cost.step_s)
            outcome = sched.update(plan, env.now, self.rec.itl, self.rec.itl_time, self._finish)
            self.rec.step(env.now, cost, plan.desc, outcome, plan.k_ran, sched.kv_used_frac())
            self.prefill += plan.desc.num_prefill_tokens

    def result(self, times: list[float]) -> ReplicaRun:
        """Summary over the replica's own open-loop window (10 % of its arrivals -> the last)."""
        window = (times[len(times) // 10], times[-1]) if len(times) > 1 else None
        m = summarize_open(self.rec, window, self.sched.preemptions)
        s = self.sched
        prefix = {"modelled": self.pc is not None}
        if self.pc is not None:
            prefix.update(hit_rate=s.hit_tokens / s.query_tokens if s.query_tokens else 0.0,
                          hit_tokens=s.hit_tokens, prompt_tokens=s.query_tokens,
                          prefill_tokens=self.prefill, evicted_blocks=self.pc.evicted)
        return _replica_run(m, self.rec, list(self.served), prefix)


def _replica_run(m: RunMetrics, rec: Recorder, served: list[int], prefix: dict) -> ReplicaRun:
    """A replica's ReplicaRun from its metrics and Recorder: the latencies of the requests that
    arrived inside its window."""
    arr, first = np.asarray(rec.req_arrival), np.asarray(rec.req_first)
    done, out = np.asarray(rec.req_done), np.asarray(rec.req_out, np.int64)
    # the window's requests whenever there is a window (an overloaded one included: its
    # latencies are those of the requests that arrived in it); the whole run otherwise
    sel = ((arr >= m.window_start_s) & (arr <= m.window_end_s) if m.window_kind != "full-run"
           else np.ones(arr.size, bool))
    multi = sel & (out > 1)
    return ReplicaRun(m, (first - arr)[sel] * 1e3, (done - first)[multi] / (out[multi] - 1) * 1e3,
                      served, prefix, int(np.sum(rec.accepted)), int(np.sum(rec.decodes)))


def usable(workload: Workload, cfg: EngineConfig) -> np.ndarray:
    """Requests the engine can serve (as simkit.engine.sim.request_order skips: no room for one
    output token, empty output, prompt + output beyond the whole KV cache)."""
    plen, olen = workload.prompt_len, workload.output_len
    out_eff = np.minimum(np.minimum(olen, cfg.max_tokens), cfg.max_model_len - plen)
    ok = (plen < cfg.max_model_len) & (olen > 0)
    return ok & ~(plen + out_eff > cfg.kv_capacity_tokens)


def run_replica(workload: Workload, cost, cfg: EngineConfig, spec: SpecConfig,
                times: Sequence[float]) -> ReplicaRun:
    """One replica serving every request of `workload` in order, request i arriving at times[i]
    (on the engine's compiled loop where it takes the run: the same figures, faster)."""
    compiled = compiled_replica(workload, cost, cfg, spec, times)
    if compiled is not None:
        res, rec = compiled
        prefix = {"modelled": res.prefix is not None and res.prefix["modelled"]}
        if prefix["modelled"]:
            prefix.update({k: res.prefix[k] for k in ("hit_rate", "hit_tokens", "prompt_tokens",
                                                      "prefill_tokens", "evicted_blocks")})
        return _replica_run(res.metrics, rec, list(range(workload.num_requests)), prefix)
    env = simpy.Environment()
    eng = _Engine(env, workload, cost, cfg, spec)
    times = [float(t) for t in times]

    def arrivals():
        for i, t in enumerate(times):
            if t > env.now:
                yield env.timeout(t - env.now)
            eng.submit(i)
        eng.closed = True
        if eng.wake is not None and not eng.wake.triggered:
            eng.wake.succeed()

    env.process(arrivals())
    env.process(eng.loop())
    env.run()
    return eng.result(times)


def compiled_replica(workload: Workload, cost_model, cfg: EngineConfig, spec: SpecConfig,
                     times: Sequence[float]):
    """run_replica's run (every request of `workload` in order, request i arriving at
    times[i]) on the engine's compiled loop: (RunResult, its Recorder), or None (run the
    fleet's own SimPy loop). It is simulate's open loop on that order, so it refuses
    what simulate's compiled loop refuses, and a stream it would reorder or skip."""
    from simkit.engine.fast import run
    from simkit.engine.sim import RunResult, request_order

    times = [float(t) for t in times]
    n = workload.num_requests
    if (len(times) != n or not n or any(b < a for a, b in zip(times, times[1:]))
            or not usable(workload, cfg).all()):
        return None
    order, skipped = request_order(workload, cfg, n, 0, shuffle=False)
    if order != list(range(n)):
        return None
    chains = workload.hash_chains() if cfg.prefix_caching else None
    pc = PrefixCache(cfg.num_blocks) if chains is not None else None
    sched = Scheduler(cfg, spec, workload, cost_model, pc)
    kept: list = []
    prefix = {"modelled": True, "preloaded_blocks": 0} if pc is not None else None
    res = run(workload, cost_model, cfg, spec, sched, order=order, skipped=skipped,
              concurrency=0, times=times, warm_count=None, marks=frozenset(), pc=pc,
              prefix=prefix, chains=chains, shared=None, exact=frozenset(), capture=False,
              seed=0, result_type=RunResult, recorder=kept)    # each request once: no copies
    return None if res is None else (res, kept[0])


def run_joint(workload: Workload, cost, cfg: EngineConfig, spec: SpecConfig,
              times: Sequence[float], replicas: int) -> tuple[np.ndarray, list[ReplicaRun]]:
    """N replicas sharing one clock; each arrival goes to the replica with the fewest outstanding
    requests (ties: lowest index). Returns (replica of each request, per-replica runs), on
    the engine's compiled loop where it takes the run (the same figures, faster)."""
    compiled = compiled_joint(workload, cost, cfg, spec, times, replicas)
    if compiled is not None:
        return compiled
    env = simpy.Environment()
    engines = [_Engine(env, workload, cost, cfg, spec) for _ in range(replicas)]
    times = [float(t) for t in times]
    choice = np.zeros(len(times), np.int64)
    per: list[list[float]] = [[] for _ in range(replicas)]

    def arrivals():
        for i, t in enumerate(times):
            if t > env.now:
                yield env.timeout(t - env.now)
            k = min(range(replicas), key=lambda r: (engines[r].outstanding, r))
            choice[i] = k
            per[k].append(t)
            engines[k].submit(i)
        for e in engines:
            e.closed = True
            if e.wake is not None and not e.wake.triggered:
                e.wake.succeed()

    env.process(arrivals())
    for e in engines:
        env.process(e.loop())
    env.run()
    return choice, [e.result(per[k]) if per[k] else None for k, e in enumerate(engines)]


def compiled_joint(workload: Workload, cost_model, cfg: EngineConfig, spec: SpecConfig,
                   times: Sequence[float], replicas: int):
    """run_joint's run on the engine's compiled loop (simkit.engine.fast.joint): its
    (choice, runs), or None (run the SimPy loop above). Refuses what simulate's compiled loop
    refuses and a stream it would not take in order (unservable requests, times going back)."""
    from simkit.engine.fast import run_joint as fast_joint

    times = [float(t) for t in times]
    if (len(times) != workload.num_requests or not times or replicas < 1
            or any(b < a for a, b in zip(times, times[1:])) or not usable(workload, cfg).all()):
        return None
    chains = workload.hash_chains() if cfg.prefix_caching else None
    pc = PrefixCache(cfg.num_blocks) if chains is not None else None
    sched = Scheduler(cfg, spec, workload, cost_model, pc)
    out = fast_joint(workload, cost_model, cfg, spec, sched, times, replicas, pc=pc)
    if out is None:
        return None
    choice, runs = out
    res = []
    for run in runs:
        if run is None:
            res.append(None)
            continue
        rec, preemptions, prefix, served, mine = run
        window = (mine[len(mine) // 10], mine[-1]) if len(mine) > 1 else None
        res.append(_replica_run(summarize_open(rec, window, preemptions), rec, served, prefix))
    return choice, res
