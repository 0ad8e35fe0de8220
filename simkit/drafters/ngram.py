"""n-gram (prompt lookup) drafter with vLLM 0.26 semantics (v1/spec_decode/ngram_proposer.py).

Read from the 0.26.0 wheel, written ourselves. vLLM's KMP scan over the reversed context amounts to:
take the longest n in [prompt_lookup_min, prompt_lookup_max] such that the last n context tokens occur
earlier with at least one token after the occurrence; among those occurrences take the EARLIEST; the
draft is the (up to) K tokens that follow it, cut at the end of the context. Nothing matches: no draft.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from simkit.choices import Ordering
from simkit.drafters.base import NGRAM_DRAFTER, Drafter, register


@dataclass(frozen=True)
class NgramParams:
    """vLLM's prompt_lookup_min / prompt_lookup_max (both 5 by default)."""

    prompt_lookup_min: int = 5
    prompt_lookup_max: int = 5

    def __post_init__(self) -> None:
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ValueError("need 1 <= prompt_lookup_min <= prompt_lookup_max")

    def as_dict(self) -> dict:
        return {"drafter": NGRAM_DRAFTER, **asdict(self)}


def ngram_propose(tokens: Sequence[int], k: int, params: NgramParams = NgramParams()) -> list[int]:
    """The draft vLLM's n-gram proposer makes for this context (direct, quadratic; for tests/replay)."""
    toks = [int(x) for x in tokens]
    total = len(toks)
    if total < params.prompt_lookup_min or k <= 0:
        return []
    for n in range(min(params.prompt_lookup_max, total - 1), params.prompt_lookup_min - 1, -1):
        tail = toks[total - n:]
        for j in range(0, total - n):          # occurrence must end before the last token
            if toks[j:j + n] == tail:
                s = j + n
                return toks[s:min(s + k, total)]
    return []


def ngram_draft_all_positions(prompt_ids: np.ndarray, output_ids: np.ndarray, kmax: int,
                              params: NgramParams = NgramParams()) -> tuple[np.ndarray, np.ndarray]:
    """d(t, K) and a(t, K) (shape (len(output), kmax), uint8; row 0 = prefill, no draft)."""
    ctx = [int(x) for x in prompt_ids] + [int(x) for x in output_ids]
    p = len(prompt_ids)
    n_out = len(output_ids)
    d = np.zeros((n_out, kmax), np.uint8)
    a = np.zeros((n_out, kmax), np.uint8)
    lo, hi = params.prompt_lookup_min, params.prompt_lookup_max
    first: dict[int, dict[tuple, int]] = {n: {} for n in range(lo, hi + 1)}
    inserted = {n: 0 for n in range(lo, hi + 1)}     # n-grams starting below this are in first[n]
    ks = np.arange(1, kmax + 1)
    for t in range(1, n_out):
        total = p + t
        if total < lo:
            continue
        start = -1
        for n in range(min(hi, total - 1), lo - 1, -1):
            table = first[n]
            j = inserted[n]
            while j <= total - 1 - n:                 # occurrences ending at or before total-2
                table.setdefault(tuple(ctx[j:j + n]), j)
                j += 1
            inserted[n] = j
            hit = table.get(tuple(ctx[total - n:total]))
            if hit is not None:
                start = hit + n
                break
        if start < 0:
            continue
        avail = min(total - start, kmax)
        acc = 0
        while acc < avail and t + acc < n_out and ctx[start + acc] == ctx[p + t + acc]:
            acc += 1
        dk = np.minimum(ks, avail)
        d[t] = dk
        a[t] = np.minimum(dk, acc)
    return d, a


@register
class NgramDrafter(Drafter):
    """vLLM's n-gram (prompt lookup) proposer: drafts depend on the request's own context alone,
    so every ordering and history gives the same table."""

    name = NGRAM_DRAFTER
    default_k = 4
    kpad_label = "ngram-kpad"
    remembers_history = False

    def default_params(self) -> NgramParams:
        """prompt_lookup_min = prompt_lookup_max = 5 (vLLM's defaults)."""
        return NgramParams()

    def replay(self, requests: Sequence, params: Any, kmax: int, offsets: np.ndarray,
               accepted: np.ndarray, drafted: np.ndarray, *, ordering: Ordering, concurrency: int,
               progress: Callable[[int], None] | None, engine: str | None,
               prelude: Sequence) -> Ordering:
        """Every request's rows from its own prompt and output (ordering and prelude do not
        matter: the result is the sequential table)."""
        for r, req in enumerate(requests):
            d, a = ngram_draft_all_positions(req.prompt_ids, req.output_ids, kmax, params)
            lo, hi = int(offsets[r]), int(offsets[r + 1])
            drafted[lo:hi] = d
            accepted[lo:hi] = a
            if progress:
                progress(len(req.output_ids))
        return Ordering.SEQUENTIAL
