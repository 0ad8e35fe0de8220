"""The registered drafter "suffix_gpu" (vLLM 0.34's GPU suffix speculator) and its replays:
d(t, K) and a(t, K) for every output position t and K = 1..kmax.

Each row also tells, per K, the draft's source (0 own history, 1 corpus) and match length: vLLM
0.34's adaptive verification keys its acceptance counters by them (simkit.engine.adaptive).

d(t, K) = the real draft slots (vLLM's num_valid, 0..K); vLLM always verifies K slots, the others
holding the last sampled token ("fillers"). a(t, K) = the leading slots, real or filler, equal to
the trace's next tokens (fillers are verified like drafts), so a(t, K) may exceed d(t, K).

All K from one pass where the algorithm allows: own-history drafts at K are prefixes of the kmax
draft, but the corpus vote scores a chain by the sum of its vote counts over K positions, so the
match length it picks (hence the chain) can change with K. The compiled replay votes each match
length's chain once to kmax (candidates, match lengths and continuations do not depend on K) and
picks the winner again for every K from the chain's running count sum (kernels.py); the reference
proposes each K on its own, as vLLM does at its configured K.

Corpus ingestion with the async lag (facts 2.4: finished at step s, drafts from step s+2 read it):
- "sequential": requests one after another; a request's document (its last 3 prompt tokens and its
  output) enters the corpus when it finishes, so it feeds every later request and never itself.
- "concurrent": `concurrency` requests in flight advancing one position per tick (the suffix
  drafter's round robin); a request that finished at tick s is ingested before the drafts of tick
  s + ingest_lag, those of one tick in request order.
A history's prelude (hot, repeat:P) and the warm replay's unsampled requests enter the corpus as
served requests, prompt context included. Engines: "compiled" (default, kernels.py: all K in one
pass) and "python" (reference.py, one K at a time); same tables byte for byte.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from simkit.choices import Ordering
from simkit.drafters.base import ENGINES, Drafter, register, resolve_engine
from simkit.drafters.suffix_gpu import reference as ref
from simkit.drafters.suffix_gpu.compiled import as_served
from simkit.drafters.suffix_gpu.params import DRAFTER_NAME, SuffixGpuParams



@register
class SuffixGpuDrafter(Drafter):
    """vLLM 0.34's suffix decoding: own-history suffix match and a ring of finished responses,
    always K verified slots (module docstring)."""

    name = DRAFTER_NAME
    default_k = 8              # vLLM 0.34: num_speculative_tokens defaults to min(8, depth)
    kpad_label = "suffix_gpu-kpad"
    remembers_history = True
    emits_sources = True       # replays also fill each draft's source and match length
    fills_k_slots = True

    def default_params(self) -> SuffixGpuParams:
        """vLLM 0.34's defaults: depth 24, a 2^20-token corpus, async scheduling's lag of 2."""
        return SuffixGpuParams()

    def replay(self, requests: Sequence, params: Any, kmax: int, offsets: np.ndarray,
               accepted: np.ndarray, drafted: np.ndarray, *, ordering: Ordering, concurrency: int,
               progress: Callable[[int], None] | None, engine: str | None,
               prelude: Sequence, sources=None) -> Ordering:
        """Sequential or concurrent replay (module docstring) after the prelude's requests;
        `sources`: optional (source, match_len) arrays shaped like `accepted` to fill."""
        rowbase = np.asarray(offsets[:len(requests)], np.int64)
        replay_rows(requests, params, kmax, rowbase, accepted, drafted, ordering=ordering,
                    concurrency=concurrency, progress=progress, engine=engine, prelude=prelude,
                    sources=sources)
        return ordering

    def replay_warm(self, requests: Sequence, params: Any, kmax: int, rowbase: np.ndarray,
                    accepted: np.ndarray, drafted: np.ndarray,
                    progress: Callable[[int], None] | None, engine: str | None,
                    sources=None) -> None:
        """Sequential replay of every request; those with rowbase -1 are served undrafted."""
        replay_rows(requests, params, kmax, rowbase, accepted, drafted,
                    ordering=Ordering.SEQUENTIAL, concurrency=1, progress=progress,
                    engine=engine, prelude=(), sources=sources)


def replay_rows(requests: Sequence, params: SuffixGpuParams, kmax: int, rowbase: np.ndarray,
                acc: np.ndarray, dr: np.ndarray, *, ordering: Ordering, concurrency: int,
                progress: Callable[[int], None] | None, engine: str | None,
                prelude: Sequence, sources=None) -> None:
    """Replay into rows rowbase[r] + t (rowbase -1: served only) with the chosen engine;
    `sources`: optional (source, match_len) arrays shaped like acc, filled alongside."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if sources is None:
        sources = (np.zeros_like(acc), np.zeros_like(acc))
    if resolve_engine(engine) == "compiled":
        from simkit.drafters.suffix_gpu import compiled

        if ordering is Ordering.SEQUENTIAL:
            compiled.replay_sequential(requests, params, kmax, rowbase, acc, dr, progress, prelude,
                                       sources)
        else:
            compiled.replay_concurrent(requests, params, kmax, rowbase, acc, dr, concurrency,
                                       progress, prelude, sources)
        return
    corpus = ref.Corpus(params)
    for item in prelude:
        s = as_served(item)
        if len(s.output_ids):
            corpus.ingest([ref.document(s.prompt_ids, s.output_ids)])
    if ordering is Ordering.SEQUENTIAL:
        _python_sequential(requests, params, kmax, rowbase, acc, dr, progress, corpus, sources)
    else:
        _python_concurrent(requests, params, kmax, rowbase, acc, dr, concurrency, progress, corpus,
                           sources)


def draft_position(history: np.ndarray, output: np.ndarray, t: int, corpus: ref.Corpus,
                   params: SuffixGpuParams, kmax: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(d, a, source, match_len) for K = 1..kmax at output position t, each K proposed on its
    own (the reference)."""
    d = np.zeros(kmax, np.uint8)
    a = np.zeros(kmax, np.uint8)
    src = np.zeros(kmax, np.uint8)
    ml = np.zeros(kmax, np.uint8)
    for k in range(1, kmax + 1):
        slots, valid, source, match = ref.propose_with_source(history, corpus, params, k)
        n = 0
        while n < k and t + n < len(output) and slots[n] == output[t + n]:
            n += 1
        d[k - 1] = valid
        a[k - 1] = n
        src[k - 1] = source
        ml[k - 1] = min(match, 255)
    return d, a, src, ml


def _draft_request(req, base: int, params, kmax, acc, dr, corpus, sources) -> None:
    prompt = np.asarray(req.prompt_ids, np.int64)
    out = np.asarray(req.output_ids, np.int64)
    hist = np.concatenate([prompt, out])
    for t in range(1, len(out)):
        row = base + t
        dr[row], acc[row], sources[0][row], sources[1][row] = draft_position(
            hist[:len(prompt) + t], out, t, corpus, params, kmax)


def _python_sequential(requests, params, kmax, rowbase, acc, dr, progress, corpus, sources) -> None:
    for r, req in enumerate(requests):
        if not len(req.output_ids):
            continue
        if rowbase[r] >= 0:
            _draft_request(req, int(rowbase[r]), params, kmax, acc, dr, corpus, sources)
        corpus.ingest([ref.document(req.prompt_ids, req.output_ids)])
        if progress:
            progress(len(req.output_ids))


def _python_concurrent(requests, params, kmax, rowbase, acc, dr, concurrency, progress,
                       corpus, sources) -> None:
    queue = deque(r for r, req in enumerate(requests) if len(req.output_ids))
    active: list[list[int]] = []
    pending: list[tuple[int, int]] = []          # (tick it becomes visible, request)
    hist = {}
    tick = 0

    def start(r: int) -> None:
        req = requests[r]
        hist[r] = np.concatenate([np.asarray(req.prompt_ids, np.int64),
                                  np.asarray(req.output_ids, np.int64)])
        active.append([r, 1])

    while queue and len(active) < concurrency:
        start(queue.popleft())
    while active:
        due = sorted(r for when, r in pending if when <= tick)
        if due:
            corpus.ingest([ref.document(requests[r].prompt_ids, requests[r].output_ids) for r in due])
            pending = [(w, r) for w, r in pending if w > tick]
        still = []
        for slot in active:
            r, t = slot
            out = np.asarray(requests[r].output_ids, np.int64)
            if t < len(out):
                p = len(requests[r].prompt_ids)
                row = int(rowbase[r]) + t
                dr[row], acc[row], sources[0][row], sources[1][row] = draft_position(
                    hist[r][:p + t], out, t, corpus, params, kmax)
                slot[1] = t = t + 1
            if t >= len(out):
                pending.append((tick + params.ingest_lag, r))
                if progress:
                    progress(len(out))
            else:
                still.append(slot)
        active = still
        while queue and len(active) < concurrency:
            start(queue.popleft())
        tick += 1


__all__ = ["ENGINES", "SuffixGpuDrafter", "draft_position", "replay_rows", "resolve_engine"]
