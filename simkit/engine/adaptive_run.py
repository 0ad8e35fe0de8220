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
from simkit.engine.adaptive import AcceptanceCounters, allocate, choose_budget
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


class AdaptiveVerifier:
    """One run's adaptive-verification state: the counters, each request's confidences and last
    draft's counter row, the verify-cost table, the varlen graph grid and the run's tallies."""

    def __init__(self, k: int, source: list[int], match_len: list[int], cost_model, dispatcher,
                 max_num_seqs: int, max_num_batched_tokens: int, context_per_req: float,
                 drafter: str) -> None:
        self.k = k
        self.source, self.match_len = source, match_len
        self.counters = AcceptanceCounters(k)
        self.state: dict[int, list] = {}     # seq -> [current conf, stale conf, row, num_valid]
        q = 1 + k
        max_reqs = max(decode_request_counts(max_num_seqs, k, max_num_batched_tokens), default=0)
        self.grid = varlen_grid(min(max_reqs * q, max_num_batched_tokens))
        captured = sorted(set(self.grid) | set(getattr(dispatcher, "sizes", ())))
        limit = captured[-1] if captured else 0
        points = [(n, self._forward_ms(cost_model, dispatcher, n, max_num_seqs, context_per_req,
                                       drafter, limit))
                  for n in profile_sizes(captured, max_num_batched_tokens)]
        self.verify_ms = cost_table(points, limit, max_num_batched_tokens).tolist()
        self.ones = np.ones(k, np.float32)
        # tallies over the run
        self.decode_steps = 0          # decode request-steps that had draft slots
        self.admitted = 0              # slots admitted over them
        self.capacity = 0              # slots scheduled over them (K, or fewer near max_model_len)

    @staticmethod
    def _forward_ms(cost_model, dispatcher, n: int, max_num_seqs: int, context: float,
                    drafter: str, limit: int) -> float:
        """Forward time of a timed start-up batch of n tokens (one per request up to
        max_num_seqs, each attending `context` tokens): FULL graph up to the capture limit,
        else the token-keyed dispatch."""
        reqs = min(n, max_num_seqs)
        if n <= limit:
            mode, padded = GraphMode.FULL, n
        else:
            mode, padded = dispatcher.dispatch(n, reqs, n, reqs)
        desc = BatchDescriptor(reqs, n, padded, 0, 0, reqs, 0, 0, 0, int(reqs * context) + n,
                               mode, False, drafter)
        return cost_model.step_cost(desc).device_s * 1e3

    def verify_cost(self, tokens: int) -> float:
        """Profiled verify cost (ms) of a step of `tokens` target tokens."""
        table = self.verify_ms
        return table[tokens] if tokens < len(table) else table[-1]

    # -- per request ------------------------------------------------------------------------
    def forget(self, seq: int) -> None:
        """The request left the batch (finished or preempted): a return starts afresh."""
        self.state.pop(seq, None)

    def propose(self, seq: int, row: int, drafted: int) -> None:
        """A new draft for request `seq` at table row `row` with `drafted` valid slots: its
        confidences from the counters now; the previous ones become the host's stale copy."""
        st = self.state.get(seq)
        prev = self.ones if st is None else st[0]
        if drafted > 0:
            bucket = AcceptanceCounters.bucket(self.source[row], self.match_len[row])
            conf = self.counters.confidences(self.source[row], self.match_len[row], drafted)
        else:
            bucket, conf = -1, np.zeros(self.k, np.float32)
        self.state[seq] = [conf, prev, bucket, drafted]

    def observe(self, seq: int, accepted: int, verified: int) -> None:
        """Fold the verdict on the request's last draft in (accepted slots, slots verified)."""
        st = self.state.get(seq)
        if st is not None:
            self.counters.observe(st[2], st[3], accepted, verified)
            st[2] = -1

    def tick(self) -> None:
        """One propose step (the counters halve every 1,024)."""
        self.counters.tick()

    # -- per step ---------------------------------------------------------------------------
    def admit(self, seqs: list[int], capacities: list[int], num_sampling: int,
              num_non_draft_tokens: int) -> list[int]:
        """Admitted slots of each decode request this step: the budget from the stale
        confidences, then the allocation with the current ones."""
        k = self.k
        cur = np.empty((len(seqs), k), np.float32)
        stale = np.empty((len(seqs), k), np.float32)
        for i, seq in enumerate(seqs):
            st = self.state.get(seq)
            if st is None:
                cur[i] = stale[i] = self.ones
            else:
                cur[i], stale[i] = st[0], st[1]
        cap = np.asarray(capacities, np.int64)
        budget = choose_budget(stale, cap, num_sampling, num_non_draft_tokens, 0.0,
                               self.verify_cost)
        admitted = allocate(cur, cap, budget)
        self.decode_steps += len(seqs)
        self.admitted += int(admitted.sum())
        self.capacity += int(cap.sum())
        return admitted.tolist()

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


__all__ = ["AdaptiveVerifier", "cost_table", "profile_sizes", "varlen_grid"]
