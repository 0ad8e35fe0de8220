"""Compiled (numba) copy of vLLM 0.34's GPU suffix speculator, drafting every K of a position at once.

Same drafts as reference.py (tests/unit/test_suffix_gpu_drafter.py); the differences are of method:
- the own-history scan visits only the earlier occurrences of the last token (a linked list `prev`
  over the flat token array), newest first, and stops at a full-depth match: the result (longest
  match, latest position) is the kernel's;
- the corpus candidates (slots, verification c_len, de-duplication, continuations) do not depend on
  K, and for one match length L the vote's chain up to position d does not either (a token's count
  only looks at position d), so each L's chain is voted once to kmax with its running sum of
  counts; at cap K the L chosen is the best num(min(K, n_L)) / den_L (ties: larger L), which is
  how the K-cut kernel scores it. Only that choice differs per K, so it is redone for each K;
- a draft at cap K is a prefix of its source's draft at kmax (own history: copied tokens, then
  fillers; corpus: the chain of that L, then fillers), so a(t, K) = min(K, accepted at kmax) of
  the source chosen at K.
Documents of one ingestion call are placed and indexed one after another: the same ring and table
as the kernel's parallel placement (a later document overwrites an earlier; the index keeps the
maximum entry, and entries grow with the document number).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# vLLM's constants (params.py names them; a unit test holds the two equal). Literal here: numba
# freezes globals into the cached machine code and re-compiles only when this file changes.
HASH_MUL = 0x9E3779B97F4A7C15
SLOTS = 8
PROMPT_CONTEXT = 3
_MUL = np.uint64(HASH_MUL)
_MASK32 = np.int64(0xFFFFFFFF)
NCAND = 2 * SLOTS


@njit(cache=True)
def build_prev(flat, pbase, plen, olen, last):
    """prev[i] = the latest j < i of the same request with flat[j] == flat[i], else -1. `last` is
    scratch of MAX_TOKEN + 1 entries (any content)."""
    prev = np.full(flat.size, -1, np.int64)
    for r in range(pbase.size):
        lo = pbase[r]
        for i in range(lo, lo + plen[r] + olen[r]):
            tok = flat[i]
            j = last[tok]
            if j >= lo and j < i:
                prev[i] = j
            last[tok] = i
    return prev


@njit(cache=True, no_cpython_wrapper=True)
def _bucket(hv, nb):
    return np.int64(((hv >> np.uint64(29)) ^ hv) & np.uint64(nb - 1))


@njit(cache=True)
def ingest(ring, table, st, flat, a, b, cap, nb):
    """Append flat[a:b] as one document (its newest cap-1 tokens) at st[0] (head), wrapping to 0
    when it would not fit, with a -1 separator after it; index each position j >= 2 (2-token key)
    and j >= 4 (4-token key) in slot (st[1] mod SLOTS) of its buckets. st[1] counts documents."""
    if cap <= 0:
        return
    a = max(a, b - (cap - 1))
    n = max(b - a, 0)
    head = st[0]
    if head + n + 1 > cap:
        head = 0
    seq = st[1]
    slot = seq % SLOTS
    for j in range(n):
        ring[head + j] = flat[a + j]
        if j < 2:
            continue
        hv = np.uint64(0)
        for d in range(4):
            q = j - 1 - d
            tok = np.uint64(flat[a + q]) if q >= 0 else np.uint64(0)
            hv = (hv ^ tok) * _MUL
            if d == 1:
                val = (seq << 32) | (head + j)
                bk = _bucket(hv, nb)
                if table[1, bk, slot] < val:
                    table[1, bk, slot] = val
        if j >= 4:
            val = (seq << 32) | (head + j)
            bk = _bucket(hv, nb)
            if table[0, bk, slot] < val:
                table[0, bk, slot] = val
    ring[head + n] = -1
    st[0] = head + n + 1
    st[1] = seq + 1


@njit(cache=True, no_cpython_wrapper=True)
def own_match(flat, prev, lo, seq_len, depth):
    """(l_len, l_pos) of the history flat[lo:lo+seq_len]: longest match, latest end."""
    last = lo + seq_len - 1
    best_m = 0
    best_p = 0
    j = prev[last]
    while j >= lo:
        m = 1
        while m < depth and j - m >= lo and flat[j - m] == flat[last - m]:
            m += 1
        if m > best_m:
            best_m = m
            best_p = j + 1 - lo
            if m >= depth:
                break
        j = prev[j]
    return best_m, best_p


@njit(cache=True, no_cpython_wrapper=True)
def corpus_chains(flat, lo, seq_len, ring, cap, table, nb, depth, kmax, vals, cpos, clen, ok,
                  cont, Ls, dens, nums, ns, chains):
    """The corpus vote's candidates and, per distinct match length (in candidate order), its
    chain to kmax: Ls[i], dens[i], nums[i, d] = sum of counts of chain tokens 0..d-1, ns[i],
    chains[i]. Returns the number of distinct lengths (0: no candidate)."""
    last = lo + seq_len - 1
    hv = np.uint64(0)
    b2 = np.int64(0)
    for d in range(4):
        tok = np.uint64(flat[last - d]) if seq_len - 1 - d >= 0 else np.uint64(0)
        hv = (hv ^ tok) * _MUL
        if d == 1:
            b2 = _bucket(hv, nb)
    b4 = _bucket(hv, nb)
    for c in range(NCAND):
        if c < SLOTS:
            v = table[0, b4, c]
            key = 4
        else:
            v = table[1, b2, c - SLOTS]
            key = 2
        vals[c] = v
        p = v & _MASK32
        cpos[c] = p
        ok[c] = False
        clen[c] = 0
        if v < 0:
            continue
        m = 0
        while m < depth and p - 1 - m >= 0 and m <= seq_len - 1 and ring[p - 1 - m] == flat[last - m]:
            m += 1
        clen[c] = m
        if p < cap and ring[p] >= 0 and m >= key and seq_len >= key:
            ok[c] = True
            for c2 in range(c):
                if ok[c2] and cpos[c2] == p:
                    ok[c] = False
                    break
    for c in range(NCAND):
        if not ok[c]:
            continue
        stop = False
        for d in range(kmax):
            q = cpos[c] + d
            if stop or q >= cap or ring[q] < 0:
                stop = True
                cont[c, d] = -1
            else:
                cont[c, d] = ring[q]
    nL = 0
    alive = np.zeros(NCAND, np.bool_)
    for c in range(NCAND):
        if not ok[c]:
            continue
        L = clen[c]
        dup = False
        for i in range(nL):
            if Ls[i] == L:
                dup = True
                break
        if dup:
            continue
        den = 0
        for c2 in range(NCAND):
            alive[c2] = ok[c2] and clen[c2] >= L
            if alive[c2]:
                den += 1
        num = 0
        n = 0
        nums[nL, 0] = 0
        for d in range(kmax):
            cmax = 0
            newest = np.int64(-1)
            tok = np.int64(-1)
            for c2 in range(NCAND):
                if not alive[c2] or cont[c2, d] < 0:
                    continue
                cnt = 0
                for c3 in range(NCAND):
                    if alive[c3] and cont[c3, d] == cont[c2, d]:
                        cnt += 1
                if cnt > cmax or (cnt == cmax and vals[c2] > newest):
                    cmax = cnt
                    newest = vals[c2]
                    tok = cont[c2, d]
            if cmax == 0:
                break
            chains[nL, d] = tok
            num += cmax
            n += 1
            nums[nL, d + 1] = num
            for c2 in range(NCAND):
                alive[c2] = alive[c2] and cont[c2, d] == tok
        Ls[nL] = L
        dens[nL] = den
        ns[nL] = n
        nL += 1
    return nL


@njit(cache=True, no_cpython_wrapper=True)
def _accepted(flat, src, nv, filler, out0, t, n_out, kmax):
    """Leading slots of a kmax-slot draft (src[0:nv] from flat, then the filler) equal to the
    output from t on."""
    a = 0
    while a < kmax and t + a < n_out:
        tok = flat[src + a] if a < nv else filler
        if tok != flat[out0 + t + a]:
            break
        a += 1
    return a


@njit(cache=True, no_cpython_wrapper=True)
def _accepted_chain(flat, chain, nv, filler, out0, t, n_out, kmax):
    a = 0
    while a < kmax and t + a < n_out:
        tok = chain[a] if a < nv else filler
        if tok != flat[out0 + t + a]:
            break
        a += 1
    return a


@njit(cache=True)
def draft_row(flat, prev, lo, seq_len, out0, t, n_out, ring, cap, table, nb, depth, kmax,
              use_corpus, S, acc_row, dr_row, src_row, len_row):
    """d(t, K) and a(t, K) for K = 1..kmax of a request whose history is flat[lo:lo+seq_len]
    (output starting at out0, output position t), with each K's draft source (0 own history,
    1 corpus) and match length (what adaptive verification's confidences are keyed by; capped
    at 255). S: scratch arrays (see new_scratch)."""
    vals, cpos, clen, ok, cont, Ls, dens, nums, ns, chains, accL = S
    l_len, l_pos = own_match(flat, prev, lo, seq_len, depth)
    filler = flat[lo + seq_len - 1]
    own_avail = min(kmax, seq_len - l_pos) if l_len > 0 else 0
    a_own = _accepted(flat, lo + l_pos, own_avail, filler, out0, t, n_out, kmax)
    nL = 0
    if use_corpus:
        nL = corpus_chains(flat, lo, seq_len, ring, cap, table, nb, depth, kmax, vals, cpos, clen,
                           ok, cont, Ls, dens, nums, ns, chains)
        for i in range(nL):
            accL[i] = -1
    for k in range(1, kmax + 1):
        best = -1
        if nL > 0:
            bnum = np.int64(-1)
            bden = np.int64(1)
            blen = np.int64(0)
            for i in range(nL):
                num = nums[i, min(k, ns[i])]
                lhs = num * bden
                rhs = bnum * dens[i]
                if lhs > rhs or (lhs == rhs and blen < Ls[i]):
                    bnum = num
                    bden = dens[i]
                    blen = Ls[i]
                    best = i
            if blen <= l_len:
                best = -1
        if best < 0:
            dr_row[k - 1] = min(k, own_avail)
            acc_row[k - 1] = min(k, a_own)
            src_row[k - 1] = 0
            len_row[k - 1] = min(l_len, 255)
        else:
            if accL[best] < 0:
                accL[best] = _accepted_chain(flat, chains[best], ns[best], filler, out0, t,
                                             n_out, kmax)
            dr_row[k - 1] = min(k, ns[best])
            acc_row[k - 1] = min(k, accL[best])
            src_row[k - 1] = 1
            len_row[k - 1] = min(Ls[best], 255)


def new_scratch(kmax: int) -> tuple:
    """Scratch arrays of draft_row (allocated once per replay)."""
    return (np.zeros(NCAND, np.int64), np.zeros(NCAND, np.int64), np.zeros(NCAND, np.int64),
            np.zeros(NCAND, np.bool_), np.full((NCAND, kmax), -1, np.int64),
            np.zeros(NCAND, np.int64), np.zeros(NCAND, np.int64),
            np.zeros((NCAND, kmax + 1), np.int64), np.zeros(NCAND, np.int64),
            np.zeros((NCAND, kmax), np.int64), np.zeros(NCAND, np.int64))


@njit(cache=True)
def draft_request(flat, prev, pbase, plen, olen, r, rowbase, ring, cap, table, nb, depth, kmax,
                  use_corpus, S, acc, dr, src, ml):
    """Every decode position t = 1..olen-1 of request r into rows rowbase + t."""
    lo = pbase[r]
    out0 = lo + plen[r]
    for t in range(1, olen[r]):
        draft_row(flat, prev, lo, plen[r] + t, out0, t, olen[r], ring, cap, table, nb, depth,
                  kmax, use_corpus, S, acc[rowbase + t], dr[rowbase + t], src[rowbase + t],
                  ml[rowbase + t])


@njit(cache=True)
def sequential(flat, prev, pbase, plen, olen, rowbase, lo_req, hi_req, ring, cap, table, nb, st,
               depth, kmax, use_corpus, S, acc, dr, src, ml):
    """Requests lo_req..hi_req-1 one after another: drafted (rowbase >= 0), then their document
    enters the corpus (a finished request feeds every later request, never itself)."""
    for r in range(lo_req, hi_req):
        if olen[r] == 0:
            continue
        if rowbase[r] >= 0:
            draft_request(flat, prev, pbase, plen, olen, r, rowbase[r], ring, cap, table, nb,
                          depth, kmax, use_corpus, S, acc, dr, src, ml)
        if use_corpus:
            ingest(ring, table, st, flat, pbase[r] + max(plen[r] - PROMPT_CONTEXT, 0),
                   pbase[r] + plen[r] + olen[r], cap, nb)


@njit(cache=True)
def concurrent(flat, prev, pbase, plen, olen, rowbase, first, concurrency, lag, ring, cap, table,
               nb, st, depth, kmax, use_corpus, S, acc, dr, src, ml):
    """Round-robin replay of requests first.. at `concurrency` in flight, one output position
    per request per tick (the suffix drafter's concurrent ordering); a request that finishes at
    tick s enters the corpus before the drafts of tick s + lag (with the others of its tick, in
    request order)."""
    n = olen.size
    queue = np.empty(n, np.int64)
    nq = 0
    for r in range(first, n):
        if olen[r] > 0:
            queue[nq] = r
            nq += 1
    qh = 0
    act_r = np.empty(concurrency, np.int64)
    act_t = np.empty(concurrency, np.int64)
    na = 0
    pend_r = np.empty(n, np.int64)
    pend_tick = np.empty(n, np.int64)
    np_h = 0
    np_t = 0
    while qh < nq and na < concurrency:
        act_r[na] = queue[qh]
        act_t[na] = 1
        na += 1
        qh += 1
    tick = 0
    while na > 0:
        if use_corpus:
            e = np_h
            while e < np_t and pend_tick[e] <= tick:
                e += 1
            if e > np_h:
                batch = np.sort(pend_r[np_h:e])
                for r in batch:
                    ingest(ring, table, st, flat, pbase[r] + max(plen[r] - PROMPT_CONTEXT, 0),
                           pbase[r] + plen[r] + olen[r], cap, nb)
            np_h = e
        else:
            np_h = np_t
        keep = 0
        for s in range(na):
            r = act_r[s]
            t = act_t[s]
            if t < olen[r]:
                lo = pbase[r]
                row = rowbase[r] + t
                draft_row(flat, prev, lo, plen[r] + t, lo + plen[r], t, olen[r], ring, cap,
                          table, nb, depth, kmax, use_corpus, S, acc[row], dr[row], src[row],
                          ml[row])
                t += 1
            if t >= olen[r]:
                pend_r[np_t] = r
                pend_tick[np_t] = tick + lag
                np_t += 1
            else:
                act_r[keep] = r
                act_t[keep] = t
                keep += 1
        na = keep
        while qh < nq and na < concurrency:
            act_r[na] = queue[qh]
            act_t[na] = 1
            na += 1
            qh += 1
        tick += 1
