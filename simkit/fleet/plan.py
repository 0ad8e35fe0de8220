"""The fleet question: for a traffic, per (router policy, configuration), the fewest replicas whose
fleet-wide p99 TTFT and p99 TPOT meet the goals; with the history each replica ends up with.

`Fleet.evaluate(policy, n)` routes the whole traffic over n replicas and simulates every
configuration:
- load-independent policies (round-robin, prefix-affinity, session-affinity): the assignment
  follows from the requests alone, so each replica is a ReplicaJob (its own stream, its own suffix
  table replayed over that stream, its own prefix cache) run on its own: locally, on forked
  workers, or one Ray task per replica group (simkit.executors.ray_fleet), same bytes whichever;
- least-outstanding (load-aware): the replica of a request depends on the replicas' load, which
  depends on their acceptance, which depends on what each tree holds, i.e. on the assignment. It
  runs in one process as a fixed-point iteration: a joint simulation (simkit.fleet.sim.run_joint)
  reading provisional per-request acceptance (iteration 0: the tables round-robin gives at the
  same n), then the tables of the assignment it produced, until the assignment repeats (then the
  tables are exactly those of the assignment) or MAX_LOR_ITERATIONS is reached (said so).

Fleet figures: p99 over every replica's requests that arrived in that replica's steady window
(10 % of its arrivals -> its last); output tok/s = the sum of the replicas' window throughputs.
`search` finds the fewest n by doubling from 1, then bisection (the goals are close to monotone in
n: more replicas, less load each; a non-monotone point between two evaluations is not seen).
"""

from __future__ import annotations

import dataclasses

from typing import Any, Sequence

import numpy as np

from simkit.app.options import Goals
from simkit.choices import Executor, FleetOrdering
from simkit.errors import InputError
from simkit.fleet.replica import ReplicaJob, run_group, tree_history
from simkit.fleet.router import LEAST_OUTSTANDING, LOAD_INDEPENDENT, SESSION_AFFINITY, route, \
    route_sessions
from simkit.fleet.traffic import Traffic

MAX_LOR_ITERATIONS = 3


def _pct(v: np.ndarray, q: float) -> float:
    return float(np.percentile(v, q)) if v.size else float("nan")


def assign(traffic: Traffic, policy: str, n: int) -> np.ndarray:
    """Replica of every arrival under a load-independent policy."""
    if policy == SESSION_AFFINITY:
        return route_sessions(traffic.sessions, n)
    return route(policy, [traffic.pool[i].prompt_ids for i in traffic.draws.tolist()], n)


class Fleet:
    """Evaluations of one traffic on one (cost model, engine limits), memoized per (policy, n)."""

    def __init__(self, traffic: Traffic, specs: Sequence, cost: Any, engine: Any, *,
                 ordering: FleetOrdering = FleetOrdering.SEQUENTIAL, concurrency: int = 8, executor: Executor = Executor.LOCAL,
                 workers: int = 1, address: str | None = None) -> None:
        from simkit.block_hash import prompt_block_hashes

        self.traffic, self.specs, self.cost, self.engine = traffic, list(specs), cost, engine
        self.ordering, self.concurrency = ordering, concurrency
        self.executor, self.workers, self.address = executor, max(1, workers), address
        self.memo: dict[tuple[str, int], dict[str, dict]] = {}
        self.chains = [prompt_block_hashes(r.prompt_ids) for r in traffic.pool]
        self.evaluations = 0
        self.cpu_s: list[dict] = []           # per replica job run: CPU s drafting, simulating

    # -- load-independent ------------------------------------------------------------------
    def jobs(self, rep: np.ndarray, n: int, specs: Sequence) -> list[ReplicaJob]:
        """One ReplicaJob per replica for the assignment `rep`."""
        t, draws = self.traffic.times, self.traffic.draws
        out = []
        for k in range(n):
            idx = np.flatnonzero(rep == k)
            d = draws[idx].tolist()
            out.append(ReplicaJob(k, [self.traffic.pool[i] for i in d], d, t[idx].tolist(),
                                  list(specs), self.cost, self.engine, self.ordering,
                                  self.concurrency, f"replica {k}",
                                  [self.chains[i] for i in d]))
        return out

    def run_jobs(self, jobs: list[ReplicaJob]) -> list[dict]:
        """Run the jobs here, on forked workers, or as Ray tasks (replica order kept), counted
        by the command's progress tracker (simkit.progress)."""
        from simkit.progress import current

        tracker = current()
        if tracker is not None:
            tracker.started(len(jobs))
        out = self._run_jobs(jobs)
        if tracker is not None:
            tracker.finished(len(jobs))
        return out

    def _run_jobs(self, jobs: list[ReplicaJob]) -> list[dict]:
        if self.executor == Executor.RAY:
            from simkit.executors.ray_fleet import run_groups_ray

            return run_groups_ray(run_group, jobs, groups=self.workers, address=self.address)
        if self.workers == 1 or len(jobs) == 1:
            return run_group(jobs)
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from simkit.engine.runner import ignore_sigint, stop_pool
        from simkit.interrupt import result

        # the compiled kernels (drafter, engine) loaded here once: the workers inherit them
        # instead of each reading numba's cache again
        first = next((j for j in jobs if j.requests), None)
        if first is not None:
            run_group([dataclasses.replace(first, requests=first.requests[:1],
                                           draws=first.draws[:1], times=first.times[:1],
                                           chains=None if first.chains is None else
                                           first.chains[:1])])
        groups = [jobs[g::self.workers] for g in range(self.workers)]
        with ProcessPoolExecutor(self.workers, mp_context=mp.get_context("fork"),
                                 initializer=ignore_sigint) as pool:
            try:
                parts = [result(f) for f in [pool.submit(run_group, g) for g in groups]]
            except KeyboardInterrupt:          # end the workers now, not after their groups
                stop_pool(pool)
                raise
        flat = [r for part in parts for r in part]
        return sorted(flat, key=lambda r: r["replica"])

    # -- one evaluation ----------------------------------------------------------------------
    def evaluate(self, policy: str, n: int) -> dict[str, dict]:
        """Per configuration name: the fleet's figures at n replicas under `policy`."""
        key = (policy, n)
        if key not in self.memo:
            self.evaluations += 1
            if policy == LEAST_OUTSTANDING:
                self.memo[key] = {s.name: self._least_outstanding(s, n) for s in self.specs}
            else:
                from simkit.progress import phase

                rep = assign(self.traffic, policy, n)
                with phase(f"fleet plan: {n} replica(s) under {policy} routing "
                           f"(evaluation {self.evaluations})", n):
                    res = self.run_jobs(self.jobs(rep, n, self.specs))
                self.cpu_s.extend(r["cpu_s"] for r in res)
                self.memo[key] = {s.name: fleet_point(
                    policy, n, s.name, [(r["history"], r["runs"][s.name]) for r in res],
                    self.cost.tp) for s in self.specs}
                self.memo[key]["_assignment"] = rep
        return {k: v for k, v in self.memo[key].items() if not k.startswith("_")}

    def _least_outstanding(self, spec, n: int) -> dict:
        """The load-aware fleet for one configuration (see the module docstring)."""
        from simkit.fleet.sim import run_joint
        from simkit.progress import current

        tr = self.traffic
        provisional = None
        if spec.speculative and self.ordering != FleetOrdering.IN_LOOP:   # tables follow an assignment
            self.evaluate("round-robin", n)
            provisional = self.memo[("round-robin", n)]["_assignment"]
        seen: list[np.ndarray] = []
        note = ""
        for it in range(1, MAX_LOR_ITERATIONS + 1):
            wl = self._global_workload(provisional, n, spec.speculative)
            tracker = current()
            if tracker is not None:
                tracker.started(1)
            choice, runs = run_joint(wl, self.cost, self.engine, spec, tr.times.tolist(), n)
            if tracker is not None:
                tracker.finished(1)
            if spec.speculative and self.ordering == FleetOrdering.IN_LOOP:
                note = "drafted on each replica's simulated steps: no tables to make consistent"
                break
            if not spec.speculative or (provisional is not None and
                                        np.array_equal(choice, provisional)):
                note = f"assignment consistent with its tables after {it} iteration(s)"
                break
            if any(np.array_equal(choice, s) for s in seen):
                note = f"assignment cycles after {it} iterations: tables from the previous one"
                break
            seen.append(choice)
            provisional = choice
        else:
            note = (f"assignment still changing after {MAX_LOR_ITERATIONS} iterations: tables "
                    "from the previous iteration's assignment")
        hist = [tree_history(tr.draws[choice == k].tolist()) for k in range(n)]
        point = fleet_point(LEAST_OUTSTANDING, n, spec.name, list(zip(hist, runs)), self.cost.tp)
        point["note"] = note
        return point

    def _global_workload(self, rep: np.ndarray | None, n: int, speculative: bool):
        """Workload of the whole traffic in arrival order; its suffix table row for each request
        is the one the replica `rep` names gives it (that replica's stream replayed in order)."""
        from simkit.acceptance.table import AcceptanceTable
        from simkit.block_hash import pack
        from simkit.engine.workload import Workload
        from simkit.fleet.replica import IN_LOOP, in_loop_drafter, stream_workload

        tr = self.traffic
        reqs = [tr.pool[i] for i in tr.draws.tolist()]
        plen = np.array([len(r.prompt_ids) for r in reqs], np.int32)
        olen = np.array([len(r.output_ids) for r in reqs], np.int32)
        tables = {}
        if speculative and self.ordering == IN_LOOP:
            # each replica's engine drafts with a tree of its own: no assignment needed
            wl = Workload(plen, olen, tables, name="fleet",
                          block_hashes=pack([self.chains[d] for d in tr.draws.tolist()]))
            wl.in_loop["suffix"] = in_loop_drafter(reqs)
            return wl
        if speculative:
            offs = np.zeros(len(reqs) + 1, np.int64)
            np.cumsum(olen, out=offs[1:])
            acc = dr = None
            params = {}
            for k in range(n):
                idx = np.flatnonzero(rep == k)
                if not idx.size:
                    continue
                t = stream_workload([reqs[i] for i in idx], speculative=True,
                                    ordering=self.ordering, concurrency=self.concurrency,
                                    chains=[self.chains[d] for d in tr.draws[idx].tolist()]
                                    ).tables["suffix"]
                if acc is None:
                    acc = np.zeros((int(offs[-1]), t.kmax), np.uint8)
                    dr = np.zeros_like(acc)
                    params = dict(t.params)
                rows = _stream_rows(offs, idx, np.asarray(t.offsets))
                acc[rows] = t.accepted[:rows.size]
                dr[rows] = t.drafted[:rows.size]
            tables["suffix"] = AcceptanceTable(model="", corpus="", drafter="suffix",
                                               params=params, kmax=acc.shape[1],
                                               ordering=self.ordering, prompt_len=plen,
                                               output_len=olen, offsets=offs, accepted=acc,
                                               drafted=dr)
        return Workload(plen, olen, tables, name="fleet",
                        block_hashes=pack([self.chains[d] for d in tr.draws.tolist()]))


def _stream_rows(offs: np.ndarray, idx: np.ndarray, toffs: np.ndarray) -> np.ndarray:
    """The whole traffic's table rows of the requests `idx` (arrival positions, in a replica's
    stream order), in the order that replica's own table holds them (toffs: its offsets), so
    that one gather moves the table instead of a slice per request."""
    lens = offs[idx + 1] - offs[idx]
    if not np.array_equal(np.diff(toffs[:idx.size + 1]), lens):
        raise ValueError("a replica's table does not hold its stream's output tokens")
    within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(offs[idx], lens) + within


def fleet_point(policy: str, n: int, config: str, parts: list[tuple[dict, Any]],
                tp: int) -> dict[str, Any]:
    """Fleet figures from per-replica (tree history, ReplicaRun or None)."""
    runs = [r for _, r in parts if r is not None]
    ttft = np.concatenate([r.ttft_ms for r in runs]) if runs else np.zeros(0)
    tpot = np.concatenate([r.tpot_ms for r in runs]) if runs else np.zeros(0)
    reqs = sum(h["requests"] for h, _ in parts)
    hits = sum(h["effective_repeat_share"] * h["requests"] for h, _ in parts)
    pt = sum(r.prefix.get("prompt_tokens", 0) for r in runs)
    ph = sum(r.prefix.get("hit_tokens", 0) for r in runs)
    acc = sum(r.accepted for r in runs)
    dec = sum(r.decode_steps for r in runs)
    replicas = []
    for k, (h, r) in enumerate(parts):
        replicas.append({"replica": k, "requests": h["requests"],
                         "effective_repeat_share": h["effective_repeat_share"],
                         "tree_evictions": h["tree_evictions"],
                         "prefix_hit_rate": r.prefix.get("hit_rate") if r else None,
                         "accepted_per_step": (r.accepted / r.decode_steps
                                               if r and r.decode_steps and config != "vanilla"
                                               else None),
                         "out_tok_s": r.metrics.output_tok_s if r else 0.0,
                         "ttft_ms_p99": r.metrics.ttft_ms_p99 if r else None,
                         "tpot_ms_p99": r.metrics.tpot_ms_p99 if r else None})
    return {"policy": policy, "config": config, "replicas": n, "gpus": n * tp,
            "ttft_ms_p99": _pct(ttft, 99), "tpot_ms_p99": _pct(tpot, 99),
            "out_tok_s": float(sum(r.metrics.output_tok_s for r in runs)),
            "effective_repeat_share": hits / reqs if reqs else 0.0,
            "prefix_hit_rate": ph / pt if pt else None,
            "accepted_per_step": acc / dec if dec and config != "vanilla" else None,
            "tree_evictions": sum(h["tree_evictions"] for h, _ in parts),
            "per_replica": replicas, "note": ""}


def meets(point: dict, goals: Goals) -> tuple[bool, str]:
    """(goals met, the goal missed: ttft, tpot or '')."""
    if not point["ttft_ms_p99"] <= goals.ttft_ms_p99:       # NaN fails
        return False, "ttft"
    if not point["tpot_ms_p99"] <= goals.tpot_ms_p99:
        return False, "tpot"
    return True, ""


def search(fleet: Fleet, policy: str, config: str, goals: Goals,
           max_replicas: int) -> tuple[dict | None, str, list[int]]:
    """(fewest-replica point meeting the goals or None, goal the next smaller n missed, the n
    evaluated in order)."""
    tried: list[int] = []

    def ok(n: int) -> tuple[bool, str]:
        tried.append(n)
        return meets(fleet.evaluate(policy, n)[config], goals)

    lo, hi, bind = 0, None, ""
    n = 1
    while n <= max_replicas:
        good, why = ok(n)
        if good:
            hi = n
            break
        lo, bind = n, why
        n = min(n * 2, max_replicas) if n < max_replicas else max_replicas + 1
    if hi is None:
        return None, bind, tried
    while hi - lo > 1:
        mid = (lo + hi) // 2
        good, why = ok(mid)
        if good:
            hi = mid
        else:
            lo, bind = mid, why
    return fleet.evaluate(policy, hi)[config], bind, tried


def check_policies(text: str) -> list[str]:
    """Comma list of router policies; InputError naming the option for an unknown one."""
    from simkit.fleet.router import ALL_POLICIES

    out = [p.strip() for p in text.split(",") if p.strip()]
    if not out:
        raise InputError("give at least one policy", field="policies")
    for p in out:
        if p not in ALL_POLICIES:
            raise InputError(f"unknown router policy {p!r}; known: {', '.join(ALL_POLICIES)}",
                             field="policies")
    return list(dict.fromkeys(out))


def cost_per_million(out_tok_s: float, gpus: int, gpu_hour_price: float | None) -> float | None:
    """US$ per million output tokens at the fleet's throughput (None without a price)."""
    if gpu_hour_price is None or not out_tok_s > 0:
        return None
    return gpu_hour_price * gpus / (out_tok_s * 3600.0) * 1e6

