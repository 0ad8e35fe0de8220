"""Build acceptance tables a(t, K), d(t, K) for K = 1..kmax by replaying requests through a drafter.

Orderings (docs/acceptance.md says what each approximates):
- "sequential": requests one after another; each response is complete in the global tree before the
  next request starts. Exact for that order, for every K policy.
- "concurrent": C requests in flight; they advance one output token per tick in round-robin order and
  a finished request's slot goes to the next request. The global tree at (r, t) holds the other
  in-flight responses as far as this interleaving has them; the real interleaving depends on K and
  acceptance, which a table shared by all K cannot follow.

Engines (same tables byte for byte, tests/test_compiled_drafter.py): "compiled" (default; numba
kernels in simkit.drafters.suffix_compiled) and "python" (the reference SuffixCache). Force the
reference with engine="python" or the environment variable SIMKIT_PURE_DRAFTER=1.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.drafters.ngram import NgramParams, ngram_draft_all_positions
from simkit.drafters.suffix import SuffixCache, SuffixParams

ORDERINGS = ("sequential", "concurrent")
ENGINES = ("compiled", "python")


def resolve_engine(engine: str | None = None) -> str:
    """The suffix replay engine: `engine` if given, else "python" when SIMKIT_PURE_DRAFTER=1, else
    "compiled"."""
    if engine is None:
        engine = "python" if os.environ.get("SIMKIT_PURE_DRAFTER", "") == "1" else "compiled"
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    return engine


def _alloc(requests: Sequence, kmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    plen = np.array([len(r.prompt_ids) for r in requests], dtype=np.int32)
    olen = np.array([len(r.output_ids) for r in requests], dtype=np.int32)
    offsets = np.zeros(len(requests) + 1, dtype=np.int64)
    np.cumsum(olen, out=offsets[1:])
    rows = int(offsets[-1])
    return plen, olen, offsets, np.zeros((rows, kmax), np.uint8), np.zeros((rows, kmax), np.uint8)


def build_table(requests: Sequence, *, drafter: str = "suffix", params=None, kmax: int = 16,
                ordering: str = "sequential", concurrency: int = 32, model: str = "",
                corpus: str = "", progress: Callable[[int], None] | None = None,
                engine: str | None = None, prelude: Sequence = ()) -> AcceptanceTable:
    """Acceptance table for `requests` (objects with int prompt_ids / output_ids arrays).

    `progress(n)` is called with the number of output tokens just processed. `engine`: suffix
    replay engine, see resolve_engine (the n-gram drafter has one engine). `prelude`: responses
    (token-id sequences) the server produced before these requests, inserted into the global tree
    first in this order (suffix only; simkit.acceptance.history builds them from a History).
    """
    if not 1 <= kmax <= 255:
        raise ValueError("kmax must be in 1..255 (uint8 table)")
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering must be one of {ORDERINGS}")
    plen, olen, offsets, acc, dr = _alloc(requests, kmax)
    if drafter == "suffix":
        params = params or SuffixParams()
        if ordering == "sequential":
            _suffix_sequential(requests, params, kmax, offsets, acc, dr, progress, engine=engine,
                               prelude=prelude)
        else:
            _suffix_concurrent(requests, params, kmax, offsets, acc, dr, concurrency, progress,
                               engine=engine, prelude=prelude)
        pdict = params.as_dict()
    elif drafter == "ngram":
        params = params or NgramParams()     # drafts depend on the request alone: no prelude
        for r, req in enumerate(requests):       # n-gram drafts depend on the request alone
            d, a = ngram_draft_all_positions(req.prompt_ids, req.output_ids, kmax, params)
            lo, hi = int(offsets[r]), int(offsets[r + 1])
            dr[lo:hi] = d
            acc[lo:hi] = a
            if progress:
                progress(len(req.output_ids))
        pdict = params.as_dict()
        ordering = "sequential"
    else:
        raise ValueError(f"unknown drafter {drafter!r} (suffix, ngram)")
    if ordering == "concurrent":
        pdict = {**pdict, "concurrency": concurrency}
    return AcceptanceTable(model=model, corpus=corpus, drafter=drafter, params=pdict, kmax=kmax,
                           ordering=ordering, prompt_len=plen, output_len=olen, offsets=offsets,
                           accepted=acc, drafted=dr)


def build_warm_table(requests: Sequence, sample: Sequence[int], *, params: SuffixParams | None = None,
                     kmax: int = 16, model: str = "", corpus: str = "",
                     progress: Callable[[int], None] | None = None,
                     engine: str | None = None) -> AcceptanceTable:
    """Suffix table of requests[sample] exactly as a sequential replay of ALL `requests` gives them.

    Walks `requests` in order; a request outside `sample` only enters the global tree (FIFO eviction
    at max_cached_requests as in the full replay), with no local tree and no drafting; a sampled
    request is drafted at every position as in build_table. Rows equal the sampled requests' rows of
    build_table(requests) (tested), at the cost of inserting the other responses only.
    `progress(n)` gets the output tokens of each request walked (inserted or drafted). `engine`: see
    resolve_engine.
    """
    if not 1 <= kmax <= 255:
        raise ValueError("kmax must be in 1..255 (uint8 table)")
    idx = [int(i) for i in sample]
    if any(b <= a for a, b in zip(idx, idx[1:])) or (idx and not 0 <= idx[0] <= idx[-1] < len(requests)):
        raise ValueError("sample must be strictly increasing indices into requests")
    params = params or SuffixParams()
    chosen = [requests[i] for i in idx]
    plen, olen, offsets, acc, dr = _alloc(chosen, kmax)
    row_of = {r: int(offsets[j]) for j, r in enumerate(idx)}
    last = idx[-1] if idx else -1
    _suffix_sequential(requests[:last + 1], params, kmax, None, acc, dr, progress, row_of, engine=engine)
    pdict = {**params.as_dict(), "tree": "warm"}
    return AcceptanceTable(model=model, corpus=corpus, drafter="suffix", params=pdict, kmax=kmax,
                           ordering="sequential", prompt_len=plen, output_len=olen, offsets=offsets,
                           accepted=acc, drafted=dr)


@dataclass(frozen=True)
class _Response:
    """A prelude response as a request the replay only inserts (no prompt, never drafted)."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def _insert_prelude(cache: SuffixCache, prelude: Sequence) -> None:
    """Responses served before the replay enter the global tree in order (FIFO eviction as usual)."""
    for j, out in enumerate(prelude):
        if len(out):
            cache.insert_response(("prelude", j), [int(x) for x in out])


def _suffix_sequential(requests, params, kmax, offsets, acc, dr, progress, row_of=None, *,
                       engine: str | None = None, prelude: Sequence = ()) -> None:
    """Sequential replay; with row_of (request -> first row), requests not in it are inserted only.

    Rows of request r start at offsets[r] (row_of[r] with row_of). `engine`: see resolve_engine.
    `prelude`: responses inserted before the first request (compiled: as insert-only requests)."""
    if resolve_engine(engine) == "compiled":
        from simkit.drafters.suffix_compiled import replay_sequential

        if row_of is None:
            rowbase = np.asarray(offsets[:len(requests)], np.int64)
        else:
            rowbase = np.full(len(requests), -1, np.int64)
            for r, row in row_of.items():
                if 0 <= r < len(requests):
                    rowbase[r] = row
        if len(prelude):
            empty = np.zeros(0, np.int32)
            pre = [_Response(empty, np.asarray(o, np.int32)) for o in prelude]
            requests = pre + list(requests)
            rowbase = np.concatenate([np.full(len(pre), -1, np.int64), rowbase])
        replay_sequential(requests, params, kmax, rowbase, acc, dr,
                          _skip_prelude_progress(progress, prelude))
        return
    cache = SuffixCache(params)
    _insert_prelude(cache, prelude)
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


def _skip_prelude_progress(progress, prelude: Sequence):
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


def _suffix_concurrent(requests, params, kmax, offsets, acc, dr, concurrency, progress, *,
                       engine: str | None = None, prelude: Sequence = ()) -> None:
    """Round-robin replay of `concurrency` in-flight requests (see the module docstring).
    A prelude runs on the reference engine (the compiled one has no insert-only barrier)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if resolve_engine(engine) == "compiled" and not len(prelude):
        from simkit.drafters.suffix_compiled import replay_concurrent

        replay_concurrent(requests, params, kmax, np.asarray(offsets[:len(requests)], np.int64), acc, dr,
                          concurrency, progress)
        return
    cache = SuffixCache(params)
    _insert_prelude(cache, prelude)
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
