"""Adaptive verification inside the simulated engine: per step, the host's slot budget from the
confidences of one propose earlier, the GPU's allocation with the current ones, the verdicts folded
into the counters, and the verify-cost table vLLM profiles at start-up.

The rules themselves are simkit.engine.adaptive (pure NumPy); this module holds the per-request
state the engine needs around them (vLLM 0.34, docs/engine.md "Adaptive verification"):
- each request keeps the confidences of its latest draft (the GPU's, used to allocate) and of the
  draft before (the host's stale copy, used for the budget); a request that joins the batch, or
  comes back after a preemption, reads 1.0 until its drafts replace them
  (`adaptive_verification.py:300-303, 373-397`);
- the verify cost of b draft slots is a table over token counts, priced once per run by simkit's
  cost model on the batches vLLM times at start-up (`:305-348`, `build_cost_tables_from_curves`):
  a step function of the next profiled size up to the largest captured graph, interpolated above;
- pure decode steps replay the FULL graph of the smallest size >= their tokens on the finer
  varlen grid (`config/compilation.py:102-119`, `config/vllm.py:732-749`).
"""

from __future__ import annotations

import bisect

import numpy as np

from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.engine.adaptive import NUM_LEN_BUCKETS, AcceptanceCounters, allocate, len_buckets
from simkit.engine.cudagraph import decode_request_counts


def varlen_grid(max_tokens: int) -> list[int]:
    """vLLM 0.34's token counts of adaptive verification's decode graphs (off "interactivity"
    mode): 1, 2, 4, then four sizes per doubling from 8 to 1024, every 128 to 4096, every 256
    beyond, and max_tokens itself; all <= max_tokens."""
    if max_tokens <= 0:
        return []
    grid = {1, 2, 4, 8}
    low = 8
    while low < 1024:
        step = low // 4
        grid.update(range(low + step, 2 * low + 1, step))
        low *= 2
    grid.update(range(1024, 4096, 128))
    grid.update(range(4096, max_tokens, 256))
    return sorted({s for s in grid if s < max_tokens} | {max_tokens})


def profile_sizes(captured: list[int], max_tokens: int) -> list[int]:
    """The token counts vLLM times at start-up: every captured size, then past the largest one
    1.5x it and its doublings up to the token budget (`adaptive_verification.py:305-329`)."""
    sizes = set(captured)
    top = captured[-1] if captured else 0
    if top:
        tail = {min(top + top // 2, max_tokens)}
        size = top
        while size < max_tokens:
            size = min(size * 2, max_tokens)
            tail.add(size)
        sizes |= tail
    return sorted(s for s in sizes if s >= 1)


def cost_table(points: list[tuple[int, float]], limit: int, max_tokens: int) -> np.ndarray:
    """Cost (ms) of every token count 0..max_tokens from (size, ms) points, as vLLM builds it:
    costs made non-decreasing; up to the capture limit the cost of the next profiled size (graphs
    pad up to it); above the limit linear between the profiled sizes above it; past the last
    point, the last segment's slope."""
    xs = np.array([p[0] for p in points], np.float64)
    ys = np.maximum.accumulate(np.array([p[1] for p in points], np.float64))
    sizes = np.arange(max_tokens + 1)
    out = ys[np.minimum(np.searchsorted(xs, sizes, side="left"), len(xs) - 1)]
    if limit:
        smooth, above = sizes > limit, xs > limit
        if smooth.any() and above.any():
            out[smooth] = np.interp(sizes[smooth], xs[above], ys[above])
    if len(xs) > 1:
        after = sizes > xs[-1]
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        out[after] = ys[-1] + slope * (sizes[after] - xs[-1])
    return out


def budget_from_table(stale_confidences: np.ndarray, capacities: np.ndarray,
                      num_sampling_requests: int, num_non_draft_tokens: int,
                      verify_ms: np.ndarray) -> int:
    """simkit.engine.adaptive.choose_budget with drafter cost 0 and the verify cost read from a
    table over token counts (its last entry beyond it), vectorised: the same budget (tested)."""
    conf = np.asarray(stale_confidences, np.float32)
    survival = np.cumprod(conf.astype(np.float64), axis=1)
    valid = np.arange(conf.shape[1])[None, :] < np.asarray(capacities, np.int64)[:, None]
    scores = np.sort(survival[valid])[::-1]
    accepted = np.concatenate(([float(num_sampling_requests)],
                               num_sampling_requests + np.cumsum(scores)))
    tokens = np.minimum(np.arange(num_non_draft_tokens, num_non_draft_tokens + scores.size + 1),
                        verify_ms.size - 1)
    return int(np.argmax(accepted / verify_ms[tokens]))


# why vLLM will not start adaptive verification without CUDA graphs
NO_PROFILE = ("vLLM 0.34 cannot run adaptive verification with --cudagraph-mode NONE: it "
              "profiles its verify costs on the captured graph sizes at start-up and, with none, "
              "stops ('Adaptive verification could not profile step costs')")


def _kernels():
    """simkit.engine.adaptive_kernels, None where numba is not installed."""
    try:
        from simkit.engine import adaptive_kernels
    except ImportError:
        return None
    return adaptive_kernels


class AdaptiveVerifier:
    """One run's adaptive-verification state: the counters, each request's confidences and last
    draft's counter row, the verify-cost table, the varlen graph grid and the run's tallies.

    Per request (by seq): [confidence table of its current draft's propose step, that draft's
    counter row, its valid slots, the same three of the draft before (the host's stale copy),
    counter row of the draft awaiting its verdict (-1: none), its valid slots]. A propose only
    records which table and row; a step gathers its batch's rows at once (fillers masked)."""

    def __init__(self, k: int, source: list[int], match_len: list[int], cost_model, dispatcher,
                 max_num_seqs: int, max_num_batched_tokens: int, context_per_req: float,
                 drafter: str, compiled: bool = True, full_decode: bool = True) -> None:
        """`compiled`: the per-step work in adaptive_kernels (numba) when it imports, else the
        NumPy rules (the same numbers, tested). `full_decode`: the cudagraph mode captures FULL
        decode graphs (FULL, FULL_AND_PIECEWISE), so decode steps replay the varlen grid.
        ValueError when nothing is captured to profile the verify cost on (vLLM refuses to
        start then)."""
        self.k = k
        self.counters = AcceptanceCounters(k)
        src = np.asarray(source, np.int64)
        lb = len_buckets(np.asarray(match_len, np.int64))
        self.buckets = (src * NUM_LEN_BUCKETS + lb).tolist()    # counter row of each table row
        self.state: dict[int, list] = {}
        self.pending: list[tuple[int, int, int, int]] = []   # verdicts not yet folded in
        q = 1 + k
        max_reqs = max(decode_request_counts(max_num_seqs, k, max_num_batched_tokens), default=0)
        self.grid = (varlen_grid(min(max_reqs * q, max_num_batched_tokens)) if full_decode
                     else [])
        captured = sorted(set(self.grid) | set(getattr(dispatcher, "sizes", ())))
        if not captured:
            raise ValueError(NO_PROFILE)
        limit = captured[-1]
        points = [(n, self._forward_ms(cost_model, dispatcher, n, max_num_seqs, context_per_req,
                                       drafter, limit, full_decode))
                  for n in profile_sizes(captured, max_num_batched_tokens)]
        self.verify_ms = cost_table(points, limit, max_num_batched_tokens)
        # what a request with no draft yet reads: 1.0 (a table shaped like the counters' rows)
        self.ones = np.ones((2 * NUM_LEN_BUCKETS, k), np.float32)
        self.pos = np.arange(k)
        self.kernels = _kernels() if compiled else None
        self.table = self._confidence_table()
        # tallies over the run
        self.decode_steps = 0          # decode request-steps that had draft slots
        self.admitted = 0              # slots admitted over them
        self.capacity = 0              # slots scheduled over them (K, or fewer near max_model_len)

    @staticmethod
    def _forward_ms(cost_model, dispatcher, n: int, max_num_seqs: int, context: float,
                    drafter: str, limit: int, full_decode: bool) -> float:
        """Forward time of a timed start-up batch of n tokens (one per request up to
        max_num_seqs, each attending `context` tokens): FULL graph up to the capture limit,
        else the token-keyed dispatch."""
        reqs = min(n, max_num_seqs)
        if n <= limit and full_decode:
            mode, padded = GraphMode.FULL, n
        else:
            mode, padded = dispatcher.dispatch(n, reqs, n, reqs)
        desc = BatchDescriptor(reqs, n, padded, 0, 0, reqs, 0, 0, 0, int(reqs * context) + n,
                               mode, False, drafter)
        return cost_model.step_cost(desc).device_s * 1e3

    def _confidence_table(self) -> np.ndarray:
        """Every counter row's confidences now: (accepted + 1) / (observed + 2), float32."""
        c = self.counters.counts
        if self.kernels is not None:
            out = np.empty(c.shape[:2], np.float32)
            self.kernels.confidence_table(c, out)
            return out
        return ((c[:, :, 0].astype(np.float32) + np.float32(1.0))
                / (c[:, :, 1].astype(np.float32) + np.float32(2.0)))

    # -- per request ------------------------------------------------------------------------
    def forget(self, seq: int) -> None:
        """The request left the batch (finished or preempted): a return starts afresh."""
        self.state.pop(seq, None)

    def observe(self, seq: int, accepted: int, verified: int) -> None:
        """The verdict on the request's last draft (accepted slots, slots verified), folded into
        the counters at the next propose step (vLLM's observe kernel opens the propose)."""
        st = self.state.get(seq)
        if st is not None and st[6] >= 0:
            self.pending.append((st[6], st[7], accepted, verified))
            st[6] = -1

    def step(self) -> None:
        """A propose step opens: fold the step's verdicts in, count the step (the counters halve
        every 1,024), and refresh the confidences the new drafts read."""
        kern = self.kernels
        if self.pending:
            obs = np.array(self.pending, np.int64)
            self.pending = []
            if kern is not None:
                kern.fold(self.counters.counts, obs)
            else:
                bucket, valid, acc, ver = obs[:, 0:1], obs[:, 1:2], obs[:, 2:3], obs[:, 3:4]
                pos = self.pos[None, :]
                seen = (pos <= acc) & (pos < ver) & (pos < valid)
                rows, cols = np.nonzero(seen)
                counts = self.counters.counts
                np.add.at(counts[:, :, 1], (bucket[rows, 0], cols), 1)
                hit = cols < acc[rows, 0]
                np.add.at(counts[:, :, 0], (bucket[rows[hit], 0], cols[hit]), 1)
        self.counters.tick()
        self.table = self._confidence_table()

    def propose(self, seq: int, row: int, drafted: int) -> None:
        """A new draft for request `seq` at table row `row` with `drafted` valid slots: its
        confidences from the counters now; the previous ones become the host's stale copy."""
        bucket = self.buckets[row] if drafted > 0 else -1
        st = self.state.get(seq)
        if st is None:
            self.state[seq] = [self.table, max(bucket, 0), drafted, self.ones, 0, self.k,
                               bucket, drafted]
        else:
            st[3], st[4], st[5] = st[0], st[1], st[2]
            st[0], st[1], st[2], st[6], st[7] = self.table, max(bucket, 0), drafted, bucket, drafted

    # -- per step ---------------------------------------------------------------------------
    def admit(self, seqs: list[int], capacities: list[int], num_sampling: int,
              num_non_draft_tokens: int) -> list[int]:
        """Admitted slots of each decode request this step: the budget from the stale
        confidences, then the allocation with the current ones."""
        fresh = [self.ones, 0, self.k] * 2
        tables: dict[int, int] = {}          # id(confidence table) -> its index in `stack`
        stack: list[np.ndarray] = []
        which: list[int] = []                # per request: cur table, row, valid, stale ...
        get, state = tables.get, self.state
        for seq in seqs:
            st = state.get(seq) or fresh
            a, b = get(id(st[0])), get(id(st[3]))
            if a is None:
                a = tables[id(st[0])] = len(stack)
                stack.append(st[0])
            if b is None:
                b = tables[id(st[3])] = len(stack)
                stack.append(st[3])
            which += (a, st[1], st[2], b, st[4], st[5])
        big = stack[0][None] if len(stack) == 1 else np.stack(stack)
        cap = np.asarray(capacities, np.int64)
        if self.kernels is not None:
            admitted = np.empty(len(seqs), np.int64)
            self.kernels.admit(big, np.array(which, np.int64).reshape(-1, 6),
                               cap, num_sampling, num_non_draft_tokens, self.verify_ms, admitted)
            return self._tally(cap, admitted)
        idx = np.array(which, np.int64).reshape(len(seqs), 2, 3)
        rows = big[idx[:, :, 0], idx[:, :, 1]]                       # (requests, 2, K)
        rows = np.where(self.pos[None, None, :] < idx[:, :, 2:3], rows, np.float32(0.0))
        cur, stale = rows[:, 0], rows[:, 1]
        budget = budget_from_table(stale, cap, num_sampling, num_non_draft_tokens,
                                   self.verify_ms)
        return self._tally(cap, allocate(cur, cap, budget))

    def _tally(self, cap: np.ndarray, admitted: np.ndarray) -> list[int]:
        """Count a step's admitted and scheduled slots; the admitted ones as a list."""
        out = admitted.tolist()
        self.decode_steps += len(out)
        self.admitted += sum(out)
        self.capacity += int(cap.sum())
        return out

    def dispatch(self, num_tokens: int) -> tuple[GraphMode, int] | None:
        """A pure decode step's varlen FULL graph (mode, padded tokens), None above the grid."""
        grid = self.grid
        if not grid or num_tokens > grid[-1] or num_tokens <= 0:
            return None
        return GraphMode.FULL, grid[bisect.bisect_left(grid, num_tokens)]

    def summary(self) -> dict:
        """The run's tallies: mean admitted slots per decode request-step and the budget's
        share of the K slots scheduled."""
        return {"mean_admitted_slots": self.admitted / self.decode_steps if self.decode_steps
                else 0.0,
                "budget_share_of_k": self.admitted / self.capacity if self.capacity else 0.0,
                "decode_request_steps": self.decode_steps}


__all__ = ["AdaptiveVerifier", "budget_from_table", "cost_table", "profile_sizes", "varlen_grid"]
