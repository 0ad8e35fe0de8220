"""Acceptance tables under a request history (simkit.history): what the global suffix tree held
before the requests were served.

cold: the requests' own replay from an empty tree. repeat:P: the responses of the share P of these
same requests that simkit.history.repeat_indices names enter the tree first, in that order; hot
(repeat:1): all of them in list order (the GPU harness serves them in these orders too);
optionally cut to their first M tokens (diverge:M); then the replay. warm is the whole-corpus replay of simkit.profiles.corpus_profile (it needs the
corpus, not only the requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.choices import Ordering
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.history import History, repeat_indices

PRELUDE_VERSION = 2     # bump when the prelude rule (which responses, in what order) changes


@dataclass(frozen=True)
class Served:
    """A request a history served before (prompt and, cut as the history says, its response)."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def prelude_requests(requests: Sequence, h: History) -> list[Served]:
    """The requests a repeat history `h` served before `requests` (empty for cold), each with its
    response cut as the history says; drafters whose memory also keeps prompt tokens use the
    prompts (suffix_gpu's corpus stores the last 3 ahead of each response)."""
    if h.kind == "warm":
        raise ValueError("warm history needs the whole corpus (simkit.profiles.corpus_profile builds it)")
    if h.kind == "cold" or h.share == 0:
        return []
    # hot: the whole list was served before in list order (calibrate.passes' first pass); a
    # partial share was served in repeat_indices order. Their order decides the global tree's
    # sequence numbers, hence FIFO eviction and the tie-breaks between equal counts.
    order = range(len(requests)) if h.share == 1.0 else repeat_indices(len(requests), h.share)
    out = []
    for i in order:
        o = np.asarray(requests[int(i)].output_ids, dtype=np.int32)
        out.append(Served(np.asarray(requests[int(i)].prompt_ids, dtype=np.int32),
                          o if h.diverge is None else o[:h.diverge]))
    return out


def prelude_outputs(requests: Sequence, h: History) -> list[np.ndarray]:
    """The responses a repeat history `h` served before `requests` (prelude_requests' outputs)."""
    return [s.output_ids for s in prelude_requests(requests, h)]


def cached_history_table(requests: Sequence, h: History, *, params=None,
                         kmax: int = 16, ordering: Ordering = Ordering.SEQUENTIAL, concurrency: int = 32,
                         model: str = "", corpus: str = "", progress: bool = False,
                         use_cache: bool = True, drafter: str = SUFFIX_DRAFTER) -> AcceptanceTable:
    """The table of `requests` under a cold or repeat history `h`, cached like cached_table
    (`drafter`: suffix, or another that remembers history; suffix_gpu's prelude keeps prompts).

    Key: the requests' tokens, the drafter's parameters, kmax, ordering (and concurrency) and the
    history label (which with the requests decides the prelude)."""
    from simkit.acceptance.build import build_table
    from simkit.acceptance.cache import cached_table, load_or_build, table_key
    from simkit.drafters.base import get_drafter
    from simkit.paths import cache_dir

    params = params or get_drafter(drafter).default_params()
    prelude = (prelude_outputs(requests, h) if drafter == SUFFIX_DRAFTER
               else prelude_requests(requests, h))
    if not prelude:
        return cached_table(requests, drafter=drafter, params=params, kmax=kmax,
                            ordering=ordering, concurrency=concurrency, model=model,
                            corpus=corpus, progress=progress, use_cache=use_cache)
    spec = {**params.as_dict(), "history": h.tree_label, "prelude": PRELUDE_VERSION}
    if ordering == Ordering.CONCURRENT:
        spec["concurrency"] = concurrency
    key = table_key(requests, drafter, spec, kmax, ordering)
    path = Path(cache_dir()) / "acceptance" / f"{drafter}-history-{key}"
    total = int(sum(len(r.output_ids) for r in requests))

    def build(step):
        return build_table(requests, drafter=drafter, params=params, kmax=kmax,
                           ordering=ordering, concurrency=concurrency, model=model,
                           corpus=corpus, progress=step, prelude=prelude)

    table = load_or_build(path, build, total=total,
                           label=f"acceptance table {model}/{corpus} ({h.label})", model=model,
                           corpus=corpus, progress=progress, use_cache=use_cache)
    # labelled after the cache: hot and hot,evicted share one cached table, so a label stored
    # at build time would depend on which of them ran first
    table.params = {**table.params, "history": h.label}
    return table


def cached_sample_table(requests: Sequence, sample: Sequence[int], h: History, *, drafter: str,
                        kmax: int = 16, model: str = "", corpus: str = "",
                        progress: bool = False) -> AcceptanceTable:
    """The table of requests[sample] under any history (warm: the whole corpus served before, in
    order; cold; a repeat), sequential: what a profile's table is, for a drafter profiles do not
    carry (simkit acceptance --drafter suffix_gpu)."""
    from simkit.acceptance.cache import cached_warm_table

    idx = [int(i) for i in sample]
    if h.kind == "warm":
        return cached_warm_table(requests, idx, kmax=kmax, model=model, corpus=corpus,
                                 progress=progress, drafter=drafter)
    return cached_history_table([requests[i] for i in idx], h, kmax=kmax, model=model,
                                corpus=corpus, progress=progress, drafter=drafter)
