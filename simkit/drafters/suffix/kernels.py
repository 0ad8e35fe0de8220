"""Compiled (numba) replay loops: SuffixCache.draft_all and the sequential / concurrent table builds.

Each function mirrors its pure-Python counterpart (simkit.drafters.suffix.cache.SuffixCache.draft_all,
simkit.drafters.suffix.replay.replay_sequential / replay_concurrent) step for step, on the array forest
of simkit.drafters.suffix.core. Global sequence ids are request indices (only the FIFO order of the
cached responses matters, not the ids).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# no_cpython_wrapper: a function only compiled code calls; numba compiles no Python-callable
# wrapper for it (those wrappers were ~1.2 of a fresh install's ~14 CPU-s of compile)

from simkit.drafters.suffix.core import (CNT, H_NEXT, I0, I1, LN, NO_PARENT, RPOS, append_token,
                                         ensure, find_child, free_tree, head, new_node,
                                         remove_seq, reset_forest)

GROOT = np.int64(0)   # root of the global tree (int64, not a literal: core.I0)
# driver header D: FIFO head, FIFO tail, live global sequences
D_HEAD, D_TAIL, D_LIVE = 0, 1, 2


@njit(cache=True, no_cpython_wrapper=True)
def _f32(x):
    return np.float64(np.float32(x))


@njit(cache=True, no_cpython_wrapper=True)
def _match(T, root, flat, lo, hi):
    """(node, offset) where flat[lo:hi] ends when read from root, or (-1, -1)."""
    N = T[1]
    node = root
    idx = 0
    ref = 0
    for q in range(lo, hi):
        token = flat[q]
        if idx >= N[node, LN]:
            c = find_child(T, node, token)
            if c < 0:
                return -1, -1
            node = c
            ref = N[c, RPOS]
            idx = 0
        if flat[ref + idx] != token:
            return -1, -1
        idx += 1
    return node, idx


@njit(cache=True, no_cpython_wrapper=True)
def _walk(T, flat, node, idx, max_tokens, minp, wt, wrow, sc):
    """Path-mode walk from (node, idx): tokens into wt[wrow], float32 scores into sc; returns count."""
    N = T[1]
    nt = 0
    prob = 1.0
    score = 0.0
    while prob >= minp:
        nl = N[node, LN]
        if idx < nl:
            n = nl - idx
            if n > max_tokens - nt:
                n = max_tokens - nt
            b = N[node, RPOS] + idx
            for q in range(n):
                wt[wrow, nt] = flat[b + q]
                score = _f32(score + prob)
                sc[nt] = score
                nt += 1
            if nt >= max_tokens:
                break
            idx = nl
        else:
            child = head(T, node)
            if child < 0:
                break
            prob = _f32(prob * _f32(N[child, CNT] / N[node, CNT]))
            node = child
            idx = 0
    return nt


@njit(cache=True, no_cpython_wrapper=True)
def draft_row(TL, TG, flat, lroot, lbase, ln_tok, lact, nla, gact, nga, glive, fut_lo, fut_hi,
              caps, minp, kmax, depth, d_out, a_out, S):
    """draft_all for one position: the local tree is at lroot of forest TL, the global one at GROOT
    of TG (may be the same forest); the local sequence is flat[lbase:lbase+ln_tok] (prompt + output
    so far), gact[:nga] the request's active global suffixes (nga = -1: not cached), the real
    continuation flat[fut_lo:fut_hi]. Writes d(K) and a(K) for K = 1..kmax into d_out, a_out."""
    scratch_w, scratch_s, best_s, best_n, best_w, wn, mnode, midx = S
    best_s[:] = 0.0
    best_n[:] = 0
    best_w[:] = -1
    L = ln_tok if ln_tok < depth else depth
    clo = lbase + ln_tok - L
    nw = I0
    for which in range(2):
        if which == 0:
            T, root, act, nact = TL, lroot, lact, nla
        else:
            if glive == 0:
                continue
            T, root, act, nact = TG, GROOT, gact, nga if nga > 0 else 0
        N = T[1]
        nm = 0
        for m in range(1, L):
            if m <= nact:
                node = act[nact - m]
                idx = N[node, LN]
            else:
                node, idx = _match(T, root, flat, clo + L - m, clo + L)
                if node < 0:
                    break
            mnode[nm] = node
            midx[nm] = idx
            nm += 1
        for m in range(nm, 0, -1):
            node = mnode[m - 1]
            idx = midx[m - 1]
            if idx < N[node, LN]:
                p1 = 1.0
            else:
                h = head(T, node)
                if h < 0:
                    continue
                p1 = _f32(N[h, CNT] / N[node, CNT])
                if p1 < minp:
                    continue
            cap = caps[m] if caps[m] < kmax else kmax
            if cap <= 0:
                continue
            # The walk's score after n tokens is at most the float32 sum of n copies of p1 (see
            # suffix.py), itself below n * p1 * (1 + 1e-4) for n <= 255 (each float32 addition
            # rounds up by at most a factor 1 + 2^-24). A walk is skipped only when even this looser
            # bound cannot beat the best for any K, and a walk cut at a larger `need` than the
            # reference's changes no best (past its `need` it cannot win), so the result is the same.
            ub = p1 * 1.0001
            need = cap
            while need and need * ub <= best_s[need]:
                need -= 1
            if not need:
                continue
            nt = _walk(T, flat, node, idx, need, minp, scratch_w, nw, scratch_s)
            if not nt:
                continue
            wn[nw] = nt
            for k in range(1, nt + 1):
                s = scratch_s[k - 1]
                if s > best_s[k]:
                    best_s[k] = s
                    best_n[k] = k
                    best_w[k] = nw
            s = scratch_s[nt - 1]
            for k in range(nt + 1, kmax + 1):
                if s <= best_s[k]:
                    break
                best_s[k] = s
                best_n[k] = nt
                best_w[k] = nw
            nw += 1
    last = -1
    acc = 0
    for k in range(1, kmax + 1):
        d_out[k - 1] = best_n[k]
        w = best_w[k]
        if w < 0:
            a_out[k - 1] = 0
            continue
        if w != last:
            acc = 0
            lim = wn[w] if wn[w] < fut_hi - fut_lo else fut_hi - fut_lo
            while acc < lim and scratch_w[w, acc] == flat[fut_lo + acc]:
                acc += 1
            last = w
        n = best_n[k]
        a_out[k - 1] = acc if acc < n else n
    return 0


@njit(cache=True)
def _scratch(kmax, depth):
    """Work arrays of draft_row (walk tokens, scores, best per K, walk lengths, match nodes)."""
    return (np.zeros((2 * depth + 2, kmax), np.int32), np.zeros(kmax + 1), np.zeros(kmax + 1),
            np.zeros(kmax + 1, np.int64), np.full(kmax + 1, -1, np.int64), np.zeros(2 * depth + 2, np.int64),
            np.zeros(depth + 1, np.int64), np.zeros(depth + 1, np.int64))


@njit(cache=True, no_cpython_wrapper=True)
def _append(T, root, flat, base, n, act, na, depth):
    """ensure + append_token: returns the (possibly grown) forest and the new active count."""
    T = ensure(T, depth + 2, depth + 2, depth + 1)
    na = append_token(T, root, flat, base, n, act, na, depth)
    return T, na


@njit(cache=True, no_cpython_wrapper=True)
def _new_seq(T, D, fifo, live, glen, gbase, r, maxc, flat):
    """Reserve a global slot for request r; FIFO eviction beyond maxc (> 0). Returns nothing."""
    fifo[D[D_TAIL]] = r
    D[D_TAIL] += 1
    if maxc > 0:
        while D[D_TAIL] - D[D_HEAD] > maxc:
            e = fifo[D[D_HEAD]]
            D[D_HEAD] += 1
            if live[e] == 1:
                remove_seq(T, GROOT, flat, gbase[e], glen[e])
                D[D_LIVE] -= 1
            live[e] = 2                                 # evicted: no longer in the global tree


@njit(cache=True)
def sequential_chunk(T, TL, D, fifo, live, glen, flat, pbase, plen, olen, rowbase, lo, hi,
                     depth, maxc, caps, minp, kmax, acc, dr):
    """Requests lo..hi-1 of the sequential replay; rowbase[r] < 0: insert the response only.
    T holds the global tree, TL the local tree of the request being drafted (reset per request).
    Returns both forests (arrays may have grown)."""
    lact = np.zeros(depth, np.int64)
    gact = np.zeros(depth, np.int64)
    S = _scratch(kmax, depth)
    dbuf = np.zeros(kmax, np.int64)
    abuf = np.zeros(kmax, np.int64)
    gbase = pbase + plen
    for r in range(lo, hi):
        no = olen[r]
        if no == 0:
            continue
        ob = gbase[r]
        if rowbase[r] < 0:
            if maxc == 0:
                continue
            _new_seq(T, D, fifo, live, glen, gbase, r, maxc, flat)
            ng = I0
            for t in range(no):
                T, ng = _append(T, GROOT, flat, ob, t, gact, ng, depth)
            live[r] = 1
            glen[r] = no
            D[D_LIVE] += 1
            continue
        pb = pbase[r]
        npr = plen[r]
        TL = reset_forest(TL, 2 * (npr + no) + 2)
        lroot = new_node(TL, I0, I0, I0, I0, NO_PARENT)
        nl = I0
        for i in range(npr):
            TL, nl = _append(TL, lroot, flat, pb, i, lact, nl, depth)
        cached = maxc != 0
        if cached:
            _new_seq(T, D, fifo, live, glen, gbase, r, maxc, flat)
        TL, nl = _append(TL, lroot, flat, pb, npr, lact, nl, depth)
        ng = I0
        if cached:
            T, ng = _append(T, GROOT, flat, ob, I0, gact, ng, depth)
            live[r] = 1
            glen[r] = 1
            D[D_LIVE] += 1
        row = rowbase[r]
        for t in range(1, no):
            fhi = t + kmax if t + kmax < no else no
            draft_row(TL, T, flat, lroot, pb, npr + t, lact, nl, gact, ng if live[r] == 1 else -1,
                      D[D_LIVE], ob + t, ob + fhi, caps, minp, kmax, depth, dbuf, abuf, S)
            for k in range(kmax):
                dr[row + t, k] = dbuf[k]
                acc[row + t, k] = abuf[k]
            TL, nl = _append(TL, lroot, flat, pb, npr + t, lact, nl, depth)
            if live[r] == 1:
                T, ng = _append(T, GROOT, flat, ob, t, gact, ng, depth)
                glen[r] = t + 1
    return T, TL


@njit(cache=True)
def concurrent_all(T, D, fifo, live, glen, flat, pbase, plen, olen, rowbase, first, conc,
                   depth, maxc, caps, minp, kmax, acc, dr):
    """The whole concurrent (round-robin, one token per tick) replay of requests first.. (those
    before `first` are a prelude sequential_chunk already inserted). Returns the forest."""
    n_req = olen.shape[0]
    gbase = pbase + plen
    lact = np.zeros((conc, depth), np.int64)
    gact = np.zeros((conc, depth), np.int64)
    s_req = np.zeros(conc, np.int64)
    s_t = np.zeros(conc, np.int64)
    s_root = np.zeros(conc, np.int64)
    s_nl = np.zeros(conc, np.int64)
    s_ng = np.zeros(conc, np.int64)
    order = np.zeros(conc, np.int64)          # slot ids of the in-flight requests, in start order
    free_slots = np.arange(conc)[::-1].copy()
    nfree = conc
    nact = 0
    S = _scratch(kmax, depth)
    dbuf = np.zeros(kmax, np.int64)
    abuf = np.zeros(kmax, np.int64)
    nxt = first
    while True:
        # start requests while slots are free (queue = non-empty requests in order)
        while nact < conc:
            while nxt < n_req and olen[nxt] == 0:
                nxt += 1
            if nxt >= n_req:
                break
            r = nxt
            nxt += 1
            nfree -= 1
            s = free_slots[nfree]
            T = ensure(T, I1, I0, I0)
            lroot = new_node(T, I0, I0, I0, I0, NO_PARENT)
            pb = pbase[r]
            nl = I0
            for i in range(plen[r]):
                T, nl = _append(T, lroot, flat, pb, i, lact[s], nl, depth)
            if maxc != 0:
                _new_seq(T, D, fifo, live, glen, gbase, r, maxc, flat)
            T, nl = _append(T, lroot, flat, pb, plen[r], lact[s], nl, depth)
            ng = I0
            if live[r] == 0 and maxc != 0:
                T, ng = _append(T, GROOT, flat, gbase[r], I0, gact[s], ng, depth)
                live[r] = 1
                glen[r] = 1
                D[D_LIVE] += 1
            s_req[s], s_t[s], s_root[s], s_nl[s], s_ng[s] = r, 1, lroot, nl, ng
            order[nact] = s
            nact += 1
        if nact == 0:
            break
        keep = 0
        for q in range(nact):
            s = order[q]
            r = s_req[s]
            t = s_t[s]
            no = olen[r]
            if t < no:
                pb = pbase[r]
                ob = gbase[r]
                fhi = t + kmax if t + kmax < no else no
                draft_row(T, T, flat, s_root[s], pb, plen[r] + t, lact[s], s_nl[s], gact[s],
                          s_ng[s] if live[r] == 1 else -1, D[D_LIVE], ob + t, ob + fhi,
                          caps, minp, kmax, depth, dbuf, abuf, S)
                row = rowbase[r]
                for k in range(kmax):
                    dr[row + t, k] = dbuf[k]
                    acc[row + t, k] = abuf[k]
                T, s_nl[s] = _append(T, s_root[s], flat, pb, plen[r] + t, lact[s], s_nl[s], depth)
                if live[r] == 1:
                    T, s_ng[s] = _append(T, GROOT, flat, ob, t, gact[s], s_ng[s], depth)
                    glen[r] = t + 1
                t += 1
                s_t[s] = t
            if t >= no:
                free_tree(T, s_root[s], np.empty(T[0][H_NEXT] + 1, np.int64))
                free_slots[nfree] = s
                nfree += 1
            else:
                order[keep] = s
                keep += 1
        nact = keep
    return T
