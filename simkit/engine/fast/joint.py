"""Several engines on one clock behind a load-aware router, on the compiled kernel.

simkit.fleet.sim.run_joint's SimPy run (the reference) replayed event for event: each replica
is a kernel.engine generator in joint mode; the arrivals are routed here, each to the replica
with the fewest outstanding (delivered, unfinished) requests, ties to the lowest index. Events
run in SimPy's order: every step that ends before an arrival's time first (their updates
finish requests; between two arrivals the replicas share nothing, so each runs through its
steps alone, up to the horizon, the arrival's time), then every arrival at that time, then the
replicas they woke. An arrival at the exact end of a step is ordered by SimPy's event ids, so
such a run (as a single open loop's tie) returns None and the reference runs it.
tests/unit/test_fast_joint.py compares both field for field.
"""

from __future__ import annotations

import heapq

import numpy as np

from simkit.engine.fast import kernel as K
from simkit.engine.fast.loop import kernel_args, record

# engine's parameters up to its outputs (Outputs.arrays), in order: run_loop's, with the
# control array after open_loop
_NAMES = K.engine.py_func.__code__.co_varnames
ENGINE_ARGS = _NAMES[:_NAMES.index("num_blocks") + 1]


class Replica:
    """One replica's engine generator and the arrays it shares with the router."""

    def __init__(self, args: dict, n: int, per: np.ndarray | None, horizon: np.ndarray):
        self.ctl = np.zeros(K.N_CTL, np.int64)
        self.ctl[K.C_JOINT] = 1
        self.order = np.zeros(n, np.int64)
        self.arr_t = np.zeros(n, np.float64)
        self.B = np.zeros(n, np.int64)
        self.per, self.H = per, args["H"]
        self.times: list[float] = []          # the requests' arrival times as given
        self.out = K.Outputs(n, 0, args["max_num_seqs"])
        mine = dict(args, ctl=self.ctl, horizon=horizon, order=self.order, arr_t=self.arr_t,
                    B=self.B, concurrency=0, warm_count=-1, marks=np.zeros(0, np.int64))
        if args["use_pc"]:                    # the prefix cache's tables are the replica's own
            mine.update(refs=args["refs"].copy(), lru_prev=args["lru_prev"].copy(),
                        lru_next=args["lru_next"].copy())
        self.gen = K.engine(*[mine[name] for name in ENGINE_ARGS],
                            *self.out.arrays())
        self.count = 0

    def resume(self) -> float | None:
        """Run the engine to its next step end or idle (JOINT_IDLE); None if it ended."""
        try:
            x = next(self.gen)
            while x == K.FLUSH:
                self.out.flush(self.ctl)
                x = next(self.gen)
        except StopIteration:
            return None
        return x

    def deliver(self, idx: int, now: float, t: float) -> None:
        """Request `idx` arrives at clock `now` (its time as given: `t`)."""
        j = self.count
        self.order[j] = idx
        self.arr_t[j] = now
        if self.per is not None:
            self.B[j] = self.H if j == 0 else self.B[j - 1] + self.per[self.order[j - 1]]
        self.times.append(t)
        self.count = j + 1
        self.ctl[K.C_DELIVERED] = j + 1

    def outstanding(self) -> int:
        """Requests delivered and not finished (queued or running), what the router reads."""
        return self.count - int(self.ctl[K.C_DONE])


def drive(reps: list[Replica], times: list[float], horizon: np.ndarray) -> np.ndarray | None:
    """Route every arrival and run the replicas to their ends in SimPy's event order; the
    replica of each request, or None (an arrival at a step's exact end, or an engine that
    stopped on a state the reference reports). `horizon`: the replicas' horizon[0], the next
    arrival's time (each runs on alone through the steps that end before it)."""
    n = len(times)
    choice = np.zeros(n, np.int64)
    ends: list[tuple[float, int]] = []           # (step end, replica) of the busy replicas
    idle = [False] * len(reps)
    idle_t = K.JOINT_IDLE
    r_all = range(len(reps))

    def resume(r: int) -> bool:
        x = reps[r].resume()
        if x is None:                            # ended while arrivals remain: an error
            return False
        if x == idle_t:
            idle[r] = True
        else:
            heapq.heappush(ends, (x, r))
        return True

    def route(i: int, now: float) -> int:
        k = min(r_all, key=lambda r: (reps[r].outstanding(), r))
        choice[i] = k
        reps[k].deliver(i, now, times[i])
        return k

    now, i = 0.0, 0
    while i < n and not times[i] > now:            # arrivals at time 0: before any step
        route(i, now)
        i += 1
    horizon[0] = now + (times[i] - now) if i < n else np.inf
    for r in r_all:
        if not resume(r):
            return None
    while i < n:
        t = times[i]
        now = now + (t - now) if t > now else now    # SimPy's timeout(t - now)
        horizon[0] = now
        while ends and ends[0][0] < now:
            _, r = heapq.heappop(ends)
            if not resume(r):
                return None
        if ends and ends[0][0] == now:
            return None                              # SimPy's event order decides: reference
        woken = []
        while True:
            k = route(i, now)
            if idle[k]:
                idle[k] = False
                woken.append(k)
            i += 1
            if i >= n or times[i] > now:
                break
        for k in woken:
            if not resume(k):
                return None
    horizon[0] = np.inf
    for rep in reps:                                  # no more arrivals: each runs out alone
        while rep.resume() is not None:
            pass
        if rep.out.scalars[0] != K.ERR_NONE:
            return None
    return choice


def run(workload, cost_model, cfg, spec, sched, times: list[float], replicas: int, *,
        pc) -> tuple | None:
    """The joint run of `replicas` engines over every request of `workload` (request i arriving
    at times[i]): (replica of each request, per replica (Recorder, preemptions, prefix counts,
    served requests, arrival times) or None when it served none), or None where the reference
    must run it. `sched` and `pc`: a reference Scheduler and PrefixCache built for one replica."""
    n = workload.num_requests
    args = kernel_args(workload, cost_model, cfg, spec, sched, order=list(range(n)),
                       open_loop=True, pc=pc, shared=None, exact=frozenset(), joint=True)
    if args is None:
        return None
    per = args.pop("_per", None)
    horizon = np.zeros(1)
    reps = [Replica(args, n, per, horizon) for _ in range(replicas)]
    choice = drive(reps, [float(t) for t in times], horizon)
    if choice is None:
        return None
    runs = []
    for rep in reps:
        if not rep.count:
            runs.append(None)
            continue
        steps, gaps, priced = rep.out.collect(rep.ctl)
        (_, _, nfin, _, preemptions, hit_tokens, query_tokens, evicted, _,
         _) = rep.out.scalars.tolist()
        rec = record(cfg, steps, rep.out.fins[:nfin], gaps, priced[:, 0].copy(),
                     priced[:, 1].copy(), priced[:, 2].copy(), rep.out.arrival_f)
        prefix = {"modelled": pc is not None}
        if pc is not None:
            prefix.update(hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
                          hit_tokens=hit_tokens, prompt_tokens=query_tokens,
                          prefill_tokens=int(steps[:, K.S_PRE_TOK].sum()),
                          evicted_blocks=evicted)
        runs.append((rec, preemptions, prefix, rep.order[:rep.count].tolist(), rep.times))
    return choice, runs

