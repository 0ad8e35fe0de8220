"""Entry points of the compiled suffix_gpu replay: lay the requests out in one token array (prompts
included: every finished request's document starts in its prompt), then run kernels.py.

Same tables as the reference replay (replay.py, engine "python"), byte for byte
(tests/unit/test_suffix_gpu_drafter.py). numba caches the machine code beside the sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from simkit.drafters.suffix.compiled import pack
from simkit.drafters.suffix.tree import MAX_TOKEN
from simkit.drafters.suffix_gpu.params import SuffixGpuParams


@dataclass(frozen=True)
class Served:
    """A request served before the replay (a history's prelude): it only enters the corpus."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def as_served(item) -> Served:
    """A prelude item: a request-like object (prompt_ids, output_ids) or a bare response."""
    if hasattr(item, "output_ids"):
        return Served(np.asarray(item.prompt_ids), np.asarray(item.output_ids))
    return Served(np.zeros(0, np.int32), np.asarray(item))


class Layout:
    """The requests' tokens in one array, their bounds, the same-token links and the corpus state."""

    def __init__(self, requests: Sequence, params: SuffixGpuParams, kmax: int):
        try:
            import numba  # noqa: F401
        except ImportError as exc:
            raise ImportError("the compiled suffix_gpu drafter needs numba (pip install -e . "
                              "installs it); engine='python' uses the reference instead") from exc
        from simkit.drafters.suffix_gpu import kernels

        self.k = kernels
        self.flat, self.pbase, self.plen, self.olen = pack(requests, np.ones(len(requests), bool))
        self.prev = kernels.build_prev(self.flat, self.pbase, self.plen, self.olen,
                                       np.full(MAX_TOKEN + 1, -1, np.int64))
        self.cap = params.corpus_tokens if params.has_corpus else 0
        self.nb = params.buckets
        self.ring = np.full(max(self.cap, 1), -1, np.int32)
        self.table = np.full((2, self.nb if self.cap else 1, 8), -1, np.int64)
        self.st = np.zeros(2, np.int64)
        self.depth = params.max_depth
        self.kmax = kmax
        self.scratch = kernels.new_scratch(kmax)

    def sequential(self, rowbase: np.ndarray, lo: int, hi: int, acc, dr, src, ml) -> None:
        self.k.sequential(self.flat, self.prev, self.pbase, self.plen, self.olen, rowbase, lo, hi,
                          self.ring, self.cap, self.table, self.nb, self.st, self.depth, self.kmax,
                          self.cap > 0, self.scratch, acc, dr, src, ml)

    def concurrent(self, rowbase: np.ndarray, first: int, concurrency: int, lag: int, acc, dr,
                   src, ml):
        self.k.concurrent(self.flat, self.prev, self.pbase, self.plen, self.olen, rowbase, first,
                          concurrency, lag, self.ring, self.cap, self.table, self.nb, self.st,
                          self.depth, self.kmax, self.cap > 0, self.scratch, acc, dr, src, ml)


def _sources(acc: np.ndarray, sources) -> tuple[np.ndarray, np.ndarray]:
    """The (source, match_len) arrays to fill: the caller's, or throwaway ones shaped like acc."""
    if sources is not None:
        return sources
    return np.zeros_like(acc), np.zeros_like(acc)


CHUNK_TOKENS = 100_000       # output tokens per kernel call between progress callbacks


def _after_prelude(requests: Sequence, params: SuffixGpuParams, kmax: int, rowbase: np.ndarray,
                   acc: np.ndarray, dr: np.ndarray, prelude: Sequence, sources):
    """The layout of prelude + requests with the prelude already served into the corpus: (layout,
    row bases with -1 for the prelude, the prelude's length, source and match arrays)."""
    src, ml = _sources(acc, sources)
    pre = [as_served(p) for p in prelude]
    rb = np.concatenate([np.full(len(pre), -1, np.int64), np.asarray(rowbase, np.int64)])
    lay = Layout(pre + list(requests), params, kmax)
    lay.sequential(rb, 0, len(pre), acc, dr, src, ml)
    return lay, rb, len(pre), src, ml


def replay_sequential(requests: Sequence, params: SuffixGpuParams, kmax: int, rowbase: np.ndarray,
                      acc: np.ndarray, dr: np.ndarray, progress: Callable[[int], None] | None,
                      prelude: Sequence = (), sources=None) -> None:
    """Sequential replay into acc/dr; rowbase[r] = first row of request r, -1 = only served
    (it enters the corpus, undrafted). `prelude`: served first, in order. `sources`: optional
    (source, match_len) arrays shaped like acc, filled with each K's draft source and match."""
    lay, rb, lo, src, ml = _after_prelude(requests, params, kmax, rowbase, acc, dr, prelude,
                                          sources)
    n = len(rb)
    while lo < n:
        hi, tok = lo, 0
        while hi < n and (tok < CHUNK_TOKENS or hi == lo):
            tok += int(lay.olen[hi])
            hi += 1
        lay.sequential(rb, lo, hi, acc, dr, src, ml)
        if progress:
            for r in range(lo, hi):
                if lay.olen[r]:
                    progress(int(lay.olen[r]))
        lo = hi


def replay_concurrent(requests: Sequence, params: SuffixGpuParams, kmax: int, rowbase: np.ndarray,
                      acc: np.ndarray, dr: np.ndarray, concurrency: int,
                      progress: Callable[[int], None] | None, prelude: Sequence = (),
                      sources=None) -> None:
    """Round-robin replay at `concurrency` with the ingestion lag (kernels.concurrent), after the
    prelude entered the corpus; `sources` as in replay_sequential."""
    lay, rb, npre, src, ml = _after_prelude(requests, params, kmax, rowbase, acc, dr, prelude,
                                            sources)
    lay.concurrent(rb, npre, concurrency, params.ingest_lag, acc, dr, src, ml)
    if progress:
        for n_out in lay.olen[npre:]:
            if n_out:
                progress(int(n_out))


def position_row(history: np.ndarray, continuation: np.ndarray, corpus, params: SuffixGpuParams,
                 kmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(d, a, source, match_len) for K = 1..kmax of one decoding request whose history is
    `history` (its last token just sampled) against the corpus state of a reference.Corpus,
    `continuation` being the tokens the trace goes on with (the parity test's view of one
    compiled table row)."""
    from simkit.drafters.suffix_gpu import kernels

    hist = np.asarray(history, np.int32)
    flat = np.concatenate([hist, np.asarray(continuation, np.int32)])
    pbase = np.zeros(1, np.int64)
    prev = kernels.build_prev(flat, pbase, np.array([flat.size], np.int64), np.zeros(1, np.int64),
                              np.full(MAX_TOKEN + 1, -1, np.int64))
    acc = np.zeros(kmax, np.uint8)
    dr = np.zeros(kmax, np.uint8)
    src = np.zeros(kmax, np.uint8)
    ml = np.zeros(kmax, np.uint8)
    cap = corpus.cap
    kernels.draft_row(flat, prev, 0, hist.size, hist.size - 1, 1, 1 + len(continuation),
                      corpus.ring.astype(np.int32), cap, corpus.table, corpus.nb,
                      params.max_depth, kmax, cap > 0, kernels.new_scratch(kmax), acc, dr, src, ml)
    return dr, acc, src, ml
