"""The suffix drafter inside the engine loop: drafts proposed step by step on the simulated
engine's own trajectory, the way vLLM's suffix proposer drives arctic-inference's cache.

Why: an acceptance table fixes, ahead of time, what the global tree holds when request r drafts
at output position t. That holds only for one interleaving of the in-flight requests (one token
per tick for "concurrent"). When a repeated prompt runs in the same batch as its earlier copy,
the real interleaving decides everything: the repeat accepts long drafts, catches up with the
copy and from then on finds only what the copy has produced so far. vLLM's proposer, after each
step and for every request of the batch in batch order, (1) starts the request on first sight
(a local tree over its prompt, a global slot), (2) appends the tokens sampled this step, to its
local tree and to the global tree, (3) drafts from the last max_tree_depth context tokens;
requests that left the batch are stopped (their response stays in the global tree). On the
recorded vLLM 0.33 fleet runs, drafting this way inside the simulated engine gives each replica's
accepted tokens per step within 1.5 % of vLLM's count (docs/fleet.md "Validation").

This drafter makes the same calls, on the steps the engine simulates: the scheduler calls
`sampled` for every request that produced tokens in a step (in the step's batch order), then
`draft` for those still running, and `stop` when a request finishes or is preempted. It needs the
requests' token ids, so it runs only where they are in memory (a measured run's requests rebuilt
from the raw traces); shipped profiles carry tables only. Pure Python (the reference cache).
"""

from __future__ import annotations

from typing import Hashable, Sequence

from simkit.drafters.suffix.cache import SuffixCache, SuffixParams


class InLoopSuffix:
    """One engine's suffix cache, fed by the engine step by step (a fresh one per simulation)."""

    def __init__(self, requests: Sequence, kmax: int, params: SuffixParams | None = None) -> None:
        """`requests`: the workload's requests in workload order (prompt_ids, output_ids)."""
        self.kmax = kmax
        self.cache = SuffixCache(params or SuffixParams())
        self.requests = requests
        self._outs: dict[int, list[int]] = {}

    def _out(self, idx: int) -> list[int]:
        out = self._outs.get(idx)
        if out is None:
            out = self._outs[idx] = [int(x) for x in self.requests[idx].output_ids]
        return out

    def sampled(self, key: Hashable, idx: int, t0: int, t1: int) -> None:
        """Request `key` (workload request `idx`) produced output tokens t0 .. t1-1 this step.
        First sight (or the first step after a preemption) starts it, as vLLM does: a local
        tree over the prompt alone, and a fresh global slot (an earlier slot of `key` evicted)."""
        cache = self.cache
        if key not in cache.local:
            cache.start_request(key, self.requests[idx].prompt_ids)
        cache.add_active_response(key, self._out(idx)[t0:t1])

    def draft(self, key: Hashable, idx: int, t: int) -> tuple[list[int], list[int]]:
        """(d, a) for K = 1..kmax: the draft lengths at output position t and how many of each
        the trace's next tokens accept (greedy verification of the forced outputs)."""
        return self.cache.draft_all(key, self.kmax, self._out(idx)[t:t + self.kmax])

    def stop(self, key: Hashable) -> None:
        """Request `key` left the batch (finished or preempted); its response stays cached."""
        if key in self.cache.local:
            self.cache.stop_request(key)


__all__ = ["InLoopSuffix"]
