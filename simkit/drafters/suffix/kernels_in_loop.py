"""Compiled (numba) steps of the in-loop suffix drafter (simkit.drafters.suffix.in_loop): start a
request, append its sampled tokens, draft, remove its cached response, stop it.

Each kernel is one call of the pure-Python SuffixCache that InLoopSuffix makes, on the array
forest of simkit.drafters.suffix.core, the way kernels.concurrent_all makes them in the table
build: the global tree at node GROOT and every active request's local tree in one forest. A
started request is a *segment*: its prompt followed by its output from the position it (re)started
at, contiguous in the flat token array (a node refers to its tokens by position there). One row of
the segment matrix SG holds a segment's state (columns below), LACT / GACT its local and global
active suffix nodes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simkit.drafters.suffix.core import (H_NEXT, I0, I1, NO_PARENT, ensure, free_tree, new_node,
                                         remove_seq)
from simkit.drafters.suffix.kernels import D_LIVE, GROOT, _append, draft_row

# columns of SG: prompt start in flat, prompt length, output start in flat (output position T0
# there), output tokens laid out, local root, local active count, local tokens, global active
# count, global slot (0 none, 1 cached, 2 evicted), global tokens
BASE, PLEN, OUT, T0, NOUT, ROOT, NL, NLT, NG, GSLOT, GLEN = range(11)
NCOLS = 11


@njit(cache=True)
def start(T, flat, SG, LACT, s, depth):
    """A local tree over segment s's prompt (SuffixCache.start_request's local part)."""
    T = ensure(T, I1, I0, I0)
    root = new_node(T, I0, I0, I0, I0, NO_PARENT)
    nl = I0
    for i in range(SG[s, PLEN]):
        T, nl = _append(T, root, flat, SG[s, BASE], i, LACT[s], nl, depth)
    SG[s, ROOT] = root
    SG[s, NL] = nl
    SG[s, NLT] = SG[s, PLEN]
    return T


@njit(cache=True)
def add(T, flat, SG, LACT, GACT, D, s, n, depth):
    """The segment's next n output tokens to its local tree and, while cached, to the global tree
    (SuffixCache.add_active_response). Returns the forest (its arrays may have grown)."""
    for _ in range(n):
        T, SG[s, NL] = _append(T, SG[s, ROOT], flat, SG[s, BASE], SG[s, NLT], LACT[s], SG[s, NL],
                               depth)
        SG[s, NLT] += 1
        if SG[s, GSLOT] == 1:
            if SG[s, GLEN] == 0:
                D[D_LIVE] += 1                 # the sequence enters the global tree
            T, SG[s, NG] = _append(T, GROOT, flat, SG[s, OUT], SG[s, GLEN], GACT[s], SG[s, NG],
                                   depth)
            SG[s, GLEN] += 1
    return T


@njit(cache=True)
def evict(T, flat, SG, D, s):
    """Segment s's response out of the global tree (SuffixCache.evict)."""
    if SG[s, GSLOT] == 1 and SG[s, GLEN] > 0:
        remove_seq(T, GROOT, flat, SG[s, OUT], SG[s, GLEN])
        D[D_LIVE] -= 1
    SG[s, GSLOT] = 2


@njit(cache=True)
def draft(T, flat, SG, LACT, GACT, D, s, t, caps, minp, kmax, depth, dbuf, abuf, S):
    """draft_all at output position t of segment s (SuffixCache.draft_all): d(K), a(K) for
    K = 1..kmax into dbuf, abuf, the accepted lengths against the trace's tokens from t."""
    lo = SG[s, OUT] + t - SG[s, T0]
    end = SG[s, OUT] + SG[s, NOUT]
    hi = lo + kmax if lo + kmax < end else end
    nga = SG[s, NG] if SG[s, GSLOT] == 1 and SG[s, GLEN] > 0 else -1
    draft_row(T, T, flat, SG[s, ROOT], SG[s, BASE], SG[s, NLT], LACT[s], SG[s, NL], GACT[s], nga,
              D[D_LIVE], lo, hi, caps, minp, kmax, depth, dbuf, abuf, S)


@njit(cache=True)
def stop(T, SG, s):
    """Free segment s's local tree (SuffixCache.stop_request; its response stays cached)."""
    free_tree(T, SG[s, ROOT], np.empty(T[0][H_NEXT] + 1, np.int64))
