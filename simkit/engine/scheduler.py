"""vLLM V1 continuous batching for one simulated engine: schedule a step, then apply its outcome.

Pure Python, no SimPy: `schedule()` picks the step's tokens (running requests first, then waiting
ones, under the token budget, max_num_seqs and KV blocks, preempting the most recently scheduled
running request when blocks run out), `describe()` builds the BatchDescriptor with the CUDA-graph
dispatch, and `update()` applies acceptance from the tables and proposes the next drafts.
"""

from __future__ import annotations

from collections import deque
from enum import IntEnum
from typing import Callable, NamedTuple

from simkit.catalog.vllm_versions import get_vllm_version
from simkit.costmodel.batch import BatchDescriptor, StepCostModel
from simkit.engine.config import EngineConfig, SpecConfig
from simkit.engine.cudagraph import CudagraphMode
from simkit.engine.policies import (BatchSizeKTable, BatchSizeTable, FeedbackK, FixedK, GoodputK,
                                    KPolicy, KPolicyName, dense_k_table, tier_widths)
from simkit.engine.prefix_cache import PrefixCache
from simkit.engine.pricing import dispatchers_for, uniform_decode_price
from simkit.engine.slots import get_slot_policy
from simkit.engine.workload import Workload


class SimulationError(RuntimeError):
    """The engine cannot make progress (e.g. the KV cache cannot hold one request's chunk)."""


def mean_accepted_per_step(workload: Workload, drafter: str, k: int) -> float:
    """Mean accepted drafts per decode step when every request runs alone from t=1 at cap K
    (what an operator reads from vLLM's acceptance metrics when tuning a K table offline).
    A weighted workload counts each request's steps and drafts `weights[r]` times. Kept with
    the workload's cached columns: every run of a dynamic-table spec asks again (10 ms each)."""
    key = ("mean_accepted_per_step", drafter, workload.effective_k(drafter, k))
    if key not in workload._columns:
        workload._columns[key] = _mean_accepted(workload, drafter, k)
    return workload._columns[key]


def _mean_accepted(workload: Workload, drafter: str, k: int) -> float:
    acc, _, offs = workload.columns(drafter, k)
    weights = None if workload.weights is None else workload.weights.tolist()
    steps = total = 0
    for r, length in enumerate(workload.output_len.tolist()):
        base, end = offs[r], min(length, offs[r + 1] - offs[r])
        t = 1
        r_steps = r_total = 0
        while t < end:
            a = acc[base + t]
            r_total += a
            r_steps += 1
            t += a + 1
        if weights is None:
            steps += r_steps
            total += r_total
        else:
            steps += weights[r] * r_steps
            total += weights[r] * r_total
    return total / steps if steps else 0.0


class Req:
    """One in-flight request; lengths in tokens, times in simulated seconds."""

    __slots__ = ("seq", "idx", "prompt_len", "out_len", "row0", "arrival", "computed", "t",
                 "blocks", "draft", "spec", "first_time", "last_emit", "done_time", "event",
                 "preemptions", "keys", "chain", "reg_at")

    def __init__(self, seq: int, idx: int, prompt_len: int, out_len: int, row0: int,
                 arrival: float) -> None:
        self.seq, self.idx = seq, idx
        self.prompt_len, self.out_len, self.row0 = prompt_len, out_len, row0
        self.arrival = arrival
        self.computed = 0          # tokens whose KV is in the cache
        self.t = 0                 # output tokens produced so far
        self.blocks = 0            # KV blocks held
        self.draft = 0             # real draft tokens proposed for the next step
        self.spec = 0              # spec tokens it will be scheduled with (draft, or K when padded)
        self.first_time = -1.0
        self.last_emit = -1.0
        self.done_time = -1.0
        self.event = None
        self.preemptions = 0
        self.keys: list = _NO_KEYS   # prompt block hashes (prefix caching)
        self.chain: list = []        # keys of the cached blocks it holds, in order (None = hashless)
        self.reg_at = 16             # token count that fills its next block (set by the scheduler)


_NO_KEYS: list = []


class EntryKind(IntEnum):
    """What a scheduled request does in a step."""

    PREFILL_CHUNK = 0      # a prefill chunk that does not reach the prompt's end: no token
    LAST_PREFILL = 1       # the chunk that completes the prompt: samples the first token
    DECODE = 2             # one token plus its spec (draft or padding) tokens


PREFILL_CHUNK, LAST_PREFILL, DECODE = EntryKind


class PlanEntry(NamedTuple):
    """One scheduled request of a step: tokens scheduled, spec tokens among them (drafts plus
    padding up to K), real drafts among those, and what the request does (EntryKind)."""

    req: Req
    tokens: int
    spec: int
    real: int
    kind: EntryKind


class Plan:
    """What one step scheduled: one entry per scheduled request, plus its BatchDescriptor."""

    __slots__ = ("entries", "k", "k_ran", "desc", "preempted")

    def __init__(self, k: int) -> None:
        self.entries: list[PlanEntry] = []
        self.k = k
        # the K cap that ran: k, or less when the step's token budget (or max_model_len) left
        # no decode request room for k drafts: vLLM cuts drafts to the tokens it schedules
        self.k_ran = k
        self.desc: BatchDescriptor | None = None
        self.preempted = 0


class Scheduler:
    """Engine state between steps, plus the K policy of the configuration."""

    def __init__(self, cfg: EngineConfig, spec: SpecConfig, workload: Workload,
                 cost_model: StepCostModel, prefix_cache: PrefixCache | None = None) -> None:
        """`prefix_cache`: the block pool of automatic prefix caching (None = off: every prompt
        token is prefilled, the behaviour before prefix caching was modelled)."""
        self.cfg, self.spec, self.cost_model = cfg, spec, cost_model
        self.pc = prefix_cache
        self.hit_tokens = 0          # prompt tokens found cached at first admission
        self.query_tokens = 0        # prompt tokens of first admissions
        self.running: list[Req] = []
        self.waiting: deque[Req] = deque()
        self.free_blocks = cfg.num_blocks
        self.total_blocks = cfg.num_blocks
        self.drafter = spec.drafter
        self.speculative = spec.speculative
        # the version's parts for this configuration (simkit.catalog.vllm_versions): runner,
        # slot policy, graph-size rule, whether the drafter runs on the host
        version = get_vllm_version(cfg.vllm_version)
        parts = version.parts_for(spec.drafter)
        self.async_scheduling = (spec.async_scheduling if parts is None else
                                 version.runner_for(spec.drafter).async_scheduling)
        self.drafts_on_host = spec.speculative and (parts is None or parts.drafts_on_host)
        self.slots = get_slot_policy(version.slots_for(spec.drafter, spec.pad))
        self.k_table = (dense_k_table(spec.k_table, spec.k, cfg.max_num_seqs)
                        if spec.k_table else None)
        self.dispatchers = dispatchers_for(spec.k_values, cfg.cudagraph_mode, cfg.max_num_seqs,
                                           cfg.max_num_batched_tokens, spec.graphs,
                                           rule=version.graph_rule,
                                           max_reqs=tier_widths(self.k_table) if self.k_table
                                           else None)
        self.cols: dict = {}           # K -> (accepted, drafted), indexed by table row
        self.in_loop = None            # a drafter driven step by step (Workload.in_loop)
        self._in_loop_cols: list[tuple[int, dict, dict]] = []
        if spec.speculative and spec.drafter in workload.in_loop:
            # the columns start empty (dicts: only the rows the run visits): each row is drafted
            # on the simulated trajectory just before the step that reads it (_draft_in_loop)
            self.in_loop = workload.in_loop[spec.drafter]()
            for k in spec.k_values:
                self.cols[k] = ({}, {})
                self._in_loop_cols.append((min(k, self.in_loop.kmax) - 1, *self.cols[k]))
        elif spec.speculative:
            # a step at K reads K's column, or (kmax_drafts) the K-max draft cut to K slots
            kmax = max(spec.k_values)
            for k in spec.k_values:
                col = kmax if self.slots.kmax_drafts else k
                acc, dr, _ = workload.columns(spec.drafter, col)
                self.cols[k] = (acc, dr)
        self.policy = self._make_policy(workload)
        self.k_cur = self.policy.choose(lambda k: [], 0, 0, 1)
        self.preemptions = 0
        self.av = self._make_adaptive(workload) if spec.adaptive else None

    def _make_adaptive(self, workload: Workload):
        """vLLM 0.34's adaptive verification for this run (simkit.engine.adaptive_run)."""
        from simkit.engine.adaptive_run import AdaptiveVerifier

        src, ml = workload.sources(self.drafter, self.spec.k)
        per_req = workload.prompt_len + workload.output_len / 2
        ctx = float(per_req.mean()) if per_req.size else 0.0
        full = self.cfg.cudagraph_mode in (CudagraphMode.FULL, CudagraphMode.FULL_AND_PIECEWISE)
        return AdaptiveVerifier(self.spec.k, src, ml, self.cost_model,
                                self.dispatchers[self.spec.k], self.cfg.max_num_seqs,
                                self.cfg.max_num_batched_tokens, ctx, self.drafter,
                                full_decode=full)

    def _trim_slots(self, entries: list, acc_col, num_tokens: int, spec_tokens: int,
                    sampling: int) -> tuple[int, int, int, int, int]:
        """Adaptive verification: cut each decode entry to its admitted slots. Returns the
        tokens, spec tokens, real drafts and accepted drafts removed, and the longest query."""
        idx = [i for i, e in enumerate(entries) if e[4] is DECODE and e[2] > 0]
        if not idx:
            return 0, 0, 0, 0, max((e[1] for e in entries), default=0)
        admitted = self.av.admit([entries[i][0].seq for i in idx], [entries[i][2] for i in idx],
                                 sampling, num_tokens - spec_tokens)
        cut = cut_real = cut_acc = 0
        for i, slots in zip(idx, admitted):
            req, n_new, s, real, kind = entries[i]
            if slots == s:
                continue
            a = acc_col[req.row0 + req.t]
            new_real = real if real < slots else slots
            cut += s - slots
            cut_real += real - new_real
            cut_acc += (a if a < s else s) - (a if a < slots else slots)
            entries[i] = PlanEntry(req, n_new - (s - slots), slots, new_real, kind)
        return cut, cut, cut_real, cut_acc, max(e[1] for e in entries)

    # -- K policies ---------------------------------------------------------------------------
    def price(self, k: int, n: int, context: int, real_drafts: int) -> float:
        """Predicted step seconds of a uniform decode batch of n requests, each with K drafts."""
        return uniform_decode_price(self.cost_model, self.dispatchers[k], k, n, context,
                                    real_drafts, self.drafter, self.async_scheduling,
                                    self.drafts_on_host)

    def _make_policy(self, workload: Workload) -> KPolicy:
        spec = self.spec
        if self.k_table is not None:
            return BatchSizeKTable(self.k_table)
        if spec.policy is None:
            return FixedK(spec.k if spec.speculative else 0)
        params = dict(spec.policy_params)
        if spec.policy is KPolicyName.TABLE:
            mean_acc = {k: mean_accepted_per_step(workload, spec.drafter, k) for k in spec.ks}
            per_req = workload.prompt_len + workload.output_len / 2
            ctx = float(per_req.mean() if workload.weights is None else
                        (per_req * workload.weights).sum() / workload.weights.sum())
            return BatchSizeTable(spec.ks, mean_acc, ctx, self.price)
        if spec.policy is KPolicyName.FEEDBACK:
            return FeedbackK(spec.ks, **params)
        if spec.policy is KPolicyName.GOODPUT:
            return GoodputK(spec.ks, self.price, **params)
        raise ValueError(f"unknown dynamic policy {spec.policy}")

    # -- admission ----------------------------------------------------------------------------
    def add(self, req: Req) -> None:
        """Queue an arrived request (admitted by a later schedule())."""
        self.waiting.append(req)

    def has_work(self) -> bool:
        """True while a request is running or waiting."""
        return bool(self.running) or bool(self.waiting)

    def _preempt(self, req: Req) -> None:
        if self.in_loop is not None:             # vLLM: it left the batch, its drafter state ends
            self.in_loop.stop(req.seq)
        if self.av is not None:
            self.av.forget(req.seq)
        self.free_blocks += req.blocks
        if self.pc is not None:                  # shared cached blocks stay held by others
            self.pc.release(req.chain, req.blocks)
            self.free_blocks = self.pc.free
            req.chain = []
        req.blocks = req.computed = req.draft = req.spec = 0
        req.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)

    # -- one step -----------------------------------------------------------------------------
    def schedule(self) -> Plan:
        """Pick this step's tokens by vLLM V1 rules (decodes first, then waiting prefills).

        Also builds the step's BatchDescriptor (counts, context, CUDA-graph mode and padding).
        """
        cfg = self.cfg
        bs = cfg.block_size
        budget = cfg.max_num_batched_tokens
        max_len_1 = cfg.max_model_len - 1
        plan = Plan(self.k_cur)
        entries = plan.entries
        new, entry = tuple.__new__, PlanEntry      # PlanEntry(...) without its Python __new__
        decode, last, chunk = DECODE, LAST_PREFILL, PREFILL_CHUNK
        running = self.running
        free = self.free_blocks
        pc = self.pc
        num_tokens = prefill_tokens = prefill_reqs = spec_tokens = real_total = drafting = 0
        ctx = max_q = accepted = 0
        room_max = -1                              # most drafts a decode request had room for
        acc_col = self.cols[plan.k][0] if plan.k in self.cols else None
        fill = self.slots.fillers_verified        # acceptance capped at the slots, not the drafts
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            computed = req.computed
            n_tokens = req.prompt_len + req.t
            n_new = n_tokens + req.spec - computed
            room = budget if budget < max_len_1 - computed else max_len_1 - computed
            if n_new > budget:
                n_new = budget
            if n_new > max_len_1 - computed:
                n_new = max_len_1 - computed
            if n_new <= 0:
                i += 1
                continue
            need = -(-(computed + n_new) // bs) - req.blocks
            if need > free:
                stopped = False
                self.free_blocks = free
                while need > self.free_blocks:
                    victim = running.pop()
                    self._preempt(victim)
                    plan.preempted += 1
                    if victim is req:
                        stopped = True
                        break
                free = self.free_blocks
                if stopped:
                    break
            if need > 0:
                free -= need
                req.blocks += need
                if pc is not None:
                    pc.take(need)
            if pc is not None and computed + n_new >= req.reg_at and n_tokens >= req.reg_at:
                self._register(req, computed + n_new, n_tokens)
            gap = n_tokens - computed
            if gap == 1:                                  # decode (+ drafts)
                spec = n_new - 1
                if room - 1 > room_max:
                    room_max = room - 1
                real = req.draft if req.draft < spec else spec
                entries.append(new(entry, (req, n_new, spec, real, decode)))
                spec_tokens += spec
                real_total += real
                cap = spec if fill else real
                if cap > 0:                               # what update() will accept (replayed)
                    a = acc_col[req.row0 + req.t]
                    accepted += a if a < cap else cap
                drafting += 1
            else:                                         # prefill chunk (resumed after preemption)
                prefill_tokens += n_new
                prefill_reqs += 1
                if computed + n_new >= n_tokens:
                    drafting += 1
                    entries.append(new(entry, (req, n_new, 0, 0, last)))
                else:
                    entries.append(new(entry, (req, n_new, 0, 0, chunk)))
            num_tokens += n_new
            if n_new > max_q:
                max_q = n_new
            ctx += computed + n_new
            budget -= n_new
            i += 1
        if not plan.preempted:
            waiting = self.waiting
            while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
                req = waiting[0]
                n_tokens = req.prompt_len + req.t
                hit = hit_free = 0
                if pc is not None:
                    keys = req.keys if req.t == 0 else self._resume_keys(req, n_tokens)
                    hit, hit_free = pc.lookup(keys, (n_tokens - 1) // bs)
                n_new = n_tokens - req.computed - hit * bs
                if n_new > budget:
                    n_new = budget
                need = -(-(req.computed + hit * bs + n_new) // bs) - req.blocks - hit
                if need + hit_free > free:
                    break
                waiting.popleft()
                running.append(req)
                if pc is not None:
                    if req.preemptions == 0:
                        self.hit_tokens += hit * bs
                        self.query_tokens += req.prompt_len
                    if hit:
                        hit_keys = keys[:hit]
                        pc.acquire(hit_keys)
                        req.chain = list(hit_keys)
                        req.blocks += hit
                        req.computed += hit * bs
                        free -= hit_free
                    if need > 0:
                        pc.take(need)
                    req.reg_at = (len(req.chain) + 1) * bs
                    if req.computed + n_new >= req.reg_at:
                        self._register(req, req.computed + n_new, n_tokens)
                free -= need
                req.blocks += need
                if req.computed + n_new >= n_tokens:
                    drafting += 1
                    entries.append(new(entry, (req, n_new, 0, 0, last)))
                else:
                    entries.append(new(entry, (req, n_new, 0, 0, chunk)))
                prefill_tokens += n_new
                prefill_reqs += 1
                num_tokens += n_new
                if n_new > max_q:
                    max_q = n_new
                ctx += req.computed + n_new
                budget -= n_new
        self.free_blocks = free
        if self.av is not None and spec_tokens:          # adaptive verification's admitted slots
            cut, cut_spec, cut_real, cut_acc, max_q = self._trim_slots(
                entries, acc_col, num_tokens, spec_tokens, drafting)
            num_tokens -= cut
            ctx -= cut
            spec_tokens -= cut_spec
            real_total -= cut_real
            accepted -= cut_acc
        if not entries and self.has_work():
            raise SimulationError(
                f"nothing can be scheduled: {self.total_blocks} KV blocks cannot hold the next "
                f"request's chunk (kv_capacity_tokens={cfg.kv_capacity_tokens})")
        if room_max < 0:                           # no decode: the budget's own bound
            room_max = cfg.max_num_batched_tokens - 1
        if room_max < plan.k:                      # no decode had room for K drafts
            plan.k_ran = room_max
        n = len(entries)
        varlen = (self.av.dispatch(num_tokens) if self.av is not None and not prefill_reqs
                  else None)
        mode, padded = varlen or self.dispatchers[plan.k].dispatch(num_tokens, n, max_q,
                                                                   prefill_reqs)
        plan.desc = BatchDescriptor(
            num_reqs=n, num_tokens=num_tokens, num_padded_tokens=padded,
            num_prefill_tokens=prefill_tokens, num_prefill_reqs=prefill_reqs,
            num_decode_reqs=n - prefill_reqs, num_spec_tokens=spec_tokens,
            num_pad_drafts=spec_tokens - real_total,
            num_drafting_reqs=drafting if self.drafts_on_host else 0,
            context_tokens=ctx, graph_mode=mode, async_scheduling=self.async_scheduling,
            drafter=self.drafter, num_accepted_tokens=accepted)
        return plan

    def update(self, plan: Plan, now: float, itl: list[float], itl_arrival: list[float],
               on_finish: Callable[[Req, float], None]) -> tuple[int, int, int, int]:
        """Apply the step's outcome at time `now`; appends inter-token gaps to `itl`.

        Each request that finished its prefill or decoded advances by a+1 tokens (a = accepted
        drafts, capped at its scheduled real drafts), capped at its remaining output. Returns
        (tokens emitted, drafts accepted, decode request-steps, tokens of decode steps).
        """
        acc_col = self.cols[plan.k][0] if plan.k in self.cols else None
        emitted = accepted = decodes = decode_tokens = longest = 0
        pairs: list[tuple[int, int]] = []
        candidates: list[Req] = []
        finished = False
        observe = self.policy.needs_observation
        fill = self.slots.fillers_verified
        chunk, decode = PREFILL_CHUNK, DECODE
        in_loop = self.in_loop
        av = self.av
        for req, n_new, s, real, kind in plan.entries:
            if kind is chunk:                             # partial prefill: no token, no draft
                req.computed += n_new
                continue
            t = req.t
            a = 0
            cap = s if fill else real
            if cap > 0:
                a = acc_col[req.row0 + t]
                if a > cap:
                    a = cap
            e = a + 1
            rem = req.out_len - t
            if e > rem:
                e = rem
            if kind is decode:
                decodes += 1
                accepted += a
                decode_tokens += e
                if observe and s > 0:
                    pairs.append((a, s if fill else real))   # exact-K: every slot verified
                if av is not None and s > 0:
                    av.observe(req.seq, a, s)
            req.computed = req.prompt_len + t + a
            if in_loop is not None:
                in_loop.sampled(req.seq, req.idx, t, t + e)
            t += e
            req.t = t
            emitted += e
            if req.first_time < 0:
                req.first_time = now
            else:
                itl.append(now - req.last_emit)
                itl_arrival.append(req.arrival)
            req.last_emit = now
            if t >= req.out_len:
                self.free_blocks += req.blocks
                if self.pc is not None:          # shared cached blocks stay held by others
                    self.pc.release(req.chain, req.blocks)
                    self.free_blocks = self.pc.free
                    req.chain = []
                req.blocks = 0
                req.done_time = now
                finished = True
                if in_loop is not None:
                    in_loop.stop(req.seq)
                if av is not None:
                    av.forget(req.seq)
                on_finish(req, now)
            else:
                if in_loop is not None:
                    self._draft_in_loop(req)
                candidates.append(req)
                if req.prompt_len + t > longest:
                    longest = req.prompt_len + t
        if finished:
            self.running = [r for r in self.running if r.done_time < 0]
        self._propose(plan.k, pairs, candidates, len(plan.entries), longest)
        return emitted, accepted, decodes, decode_tokens

    def _draft_in_loop(self, req: Req) -> None:
        """vLLM's proposer for one request of the batch, right after its sampled tokens entered
        the trees (so a request later in the batch sees them): the drafts at its new position,
        written into the row the next step reads."""
        d, a = self.in_loop.draft(req.seq, req.idx, req.t)
        row = req.row0 + req.t
        for kc, acc, dr in self._in_loop_cols:
            acc[row] = a[kc]
            dr[row] = d[kc]

    def _propose(self, k_prev: int, pairs: list[tuple[int, int]], candidates: list[Req],
                 n_scheduled: int, longest: int) -> None:
        """Choose K for the next step and give each request that just sampled its next draft;
        `longest`: the most tokens (prompt + output) a candidate holds."""
        if not self.speculative:
            return
        policy = self.policy
        if policy.needs_observation:
            policy.observe(pairs, k_prev)
        n = len(candidates)
        slots = self.slots
        if isinstance(policy, FixedK):
            k = policy.k
        elif slots.kmax_drafts:           # the K-max draft, cut to kk slots
            ctx = sum(r.computed for r in self.running)
            k = policy.choose(lambda kk: [min(self.cols[kk][1][r.row0 + r.t], kk)
                                          for r in candidates], n, ctx, n_scheduled)
        else:
            ctx = sum(r.computed for r in self.running)
            k = policy.choose(lambda kk: [self.cols[kk][1][r.row0 + r.t] for r in candidates],
                              n, ctx, n_scheduled)
        self.k_cur = k
        limit = self.cfg.max_model_len - k
        # V1: one request near max_model_len stops the whole batch drafting; exact-K slots are
        # cut per request by the scheduler's max_model_len cap instead (schedule())
        no_draft = longest > limit and not slots.cut_per_request
        dr_col = self.cols[k][1]
        pad = slots.pads_to_k
        for req in candidates:
            d = 0 if no_draft else dr_col[req.row0 + req.t]
            req.draft = d
            req.spec = (0 if no_draft else k) if pad else d
        av = self.av
        if av is not None:                # the speculator's observe, halving, then finalize
            av.step()
            for req in candidates:
                av.propose(req.seq, req.row0 + req.t, req.draft)

    # -- prefix caching -------------------------------------------------------------------------
    def _register(self, req: Req, upto: int, n_tokens: int) -> None:
        """Cache the request's blocks that are full once this step's tokens are computed (vLLM
        caches at scheduling, up to the request's verified tokens, never drafts)."""
        full = (upto if upto < n_tokens else n_tokens) // self.cfg.block_size
        chain, keys, pc = req.chain, req.keys, self.pc
        n_prompt = len(keys)
        for i in range(len(chain), full):
            key = keys[i] if i < n_prompt else (req.seq, i)
            chain.append(key if pc.register(key) else None)
        req.reg_at = (len(chain) + 1) * self.cfg.block_size

    def _resume_keys(self, req: Req, n_tokens: int) -> list:
        """Keys a preempted request looks up on resuming: its prompt blocks, then its own output
        blocks (request-unique keys), as far as its tokens so far fill whole blocks."""
        n_full = n_tokens // self.cfg.block_size
        return list(req.keys) + [(req.seq, i) for i in range(len(req.keys), n_full)]

    def kv_used_frac(self) -> float:
        """Share of the KV blocks in use."""
        return 1.0 - self.free_blocks / self.total_blocks if self.total_blocks else 0.0
