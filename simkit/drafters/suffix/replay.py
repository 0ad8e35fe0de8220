"""The suffix drafter's replay (simkit.drafters.base.Drafter "suffix"): every request through
SuffixCache in the order a server would have served them, d(t, K) and a(t, K) for all K at once.

Orderings (docs/acceptance.md says what each approximates):
- "sequential": requests one after another; each response is complete in the global tree before the
  next request starts. Exact for that order, for every K policy.
- "concurrent": C requests in flight; they advance one output token per tick in round-robin order and
  a finished request's slot goes to the next request. The global tree at (r, t) holds the other
  in-flight responses as far as this interleaving has them; the real interleaving depends on K and
  acceptance, which a table shared by all K cannot follow.

Engines (same tables byte for byte, tests/slow/test_compiled_drafter.py): "compiled" (default; numba
kernels in simkit.drafters.suffix.compiled) and "python" (the reference SuffixCache). Force the
reference with engine="python" or the environment variable SIMKIT_PURE_DRAFTER=1.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from simkit.choices import Ordering
from simkit.drafters.base import ENGINES, SUFFIX_DRAFTER, Drafter, register, resolve_engine
from simkit.drafters.suffix.cache import SuffixCache, SuffixParams

@register
class SuffixDrafter(Drafter):
    """Suffix decoding (arctic-inference's SuffixDecodingCache as vLLM 0.26 drives it): a local
    tree per prompt and a global tree of earlier responses, so its drafts remember history."""

    name = SUFFIX_DRAFTER
    default_k = 24             # vLLM: num_speculative_tokens defaults to the tree depth when unset
    kpad_label = "kpad"
    remembers_history = True

    def default_params(self) -> SuffixParams:
        """vLLM's suffix-decoding defaults."""
        return SuffixParams()

    def replay(self, requests: Sequence, params: Any, kmax: int, offsets: np.ndarray,
               accepted: np.ndarray, drafted: np.ndarray, *, ordering: Ordering, concurrency: int,
               progress: Callable[[int], None] | None, engine: str | None,
               prelude: Sequence) -> Ordering:
        """Sequential or concurrent replay through SuffixCache (see the module docstring)."""
        if ordering is Ordering.SEQUENTIAL:
            replay_sequential(requests, params, kmax, offsets, accepted, drafted, progress,
                              engine=engine, prelude=prelude)
        else:
            replay_concurrent(requests, params, kmax, offsets, accepted, drafted, concurrency,
                              progress, engine=engine, prelude=prelude)
        return ordering




def insert_prelude(cache: SuffixCache, prelude: Sequence) -> None:
    """Responses served before the replay enter the global tree in order (FIFO eviction as usual)."""
    for j, out in enumerate(prelude):
        if len(out):
            cache.insert_response(("prelude", j), [int(x) for x in out])


def replay_sequential(requests: Sequence, params: SuffixParams, kmax: int,
                      offsets: np.ndarray | None, acc: np.ndarray, dr: np.ndarray,
                      progress: Callable[[int], None] | None,
                      row_of: dict[int, int] | None = None, *, engine: str | None = None,
                      prelude: Sequence = ()) -> None:
    """Sequential replay; with row_of (request -> first row), requests not in it are inserted only.

    Rows of request r start at offsets[r] (row_of[r] with row_of). `engine`: see resolve_engine.
    `prelude`: responses inserted before the first request (compiled: as insert-only requests)."""
    if resolve_engine(engine) == "compiled":
        from simkit.drafters.suffix.compiled import replay_sequential as compiled
        from simkit.drafters.suffix.compiled import with_prelude

        if row_of is None:
            rowbase = np.asarray(offsets[:len(requests)], np.int64)
        else:
            rowbase = np.full(len(requests), -1, np.int64)
            for r, row in row_of.items():
                if 0 <= r < len(requests):
                    rowbase[r] = row
        if len(prelude):
            requests, rowbase = with_prelude(prelude, requests, rowbase)
        compiled(requests, params, kmax, rowbase, acc, dr,
                 _skip_prelude_progress(progress, prelude))
        return
    cache = SuffixCache(params)
    insert_prelude(cache, prelude)
    for r, req in enumerate(requests):
        out = [int(x) for x in req.output_ids]
        if not out:
            continue
        if row_of is not None and r not in row_of:
            cache.insert_response(r, out)
            if progress:
                progress(len(out))
            continue
        cache.start_request(r, req.prompt_ids)
        cache.add_active_response(r, out[:1])
        base = int(offsets[r]) if row_of is None else row_of[r]
        for t in range(1, len(out)):
            d, a = cache.draft_all(r, kmax, out[t:t + kmax])
            dr[base + t] = d
            acc[base + t] = a
            cache.add_active_response(r, out[t:t + 1])
        cache.stop_request(r)
        if progress:
            progress(len(out))


def _skip_prelude_progress(progress: Callable[[int], None] | None,
                           prelude: Sequence) -> Callable[[int], None] | None:
    """A progress callback that ignores the prelude's insert-only tokens (counted in no total)."""
    if progress is None or not len(prelude):
        return progress
    left = [sum(1 for o in prelude if len(o))]

    def step(n: int) -> None:
        if left[0] > 0:
            left[0] -= 1
            return
        progress(n)
    return step


def replay_concurrent(requests: Sequence, params: SuffixParams, kmax: int, offsets: np.ndarray,
                      acc: np.ndarray, dr: np.ndarray, concurrency: int,
                      progress: Callable[[int], None] | None, *, engine: str | None = None,
                      prelude: Sequence = ()) -> None:
    """Round-robin replay of `concurrency` in-flight requests (see the module docstring), after
    the `prelude` responses entered the global tree."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if resolve_engine(engine) == "compiled":
        from simkit.drafters.suffix.compiled import replay_concurrent as compiled

        compiled(requests, params, kmax, np.asarray(offsets[:len(requests)], np.int64), acc, dr,
                 concurrency, progress, prelude)
        return
    cache = SuffixCache(params)
    insert_prelude(cache, prelude)
    queue = deque(r for r, req in enumerate(requests) if len(req.output_ids))
    outs: dict[int, list[int]] = {}
    active: list[list[int]] = []          # [request, t]

    def start(r: int) -> None:
        outs[r] = [int(x) for x in requests[r].output_ids]
        cache.start_request(r, requests[r].prompt_ids)
        cache.add_active_response(r, outs[r][:1])
        active.append([r, 1])

    while queue and len(active) < concurrency:
        start(queue.popleft())
    while active:
        still: list[list[int]] = []
        for slot in active:
            r, t = slot
            out = outs[r]
            if t < len(out):
                d, a = cache.draft_all(r, kmax, out[t:t + kmax])
                base = int(offsets[r])
                dr[base + t] = d
                acc[base + t] = a
                cache.add_active_response(r, out[t:t + 1])
                slot[1] = t + 1
            if slot[1] >= len(out):
                cache.stop_request(r)
                del outs[r]
                if progress:
                    progress(len(out))
            else:
                still.append(slot)
        active = still
        while queue and len(active) < concurrency:
            start(queue.popleft())


__all__ = ["ENGINES", "SuffixDrafter", "insert_prelude", "replay_concurrent", "replay_sequential",
           "resolve_engine"]
