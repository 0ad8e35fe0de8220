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
from the raw traces); shipped profiles carry tables only.

`InLoopSuffix` drives the pure-Python reference cache; `CompiledInLoopSuffix` makes the same calls
on the compiled forest (kernels_in_loop.py), the same drafts byte for byte
(tests/slow/test_compiled_in_loop.py) in a fraction of the time; `in_loop_suffix` picks the
compiled one unless SIMKIT_PURE_DRAFTER=1, as the table builds do (replay.resolve_engine).
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


class CompiledInLoopSuffix:
    """InLoopSuffix on the compiled forest: the same calls, the same drafts, the global FIFO of
    cached responses kept here (starts are rare; the per-token work is in the kernels)."""

    def __init__(self, requests: Sequence, kmax: int, params: SuffixParams | None = None) -> None:
        """`requests`: the workload's requests in workload order (prompt_ids, output_ids)."""
        import numpy as np

        from simkit.drafters.suffix import compiled

        compiled.require_numba_installed()       # before the kernels' imports (numba's)
        from simkit.drafters.suffix.core import new_forest
        from simkit.drafters.suffix.kernels import GROOT, _scratch
        from simkit.drafters.suffix.kernels_in_loop import NCOLS
        from simkit.drafters.suffix.tree import f32, spec_cap

        compiled._require_numba()
        p = params or SuffixParams()
        if p.max_cached_requests > 0x7FFFFFFF:
            raise ValueError("max_cached_requests must be at most 2^31")
        self.kmax, self.params, self.requests = kmax, p, requests
        self.flat, self.pbase, self.plen, self.olen = compiled.pack(
            requests, np.ones(len(requests), bool))
        self.T = new_forest(*compiled.FOREST_SIZES)
        from simkit.drafters.suffix.core import new_node

        assert new_node(self.T, 0, 0, 0, 0, -1) == GROOT
        self.D = np.zeros(4, np.int64)
        self.SG = np.zeros((max(8, len(requests)), NCOLS), np.int64)
        depth = p.max_tree_depth
        self.LACT = np.zeros((len(self.SG), depth), np.int64)
        self.GACT = np.zeros((len(self.SG), depth), np.int64)
        self.nseg = 0
        self.caps = np.array([spec_cap(m, p.max_spec_factor, p.max_spec_offset)
                              for m in range(depth + 1)], np.int64)
        self.minp = f32(p.min_token_prob)
        self.S = _scratch(kmax, depth)
        self.dbuf = np.zeros(kmax, np.int64)
        self.abuf = np.zeros(kmax, np.int64)
        self.local: dict[Hashable, int] = {}        # active request -> its segment
        self.cached: dict[Hashable, int] = {}       # cached response (FIFO order) -> its segment

    def _segment(self, idx: int, t0: int) -> int:
        """A new segment for workload request idx started at output position t0: its prompt and
        output from t0, contiguous in flat (t0 = 0: the layout made at the start)."""
        import numpy as np

        from simkit.drafters.suffix import kernels_in_loop as K

        s = self.nseg
        self.nseg += 1
        if s == len(self.SG):
            grow = lambda a: np.concatenate([a, np.zeros_like(a)])  # noqa: E731
            self.SG, self.LACT, self.GACT = grow(self.SG), grow(self.LACT), grow(self.GACT)
        plen, olen = int(self.plen[idx]), int(self.olen[idx])
        if t0 == 0:
            base = int(self.pbase[idx])
        else:            # a restart after a preemption: a fresh copy of prompt + output[t0:]
            base = len(self.flat)
            out = self.flat[self.pbase[idx] + plen + t0:self.pbase[idx] + plen + olen]
            self.flat = np.concatenate([self.flat, self.flat[self.pbase[idx]:self.pbase[idx] + plen],
                                        out])
            if len(self.flat) >= 1 << 31:
                raise ValueError("the compiled in-loop drafter holds at most 2^31 tokens")
        row = self.SG[s]
        row[:] = 0
        row[K.BASE], row[K.PLEN], row[K.OUT], row[K.T0] = base, plen, base + plen, t0
        row[K.NOUT] = olen - t0
        return s

    def sampled(self, key: Hashable, idx: int, t0: int, t1: int) -> None:
        """As InLoopSuffix.sampled: first sight (or the first step after a preemption) starts the
        request, a local tree over its prompt and a fresh global slot (its earlier one evicted)."""
        from simkit.drafters.suffix import kernels_in_loop as K

        s = self.local.get(key)
        if s is None:
            s = self.local[key] = self._segment(idx, t0)
            self.T = K.start(self.T, self.flat, self.SG, self.LACT, s, self.params.max_tree_depth)
            maxc = self.params.max_cached_requests
            if maxc != 0:
                old = self.cached.pop(key, None)
                if old is not None:
                    K.evict(self.T, self.flat, self.SG, self.D, old)
                self.cached[key] = s
                self.SG[s, K.GSLOT] = 1
                while maxc > 0 and len(self.cached) > maxc:
                    first = next(k for k, v in self.cached.items() if v != s)
                    K.evict(self.T, self.flat, self.SG, self.D, self.cached.pop(first))
        row = self.SG[s]
        if t0 != row[K.T0] + row[K.NLT] - row[K.PLEN] or t1 > row[K.T0] + row[K.NOUT]:
            raise ValueError(f"request {key!r}: tokens {t0}..{t1} do not continue its output")
        self.T = K.add(self.T, self.flat, self.SG, self.LACT, self.GACT, self.D, s, t1 - t0,
                       self.params.max_tree_depth)

    def draft(self, key: Hashable, idx: int, t: int) -> tuple[list[int], list[int]]:
        """(d, a) for K = 1..kmax at output position t, as InLoopSuffix.draft."""
        from simkit.drafters.suffix import kernels_in_loop as K

        K.draft(self.T, self.flat, self.SG, self.LACT, self.GACT, self.D, self.local[key], t,
                self.caps, self.minp, self.kmax, self.params.max_tree_depth, self.dbuf, self.abuf,
                self.S)
        return self.dbuf.tolist(), self.abuf.tolist()

    def stop(self, key: Hashable) -> None:
        """Request `key` left the batch (finished or preempted); its response stays cached."""
        from simkit.drafters.suffix import kernels_in_loop as K

        s = self.local.pop(key, None)
        if s is not None:
            K.stop(self.T, self.SG, s)


def in_loop_suffix(requests: Sequence, kmax: int, params: SuffixParams | None = None):
    """A fresh in-loop suffix drafter: the compiled one, or the pure-Python reference when
    SIMKIT_PURE_DRAFTER=1 (simkit.drafters.suffix.replay.resolve_engine)."""
    from simkit.drafters.suffix.replay import resolve_engine

    cls = InLoopSuffix if resolve_engine() == "python" else CompiledInLoopSuffix
    return cls(requests, kmax, params)


__all__ = ["CompiledInLoopSuffix", "InLoopSuffix", "in_loop_suffix"]
