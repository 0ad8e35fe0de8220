"""A suffix replay paced by acceptance: C requests in flight advance 1 + a(t, K) tokens per tick.

simkit.drafters.suffix.replay's "concurrent" ordering advances every in-flight request by ONE
token per tick. When a request and its repeat are in flight together (a repeat arriving within
C requests of its earlier copy on the same replica, as prefix-affinity makes common), that
lockstep keeps the repeat a fixed distance behind its earlier copy forever, so the earlier copy's
continuation is always in the tree. On a server the repeat accepts long drafts, advances many
tokens per step, catches up with the earlier copy and from then on finds only what that copy has
produced so far. Here each tick is one engine step: a request at position t drafts with K
(the configuration's K, capped at kmax), accepts a = a(t, K) and advances to t + a + 1; the rows
of the positions it passes (t + 1 .. t + a) are drafted in the same tick against the tree as it
stands, so the table stays complete (the engine may read any position) and is valid for that K.

Same tree, same calls as the reference replay (simkit.drafters.suffix.cache.SuffixCache); only the
interleaving differs. Pure Python: meant for small streams (the fleet validation), not corpora.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.drafters.suffix.cache import SuffixCache, SuffixParams


def paced_table(requests: Sequence, k: int, concurrency: int, kmax: int = 16,
                params: SuffixParams | None = None) -> AcceptanceTable:
    """The suffix table of `requests` (served in this order, `concurrency` in flight, each
    advancing 1 + a(t, K) tokens per tick) from an empty tree."""
    params = params or SuffixParams()
    kcol = min(k, kmax) - 1
    plen = np.array([len(r.prompt_ids) for r in requests], np.int32)
    olen = np.array([len(r.output_ids) for r in requests], np.int32)
    offsets = np.zeros(len(requests) + 1, np.int64)
    np.cumsum(olen, out=offsets[1:])
    acc = np.zeros((int(offsets[-1]), kmax), np.uint8)
    dr = np.zeros_like(acc)
    cache = SuffixCache(params)
    queue = deque(r for r, req in enumerate(requests) if len(req.output_ids))
    outs: dict[int, list[int]] = {}
    active: list[list[int]] = []

    def start(r: int) -> None:
        outs[r] = [int(x) for x in requests[r].output_ids]
        cache.start_request(r, requests[r].prompt_ids)
        cache.add_active_response(r, outs[r][:1])
        active.append([r, 1])

    def draft(r: int, t: int) -> int:
        out = outs[r]
        d, a = cache.draft_all(r, kmax, out[t:t + kmax])
        acc[offsets[r] + t] = a
        dr[offsets[r] + t] = d
        return int(acc[offsets[r] + t, kcol])

    while queue and len(active) < concurrency:
        start(queue.popleft())
    while active:
        still = []
        for slot in active:
            r, t = slot
            out = outs[r]
            if t < len(out):
                a = min(draft(r, t), len(out) - 1 - t)
                for p in range(t + 1, t + a + 1):
                    cache.add_active_response(r, out[p - 1:p])
                    draft(r, p)
                cache.add_active_response(r, out[t + a:t + a + 1])
                slot[1] = t + a + 1
            if slot[1] >= len(out):
                cache.stop_request(r)
                del outs[r]
            else:
                still.append(slot)
        active = still
        while queue and len(active) < concurrency:
            start(queue.popleft())
    return AcceptanceTable(model="", corpus="", drafter=SUFFIX_DRAFTER,
                           params={**params.as_dict(), "ordering": "paced", "k": k,
                                   "concurrency": concurrency},
                           kmax=kmax, ordering="concurrent", prompt_len=plen, output_len=olen,
                           offsets=offsets, accepted=acc, drafted=dr)
