"""Drive the compiled closed loop (kernel.py) and turn its step counts into simulate's RunResult.

The kernel returns what was scheduled, step by step, and for every time simulate records the
step whose end it is. Here each step is priced with the run's cost model exactly as the SimPy
loop prices it (one BatchDescriptor, one step_cost call), the step ends are the same running
sum SimPy's clock adds, and the Recorder is filled so that metrics.summarize returns the same
floats. Returns None (the caller runs the reference loop) where the kernel stopped on a state
the reference loop reports itself (nothing schedulable, an eviction from an empty pool).
"""

from __future__ import annotations

import itertools
import sys
from typing import Sequence

import numpy as np

from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.engine import trajectory
from simkit.engine.cudagraph import CudagraphMode
from simkit.engine.fast import kernel as K
from simkit.engine.fast.pricing import constants
from simkit.engine.metrics import Recorder, summarize, summarize_open
from simkit.engine.policies import BatchSizeTable, FeedbackK, FixedK, GoodputK

_MODES = (GraphMode.FULL, GraphMode.PIECEWISE, GraphMode.NONE)
_DMODE = {CudagraphMode.NONE: K.D_NONE, CudagraphMode.FULL: K.D_FULL,
          CudagraphMode.FULL_AND_PIECEWISE: K.D_FAP, CudagraphMode.PIECEWISE: K.D_PIECEWISE}
MAX_KEY_SPACE = 1 << 26       # prefix-cache key table entries (3 int32 arrays, 1 bool)
# run_loop's parameters, in order (the engine generator's are these but arr_t and the outputs)
_CODE = K.run_loop.__code__
RUN_LOOP_ARGS = _CODE.co_varnames[:_CODE.co_argcount]


def _chain_index(workload) -> tuple:
    """(CSR offsets, dense ids, chain lengths, the distinct hashes sorted, their ids) of the
    workload's prompt chains (Workload.hash_chains' packed form), ids numbered in order of
    first appearance; kept on the workload beside its other derived columns."""
    cache = workload._columns
    if "_fast_chains" not in cache:
        flat, off = workload.block_hashes
        off = np.asarray(off, np.int64)
        uniq, first, inv = np.unique(np.asarray(flat, np.uint64), return_index=True,
                                     return_inverse=True)
        rank = np.empty(uniq.size, np.int64)
        rank[np.argsort(first)] = np.arange(uniq.size)
        cache["_fast_chains"] = (off, rank[inv.reshape(-1)], np.diff(off), uniq, rank)
    return cache["_fast_chains"]


def _lru_ids(uniq, rank, keys: list) -> tuple[np.ndarray, int]:
    """(ids of the cached blocks `keys`, how many are no workload prompt's): a hash of the
    workload has its id; another gets the next free one, in order."""
    keys_a = np.array(keys, np.uint64)
    pos = np.searchsorted(uniq, keys_a)
    known = pos < uniq.size
    known[known] = uniq[pos[known]] == keys_a[known]
    ids = np.empty(keys_a.size, np.int64)
    ids[known] = rank[pos[known]]
    ids[~known] = uniq.size + np.arange(int((~known).sum()))
    return ids, int((~known).sum())


def _columns(workload, drafter: str, ks: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(accepted, drafted) as (K index, row) uint8 arrays, and K -> index (-1: none)."""
    kcol = np.full(max(ks) + 1, -1, np.int64)
    acc, dr = [], []
    for i, k in enumerate(ks):
        key = ("_fast_col", drafter, k)
        if key not in workload._columns:             # Workload.columns' values, not as lists
            tab, kk = workload.table(drafter), workload.effective_k(drafter, k)
            workload._columns[key] = tuple(np.ascontiguousarray(x[:, kk - 1], np.uint8)
                                           for x in (tab.accepted, tab.drafted))
        a, d = workload._columns[key]
        acc.append(a)
        dr.append(d)
        kcol[k] = i
    return np.stack(acc), np.stack(dr), kcol


def kernel_args(workload, cost_model, cfg, spec, sched, *, order: list[int], open_loop: bool,
                pc, shared: list | None, exact: frozenset,
                joint: bool = False) -> dict | None:
    """The kernel's run-independent arguments (run_loop's and engine's, by name) for a run of
    `order` (joint: every request may come, in an order the router decides), or None where
    the kernel cannot take it. Under prefix caching, joint runs get `_per`: the keys each
    request can use by workload index (its engine's B[j] follows the arrivals)."""
    asy, drafter = spec.async_scheduling, spec.drafter
    consts = constants(cost_model, drafter)
    if open_loop and consts is None:
        return None

    bs = cfg.block_size
    plen = np.asarray(workload.prompt_len, np.int64)
    olen = np.minimum(np.minimum(workload.output_len, cfg.max_tokens),
                      cfg.max_model_len - workload.prompt_len).astype(np.int64)
    row0 = np.asarray(workload.offsets(), np.int64)[:plen.size]
    order_a = np.asarray(order, np.int64)
    n_req = plen.size
    use_pc = pc is not None
    if use_pc:
        off, flat, lens, uniq, rank = _chain_index(workload)
        lru_keys = list(pc.lru)
        held = [k for k, r in pc.refs.items() if r]
        if held:                                    # preload leaves every block free
            return None
        lru_init, new = _lru_ids(uniq, rank, lru_keys)
        H = uniq.size + new
        per_idx = np.maximum(lens, (plen + olen) // bs + 1) + 1   # blocks a request can key
        per = per_idx[order_a]
        B = np.empty(order_a.size, np.int64)
        B[:1] = H
        np.cumsum(per[:-1], out=B[1:])
        B[1:] += H
        space = H + int(per.sum())
        if space > MAX_KEY_SPACE:
            return None
        refs = np.full(space, -1, np.int32)
        refs[lru_init] = 0
        shared_a = np.zeros(n_req, np.int64) if shared is None else np.asarray(shared, np.int64)
        exact_a = np.zeros(n_req, np.bool_)
        if exact:
            exact_a[list(exact)] = True
        prev_a, next_a = np.empty(space, np.int32), np.empty(space, np.int32)
        anon0, evicted0 = pc.anon, pc.evicted
    else:
        off = flat = lens = shared_a = np.zeros(1, np.int64)
        exact_a = np.zeros(1, np.bool_)
        H = 1
        B = np.zeros(1, np.int64)
        refs = prev_a = next_a = np.zeros(1, np.int32)
        lru_init = np.zeros(0, np.int64)
        anon0 = evicted0 = 0
    policy = sched.policy
    ks_sorted = np.asarray(sorted(spec.k_values) if spec.speculative else [0], np.int64)
    if spec.speculative:
        acc2d, dr2d, kcol = _columns(workload, spec.drafter, spec.k_values)
    else:
        acc2d = dr2d = np.zeros((1, 1), np.uint8)
        kcol = np.full(1, -1, np.int64)
    alpha = threshold = 0.0
    ktab = np.zeros(1, np.int64)
    if isinstance(policy, FixedK):
        pol_mode = 0
    elif isinstance(policy, BatchSizeTable):
        pol_mode = 1
        top = max(cfg.max_num_seqs, order_a.size) + 2
        ktab = np.array([policy.choose(None, 0, 0, i) for i in range(top)], np.int64)
    elif isinstance(policy, FeedbackK):
        pol_mode = 2
        alpha, threshold = float(policy.ewma.alpha), float(policy.threshold)
        ks_sorted = np.asarray(policy.ks, np.int64)
    elif isinstance(policy, GoodputK) and consts is not None and sys.version_info < (3, 12):
        # prices its candidates in the loop; Python 3.12's sum() of floats compensates
        pol_mode = 3
        alpha = float(policy.ewma.alpha)
        ks_sorted = np.asarray(policy.ks, np.int64)
    else:
        return None
    disp = sched.dispatchers
    kmax_d = max(disp)
    width = max(1, max(len(d.sizes) for d in disp.values()))
    dsizes = np.zeros((kmax_d + 1, width), np.int64)
    dcount = np.zeros(kmax_d + 1, np.int64)
    dq = np.zeros(kmax_d + 1, np.int64)
    modes = {d.mode for d in disp.values()}
    if len(modes) != 1 or {d.max_num_seqs for d in disp.values()} != {cfg.max_num_seqs}:
        return None
    for k, d in disp.items():
        dsizes[k, :len(d.sizes)] = d.sizes
        dcount[k] = len(d.sizes)
        dq[k] = 1 + d.num_spec_tokens
    args = dict(
        open_loop=bool(open_loop), consts=consts if consts is not None else np.zeros(0),
        asy=bool(asy), order=order_a, plen=plen, olen=olen, row0=row0, use_pc=use_pc,
        ch_off=off, ch_ids=flat, nkeys=lens, shared=shared_a, exact=exact_a,
        modify_ok=shared is not None, H=H, B=B, refs=refs, lru_prev=prev_a, lru_next=next_a,
        lru_init=lru_init, anon0=int(anon0), evicted0=int(evicted0), acc2d=acc2d, dr2d=dr2d,
        kcol=kcol, pol_mode=pol_mode, ks=ks_sorted, ktab=ktab, k_init=int(sched.k_cur),
        alpha=alpha, threshold=threshold, speculative=bool(spec.speculative),
        pad=bool(spec.pad), dsizes=dsizes, dcount=dcount, dq=dq, dmode=_DMODE[modes.pop()],
        block_size=bs, budget0=cfg.max_num_batched_tokens, max_model_len=cfg.max_model_len,
        max_num_seqs=cfg.max_num_seqs, num_blocks=cfg.num_blocks)
    if joint and use_pc:
        args["_per"] = per_idx
    return args


def record(cfg, steps, fins, gaps, step_s, host_s, ends, arrived) -> Recorder:
    """The Recorder simulate's loop fills, from a kernel run's counts, its priced steps and each
    request's arrival time (`arrived`, by position j)."""
    # the Recorder gets arrays of the dtypes its lists become (the same numbers, no round trip)
    step_s, host_s, ends = (np.asarray(x, np.float64) for x in (step_s, host_s, ends))
    at = np.concatenate(([0.0], ends))                 # step index + 1 -> time
    rec = Recorder()
    rec.step_end, rec.step_s, rec.host_s = ends, step_s, host_s
    col = steps.T
    rec.mode = col[K.S_MODE].astype(np.int8)
    rec.tokens, rec.padded, rec.pad_drafts = col[K.S_TOKENS], col[K.S_PADDED], col[K.S_PAD_DRAFTS]
    rec.emitted, rec.accepted = col[K.S_EMITTED], col[K.S_ACCEPTED]
    rec.decodes, rec.decode_tokens = col[K.S_DECODES], col[K.S_DEC_TOKENS]
    rec.reqs, rec.k = col[K.S_REQS], col[K.S_K].copy()
    total = cfg.num_blocks
    rec.kv_used = 1.0 - col[K.S_FREE] / total if total else np.zeros(steps.shape[0])
    rec.req_arrival = arrived[fins[:, 0]]
    rec.req_first = at[fins[:, 1] + 1]
    rec.req_done = at[fins[:, 2] + 1]
    rec.req_out, rec.req_preempt = fins[:, 3].copy(), fins[:, 4].copy()
    rec.itl = at[gaps[:, 0] + 1] - at[gaps[:, 1] + 1]
    rec.itl_time = arrived[gaps[:, 2]]
    return rec


def run(workload, cost_model, cfg, spec, sched, *, order: list[int], skipped: dict,
        concurrency: int, times: list[float] | None, warm_count: int | None,
        marks: Sequence[int], pc, prefix: dict | None, chains: list | None,
        shared: list | None, exact: frozenset, capture: bool, seed: int, result_type: type,
        recorder: list | None = None):
    """simulate's run on the compiled kernel: a closed loop of `concurrency` clients, or open-
    loop arrivals at `times`; None where the reference loop must run it (an open loop under a
    cost model the kernel cannot price, a tie between an arrival and a step's end) or say what
    went wrong. `sched`: a reference Scheduler built for the run (its dispatchers, K policy and
    initial K are the run's); `result_type`: simulate's RunResult; `recorder`: a list the run's
    Recorder is appended to (the fleet's replicas read every request's latencies)."""
    open_loop = times is not None
    args = kernel_args(workload, cost_model, cfg, spec, sched, order=order, open_loop=open_loop,
                       pc=pc, shared=shared, exact=exact)
    if args is None:
        return None
    asy, drafter = spec.async_scheduling, spec.drafter
    consts = args["consts"] if args["consts"].size else None
    marks_a = np.asarray(sorted(set(marks)), np.int64)
    args.update(arr_t=np.asarray(times if open_loop else [], np.float64),
                concurrency=int(concurrency), marks=marks_a,
                warm_count=-1 if warm_count is None else int(warm_count))
    scalars, steps, fins, gaps, mark_at, arr_step, arr_time, priced = K.run_loop(
        *[args[name] for name in RUN_LOOP_ARGS])
    if scalars[0] != K.ERR_NONE:
        return None
    (_, n_steps, _, _, preemptions, hit_tokens, query_tokens, evicted, warm_step,
     last_arrival) = scalars.tolist()

    # price every step as the SimPy loop does (the compiled mirror of step_cost where proven)
    descs = None
    if consts is None or capture:
        descs = [BatchDescriptor(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                                 _MODES[r[11]], asy, drafter, r[10])
                 for r in steps[:, :K.S_K].tolist()]
    if consts is None:
        cost = cost_model.step_cost
        costs = [cost(d) for d in descs]
        step_s = [c.step_s for c in costs]
        host_s = [c.host_frac * c.step_s for c in costs]
        ends = list(itertools.accumulate(step_s))      # SimPy's now + delay, step after step
    elif open_loop:                                    # priced as the kernel ran
        step_s, host_s, ends = priced[:, 0].copy(), priced[:, 1].copy(), priced[:, 2].copy()
    else:
        step_s, host_s, ends = K.price_steps(steps, consts, asy)
    at = np.concatenate(([0.0], np.asarray(ends, np.float64)))   # step index + 1 -> time
    rec = record(cfg, steps, fins, gaps, step_s, host_s, ends,
                 arr_time if open_loop else at[arr_step + 1])
    col = steps.T

    last_t = float(at[last_arrival + 1])
    if open_loop:
        window = (times[len(times) // 10], times[-1]) if len(times) > 1 else None
    else:
        window = None if warm_step < 0 else (float(at[warm_step + 1]), last_t)
    metrics = (summarize_open if open_loop else summarize)(rec, window, preemptions)
    if recorder is not None:
        recorder.append(rec)
    spans = {int(m): None if s < 0 else (float(at[s + 1]), last_t)
             for m, s in zip(marks_a.tolist(), mark_at.tolist())}
    others = {m: summarize(rec, w, preemptions) for m, w in spans.items()}
    if args["use_pc"]:
        prefix.update(hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
                      hit_tokens=hit_tokens, prompt_tokens=query_tokens,
                      prefill_tokens=int(col[K.S_PRE_TOK].sum()), evicted_blocks=evicted)
    result = result_type(spec.name, spec.k, seed, metrics, len(order), skipped, None, prefix, others)
    if capture:
        result.trajectory = trajectory.capture(result, rec, descs, col[K.S_ITL].tolist(),
                                               window, spans, preemptions)
    return result
