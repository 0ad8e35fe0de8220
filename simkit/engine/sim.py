"""The SimPy model: client processes (closed loop or open-loop arrivals) and one engine loop.

One SimPy timeout per engine step and one event per request; tokens are never individual events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import simpy

from simkit.costmodel.batch import StepCostModel
from simkit.engine.config import EngineConfig, SpecConfig
from simkit.engine.metrics import Recorder, RunMetrics, summarize, summarize_open
from simkit.engine.policies import KPolicyName
from simkit.engine.prefix_cache import PrefixCache
from simkit.engine.scheduler import Req, Scheduler
from simkit.engine.workload import Workload
from simkit.engine import trajectory

if TYPE_CHECKING:
    from simkit.engine.trajectory import Trajectory


@dataclass(frozen=True)
class ClosedLoop:
    """`concurrency` clients; each sends its next request as soon as the previous one finishes."""

    concurrency: int = 32


@dataclass(frozen=True)
class OpenLoop:
    """Arrivals independent of completions: Poisson at `rate` req/s, or explicit `timestamps`."""

    rate: float | None = None
    timestamps: tuple[float, ...] | None = None


@dataclass(slots=True)
class _Progress:
    """Where a run stands: next request to submit (index into the order), the engine's pending
    wake-up while idle, the last arrival, completions so far and when the warm-up (the
    window_start_completion-th completion) ended."""

    next: int = 0
    wake: simpy.Event | None = None
    last_arrival: float = 0.0
    done: int = 0
    warm_done_at: float | None = None
    done_at: dict[int, float] = field(default_factory=dict)   # completion count -> when


@dataclass
class RunResult:
    """Metrics of one run plus what was skipped and why (nothing is dropped silently)."""

    config: str
    k: int
    seed: int
    metrics: RunMetrics
    num_requests: int
    skipped: dict[str, int] = field(default_factory=dict)
    step_log: list | None = None        # [(BatchDescriptor, StepCost)] when keep_steps=True
    # prefix caching: None when off (EngineConfig.prefix_caching=False); else a dict with
    # "modelled" (False when the workload has no block hashes: "hit_rate" is None, "reason"
    # says why) and, when modelled, hit_rate = prompt tokens found cached at first admission /
    # prompt tokens admitted, hit_tokens, prompt_tokens, prefill_tokens (scheduled prefill
    # tokens over all steps), evicted_blocks, preloaded_blocks
    prefix: dict | None = None
    # closed loop: completion count -> the run's metrics over the window opening there
    # (simulate's other_window_starts)
    other_windows: dict[int, RunMetrics] = field(default_factory=dict)
    # simulate(capture=True): the run's steps, to price again under another cost model
    # (simkit.engine.trajectory); None when not asked, or where the batches depend on step
    # times (an open loop's arrivals, a K policy that prices steps)
    trajectory: "Trajectory | None" = None
    # adaptive verification (vLLM 0.34 suffix-av): None when off; else mean_admitted_slots (per
    # decode request-step with draft slots), budget_share_of_k (admitted / scheduled slots) and
    # decode_request_steps, over the whole run
    adaptive: dict | None = None


def request_order(workload: Workload, cfg: EngineConfig, num_requests: int | None, seed: int,
                  shuffle: bool = True) -> tuple[list[int], dict[str, int]]:
    """Seeded order of profile request indices (fresh permutations, cycled) and skip counts.
    shuffle=False keeps the workload's own order (replaying a measured run request by request).
    A weighted workload (Workload.weights) is drawn by weight instead (weighted_order).

    Skipped: prompts with no room for one output token under max_model_len, empty outputs, and
    requests whose prompt + output cannot fit the whole KV cache.
    """
    plen, olen = workload.prompt_len, workload.output_len
    skipped = {
        "prompt_over_max_model_len": int((plen >= cfg.max_model_len).sum()),
        "empty_output": int(((plen < cfg.max_model_len) & (olen <= 0)).sum()),
    }
    out_eff = np.minimum(np.minimum(olen, cfg.max_tokens), cfg.max_model_len - plen)
    ok = (plen < cfg.max_model_len) & (olen > 0)
    too_big = ok & (plen + out_eff > cfg.kv_capacity_tokens)
    skipped["exceeds_kv_capacity"] = int(too_big.sum())
    usable = np.flatnonzero(ok & ~too_big)
    if usable.size == 0:
        from simkit.errors import InputError

        raise InputError(f"no usable request in {workload.name or 'the workload'} ({skipped})")
    n = usable.size if num_requests is None else num_requests
    rng = np.random.default_rng(seed)
    if workload.weights is not None and shuffle:
        return weighted_order(usable, workload.weights[usable], n, rng, olen[usable]), skipped
    order: list[int] = []
    while len(order) < n:
        order.extend((usable[rng.permutation(usable.size)] if shuffle else usable).tolist())
    return order[:n], skipped


def weighted_order(usable: np.ndarray, weights: np.ndarray, n: int, rng: np.random.Generator,
                   key: np.ndarray | None = None) -> list[int]:
    """n request indices drawn in proportion to their weights, in a seeded random order.

    Systematic draw over the requests sorted by `key` (stable; the output lengths in the engine):
    points (u + j) * W / n, j < n, u ~ U[0, 1), fall in the requests' cumulative-weight
    intervals, so request i is drawn floor or ceil of n * w_i / W times (exactly n * w_i / W in
    expectation, and exactly w_i times when n = W and the weights are integers), and a run
    shorter than the sample still spans the length distribution evenly; then shuffled. A
    stratified sample thus runs in the mix of the corpus it stands for, not in its own
    (deliberately uneven) mix."""
    if key is not None:
        perm = np.argsort(key, kind="stable")
        usable, weights = usable[perm], weights[perm]
    cum = np.cumsum(weights)
    total = float(cum[-1])
    points = (rng.random() + np.arange(n, dtype=np.float64)) * (total / n)
    pick = np.minimum(np.searchsorted(cum, points, side="right"), usable.size - 1)
    return usable[pick][rng.permutation(n)].tolist()


def simulate(workload: Workload, cost_model: StepCostModel, cfg: EngineConfig, spec: SpecConfig,
             *, load: ClosedLoop | OpenLoop = ClosedLoop(), seed: int = 0,
             num_requests: int | None = None, keep_steps: bool = False, shuffle: bool = True,
             window_start_completion: int | None = None,
             cached_prefixes: Sequence[Sequence[int]] | None = None,
             repeat_prompts: bool | frozenset[int] = False,
             other_window_starts: Sequence[int] = (), capture: bool = False) -> RunResult:
    """Run one configuration over the workload and summarise it (deterministic for a seed).

    Closed loop: the steady window opens at the `window_start_completion`-th completion (default:
    the concurrency-th; 1 = the measured records' rule, calibrate.records.steady_window).
    `other_window_starts` (closed loop): the same run summarised again over the window opening
    at each of these completions (RunResult.other_windows), from the one trajectory: the window
    decides only what is counted, never what is simulated.

    Prefix caching (cfg.prefix_caching, on by default as in vLLM) needs the workload's prompt
    block hashes (Workload.block_hashes); without them every prompt token is prefilled and the
    result says caching was not modelled. `cached_prefixes`: blocks already in the prefix cache
    when the run starts, one prompt block-hash chain per earlier request in the order the server
    served them (e.g. `[chains[i] for i in simkit.history.repeat_indices(n, P)]` for repeat:P;
    the first is evicted first); None = a fresh server (cold). When `num_requests` exceeds the
    workload and requests are cycled, a later copy of a request is a NEW prompt that keeps only
    the prefix its prompt shares with another request of the workload (Workload.shared_blocks:
    template header, common system prompt), unless `repeat_prompts` (the copy repeats the prompt
    exactly and hits it whole, as a repeated request would): True for every request, or the set
    of request indices it holds for (a repeat history's repeated requests).

    `capture`: also keep the trajectory (RunResult.trajectory) of a closed-loop run whose K
    policy reads no step price, so simkit.engine.trajectory.reprice can price it again under
    another cost model without simulating it."""
    order, skipped = request_order(workload, cfg, num_requests, seed, shuffle)
    offsets = workload.offsets()
    plen = workload.prompt_len.tolist()
    olen = np.minimum(np.minimum(workload.output_len, cfg.max_tokens),
                      cfg.max_model_len - workload.prompt_len).tolist()
    chains, pc, prefix = _prefix_setup(workload, cfg, cached_prefixes)
    shared = workload.shared_blocks() if chains is not None and repeat_prompts is not True else None
    exact = repeat_prompts if isinstance(repeat_prompts, frozenset) else frozenset()
    seen: dict[int, int] = {}
    sched = Scheduler(cfg, spec, workload, cost_model, pc)
    rec = Recorder()
    log: list | None = [] if keep_steps else None
    capture = capture and isinstance(load, ClosedLoop) and not prices_steps(spec)
    descs: list | None = [] if capture else None
    itl_per_step: list[int] = []
    env = simpy.Environment()
    state = _Progress()
    warm_count = None
    marks: frozenset[int] = frozenset()
    if isinstance(load, ClosedLoop):
        warm_count = window_start_completion or load.concurrency
        marks = frozenset(other_window_starts)
    # an open loop's arrival times, drawn once for whichever loop runs it
    times = None if isinstance(load, ClosedLoop) else _arrival_times(load, len(order), seed)
    if not keep_steps:                         # the compiled loop, where proven equal
        from simkit.engine import fast

        done = fast.run(workload, cost_model, cfg, spec, sched, order=order, skipped=skipped,
                        concurrency=getattr(load, "concurrency", 0), warm_count=warm_count,
                        times=times, marks=marks, pc=pc,
                        prefix=prefix, chains=chains, shared=shared, exact=exact,
                        capture=capture, seed=seed, result_type=RunResult)
        if done is not None:
            return done

    def submit() -> Req | None:
        j = state.next
        if j >= len(order):
            return None
        state.next = j + 1
        idx = order[j]
        req = Req(j, idx, plen[idx], olen[idx], offsets[idx], env.now)
        if chains is not None:
            req.keys = chains[idx]
            copy = seen.get(idx, 0)
            seen[idx] = copy + 1
            if copy and shared is not None and idx not in exact:   # a new prompt behind
                keys = chains[idx]
                s = shared[idx]                                    # the shared prefix
                req.keys = keys[:s] + [(copy, idx, i) for i in range(s, len(keys))]
        state.last_arrival = env.now
        sched.add(req)
        wake = state.wake
        if wake is not None and not wake.triggered:
            wake.succeed()
        return req

    def on_finish(req: Req, now: float) -> None:
        rec.finish(req, now)
        state.done += 1
        if warm_count is not None and state.done == warm_count:
            state.warm_done_at = now
        if state.done in marks:
            state.done_at[state.done] = now
        if req.event is not None:
            req.event.succeed()

    def client():
        while True:
            req = submit()
            if req is None:
                return
            req.event = env.event()
            yield req.event

    def arrivals(times: list[float]):
        for t in times:
            if t > env.now:
                yield env.timeout(t - env.now)
            submit()

    prefill = [0]
    itl_seen = [0]

    def engine():
        cm = cost_model
        while True:
            if not sched.has_work():
                if state.next >= len(order):
                    return
                state.wake = env.event()
                yield state.wake
                continue
            plan = sched.schedule()
            cost = cm.step_cost(plan.desc)
            yield env.timeout(cost.step_s)
            outcome = sched.update(plan, env.now, rec.itl, rec.itl_time, on_finish)
            rec.step(env.now, cost, plan.desc, outcome, plan.k_ran, sched.kv_used_frac())
            prefill[0] += plan.desc.num_prefill_tokens
            if log is not None:
                log.append((plan.desc, cost))
            if descs is not None:
                descs.append(plan.desc)
                itl_per_step.append(len(rec.itl) - itl_seen[0])
                itl_seen[0] = len(rec.itl)

    if isinstance(load, ClosedLoop):
        for _ in range(min(load.concurrency, len(order))):
            env.process(client())
    else:
        env.process(arrivals(times))
    env.process(engine())
    env.run()

    if isinstance(load, ClosedLoop):
        start = state.warm_done_at
        window = None if start is None else (start, state.last_arrival)
    else:
        window = (times[len(times) // 10], times[-1]) if len(times) > 1 else None
    metrics = (summarize(rec, window, sched.preemptions) if isinstance(load, ClosedLoop) else
               summarize_open(rec, window, sched.preemptions))
    spans = {n: None if n not in state.done_at else (state.done_at[n], state.last_arrival)
             for n in sorted(marks)}
    others = {n: summarize(rec, w, sched.preemptions) for n, w in spans.items()}
    if pc is not None:
        prefix.update(hit_rate=sched.hit_tokens / sched.query_tokens if sched.query_tokens else 0.0,
                      hit_tokens=sched.hit_tokens, prompt_tokens=sched.query_tokens,
                      prefill_tokens=prefill[0], evicted_blocks=pc.evicted)
    result = RunResult(spec.name, spec.k, seed, metrics, len(order), skipped, log, prefix, others)
    if sched.av is not None:
        result.adaptive = sched.av.summary()
    if descs is not None:
        result.trajectory = trajectory.capture(result, rec, descs, itl_per_step, window, spans,
                                               sched.preemptions)
    return result


def prices_steps(spec: SpecConfig) -> bool:
    """True when the spec's K policy prices steps (TABLE, GOODPUT), or adaptive verification
    budgets slots by profiled step costs: its trajectory then depends on the cost model, and a
    run of it cannot be priced again (simkit.engine.trajectory)."""
    return spec.policy in (KPolicyName.TABLE, KPolicyName.GOODPUT) or spec.adaptive


def _prefix_setup(workload: Workload, cfg: EngineConfig,
                  cached_prefixes: Sequence[Sequence[int]] | None
                  ) -> tuple[list | None, PrefixCache | None, dict | None]:
    """(per-request hash chains, block pool, result dict) for the run's prefix caching."""
    from simkit.block_hash import BLOCK_SIZE
    from simkit.errors import InputError

    if not cfg.prefix_caching:
        if cached_prefixes:
            raise InputError("cached_prefixes given with prefix caching off", field="cached_prefixes")
        return None, None, None
    chains = workload.hash_chains()
    if chains is None:
        return None, None, {"modelled": False, "hit_rate": None,
                            "reason": f"{workload.name or 'the workload'} has no prompt block "
                                      "hashes (a profile built before they were stored): every "
                                      "prompt token is prefilled"}
    if cfg.block_size != BLOCK_SIZE:
        raise InputError(f"the workload's block hashes are over {BLOCK_SIZE}-token blocks, the "
                         f"engine's block_size is {cfg.block_size}", field="block_size")
    pc = PrefixCache(cfg.num_blocks)
    preloaded = pc.preload(cached_prefixes or ())
    return chains, pc, {"modelled": True, "preloaded_blocks": preloaded}


def _arrival_times(load: OpenLoop, n: int, seed: int) -> list[float]:
    """Arrival times of an open loop: the given timestamps (first n), or seeded Poisson arrivals."""
    if load.timestamps is not None:
        times = sorted(float(t) for t in load.timestamps)[:n]
        if len(times) < n:
            from simkit.errors import InputError

            raise InputError(f"{len(times)} timestamps for {n} requests", field="timestamps")
        return times
    if not load.rate or load.rate <= 0:
        from simkit.errors import InputError

        raise InputError("open loop needs rate > 0 or timestamps", field="rate")
    gaps = np.random.default_rng([seed, 7]).exponential(1.0 / load.rate, n)
    return np.cumsum(gaps).tolist()
