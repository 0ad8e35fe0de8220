"""Build acceptance tables a(t, K), d(t, K) for K = 1..kmax by replaying requests through a drafter.

The drafter (simkit.drafters.base: "suffix", "ngram", ...) does the replay; this module sizes the
arrays and wraps them in an AcceptanceTable. Orderings ("sequential", "concurrent") and the
suffix drafter's replay engines are described in simkit.drafters.suffix.replay.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.choices import Ordering
from simkit.drafters.base import SUFFIX_DRAFTER, get_drafter
from simkit.drafters.suffix.replay import replay_sequential

ORDERINGS = tuple(Ordering)


def _alloc(requests: Sequence, kmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    plen = np.array([len(r.prompt_ids) for r in requests], dtype=np.int32)
    olen = np.array([len(r.output_ids) for r in requests], dtype=np.int32)
    offsets = np.zeros(len(requests) + 1, dtype=np.int64)
    np.cumsum(olen, out=offsets[1:])
    rows = int(offsets[-1])
    return plen, olen, offsets, np.zeros((rows, kmax), np.uint8), np.zeros((rows, kmax), np.uint8)


def build_table(requests: Sequence, *, drafter: str = SUFFIX_DRAFTER, params=None, kmax: int = 16,
                ordering: Ordering = Ordering.SEQUENTIAL, concurrency: int = 32, model: str = "",
                corpus: str = "", progress: Callable[[int], None] | None = None,
                engine: str | None = None, prelude: Sequence = ()) -> AcceptanceTable:
    """Acceptance table for `requests` (objects with int prompt_ids / output_ids arrays).

    `progress(n)` is called with the number of output tokens just processed. `engine`: suffix
    replay engine, see resolve_engine (the n-gram drafter has one engine). `prelude`: responses
    (token-id sequences) the server produced before these requests, inserted into the global tree
    first in this order (suffix only; simkit.acceptance.history_tables builds them from a History).
    """
    if not 1 <= kmax <= 255:
        raise ValueError("kmax must be in 1..255 (uint8 table)")
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering must be one of {', '.join(ORDERINGS)}")
    ordering = Ordering(ordering)            # a library caller's text as the member
    impl = get_drafter(drafter)
    plen, olen, offsets, acc, dr = _alloc(requests, kmax)
    params = params or impl.default_params()
    extra, sources = _sources_for(impl, acc)
    ordering = impl.replay(requests, params, kmax, offsets, acc, dr, ordering=ordering,
                           concurrency=concurrency, progress=progress, engine=engine,
                           prelude=prelude, **extra)
    pdict = params.as_dict()
    if ordering == Ordering.CONCURRENT:
        pdict = {**pdict, "concurrency": concurrency}
    return AcceptanceTable(model=model, corpus=corpus, drafter=drafter, params=pdict, kmax=kmax,
                           ordering=ordering, prompt_len=plen, output_len=olen, offsets=offsets,
                           accepted=acc, drafted=dr, **sources)


def _sources_for(impl, acc: np.ndarray) -> tuple[dict, dict]:
    """For a drafter that records each draft's source and match length (emits_sources): the
    replay's keyword and the table's fields, two arrays shaped like acc; else two empty dicts."""
    if not getattr(impl, "emits_sources", False):
        return {}, {}
    src, ml = np.zeros_like(acc), np.zeros_like(acc)
    return {"sources": (src, ml)}, {"source": src, "match_len": ml}


def build_warm_table(requests: Sequence, sample: Sequence[int], *, params=None,
                     kmax: int = 16, model: str = "", corpus: str = "",
                     progress: Callable[[int], None] | None = None,
                     engine: str | None = None, drafter: str = SUFFIX_DRAFTER) -> AcceptanceTable:
    """Suffix table of requests[sample] exactly as a sequential replay of ALL `requests` gives them.

    Walks `requests` in order; a request outside `sample` only enters the global tree (FIFO eviction
    at max_cached_requests as in the full replay), with no local tree and no drafting; a sampled
    request is drafted at every position as in build_table. Rows equal the sampled requests' rows of
    build_table(requests) (tested), at the cost of inserting the other responses only.
    `progress(n)` gets the output tokens of each request walked (inserted or drafted). `engine`: see
    resolve_engine. `drafter`: another history-remembering drafter with a `replay_warm` method
    (suffix_gpu: unsampled requests enter its corpus) replays the same way.
    """
    if not 1 <= kmax <= 255:
        raise ValueError("kmax must be in 1..255 (uint8 table)")
    idx = [int(i) for i in sample]
    if any(b <= a for a, b in zip(idx, idx[1:])) or (idx and not 0 <= idx[0] <= idx[-1] < len(requests)):
        raise ValueError("sample must be strictly increasing indices into requests")
    impl = get_drafter(drafter)
    params = params or impl.default_params()
    chosen = [requests[i] for i in idx]
    plen, olen, offsets, acc, dr = _alloc(chosen, kmax)
    extra, sources = _sources_for(impl, acc)
    row_of = {r: int(offsets[j]) for j, r in enumerate(idx)}
    last = idx[-1] if idx else -1
    if drafter == SUFFIX_DRAFTER:
        replay_sequential(requests[:last + 1], params, kmax, None, acc, dr, progress, row_of,
                          engine=engine)
    elif getattr(impl, "replay_warm", None) is not None:
        rowbase = np.full(last + 1, -1, np.int64)
        for r, row in row_of.items():
            rowbase[r] = row
        impl.replay_warm(requests[:last + 1], params, kmax, rowbase, acc, dr, progress, engine,
                         **extra)
    else:
        raise ValueError(f"drafter {drafter!r} has no warm replay (its drafts ignore history)")
    pdict = {**params.as_dict(), "tree": "warm"}
    return AcceptanceTable(model=model, corpus=corpus, drafter=drafter, params=pdict, kmax=kmax,
                           ordering=Ordering.SEQUENTIAL, prompt_len=plen, output_len=olen, offsets=offsets,
                           accepted=acc, drafted=dr, **sources)
