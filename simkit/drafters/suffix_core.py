"""Compiled (numba) suffix-tree primitives with the exact semantics of simkit.drafters.suffix_tree.

The pure-Python SuffixTree is the reference; this module keeps the same tree move for move, in flat
arrays so that numba can compile it. Differences of representation only (tested byte for byte):
- one "forest" holds every tree: the global tree's root is node 0, each request's local tree gets a
  root of its own, and node ids are unique across trees, so one hash map (parent << 21 | token ->
  child) serves all of them;
- a node refers to its tokens by an absolute position `rpos` into one flat token array holding every
  sequence (the requests' prompts and outputs, laid out before the replay); appending to a
  sequence reads its next token from there;
- a node's children are a sorted slice of a shared pool (same order as the reference sibling list),
  with each child's index in `pos`, so a child is found without scanning its equal-count group;
- a finished local tree is freed (its node ids and child slices are reused); the reference never
  frees, but ids do not influence drafts.
State is a tuple of arrays, T (see new_forest); capacity is reserved by `ensure` before each token.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simkit.drafters._jit_cache import install as _install_cache_locators

_install_cache_locators()
SHIFT = 21
# header fields of T[0]
H_NEXT, H_FREE, H_PUSED, H_HCNT, H_HMASK, H_MAXCAP = 0, 1, 2, 3, 4, 5
_NCLASS = 40
_MIX = np.uint64(0x9E3779B97F4A7C15)


def new_forest(nodes: int = 1 << 12, pool: int = 1 << 14, hash_slots: int = 1 << 13) -> tuple:
    """Empty forest with room for `nodes` nodes; grows on demand through `ensure`."""
    H = np.zeros(8, np.int64)
    H[H_FREE] = -1
    H[H_HMASK] = hash_slots - 1
    cnt = np.zeros(nodes, np.int64)
    tok = np.zeros(nodes, np.int32)
    ln = np.zeros(nodes, np.int32)
    rpos = np.zeros(nodes, np.int64)
    par = np.zeros(nodes, np.int64)
    pos = np.zeros(nodes, np.int32)
    cst = np.zeros(nodes, np.int64)
    clen = np.zeros(nodes, np.int32)
    ccap = np.zeros(nodes, np.int32)
    pl = np.zeros(pool, np.int64)
    hk = np.full(hash_slots, -1, np.int64)
    hv = np.zeros(hash_slots, np.int64)
    fl = np.full(_NCLASS, -1, np.int64)
    return (H, cnt, tok, ln, rpos, par, pos, cst, clen, ccap, pl, hk, hv, fl)


# -- hash map: int64 key -> int64 value, linear probing, backward-shift deletion ---------------------
@njit(cache=True, inline="always")
def _home(key, mask):
    h = np.uint64(key) * _MIX
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True)
def h_get(T, key):
    hk, hv, mask = T[11], T[12], T[0][H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i]
        if k == key:
            return hv[i]
        if k == -1:
            return -1
        i = (i + 1) & mask


@njit(cache=True)
def h_put(T, key, val):
    H, hk, hv = T[0], T[11], T[12]
    mask = H[H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i]
        if k == key:
            hv[i] = val
            return
        if k == -1:
            hk[i] = key
            hv[i] = val
            H[H_HCNT] += 1
            return
        i = (i + 1) & mask


@njit(cache=True)
def h_del(T, key):
    H, hk, hv = T[0], T[11], T[12]
    mask = H[H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i]
        if k == key:
            break
        if k == -1:
            return
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        k = hk[j]
        if k == -1:
            break
        h = _home(k, mask)
        if (i <= j and i < h <= j) or (i > j and (h > i or h <= j)):
            continue                                 # entry j is still reachable from its home
        hk[i] = k
        hv[i] = hv[j]
        i = j
    hk[i] = -1
    H[H_HCNT] -= 1


# -- capacity ----------------------------------------------------------------------------------------
@njit(cache=True)
def _grow(a, n):
    b = np.zeros(n, a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def ensure(T, nodes, keys, depth):
    """T with room for `nodes` fresh nodes, `keys` new hash keys and `depth` child-slice growths."""
    H, cnt, tok, ln, rpos, par, pos, cst, clen, ccap, pl, hk, hv, fl = T
    need = H[H_NEXT] + nodes
    if need > cnt.shape[0]:
        n = cnt.shape[0]
        while n < need:
            n *= 2
        cnt, tok, ln, rpos = _grow(cnt, n), _grow(tok, n), _grow(ln, n), _grow(rpos, n)
        par, pos, cst, clen, ccap = _grow(par, n), _grow(pos, n), _grow(cst, n), _grow(clen, n), _grow(ccap, n)
    needp = H[H_PUSED] + depth * 2 * (H[H_MAXCAP] + 2) + 4
    if needp > pl.shape[0]:
        n = pl.shape[0]
        while n < needp:
            n *= 2
        pl = _grow(pl, n)
    if 2 * (H[H_HCNT] + keys) > hk.shape[0]:
        n = hk.shape[0]
        while 2 * (H[H_HCNT] + keys) > n:
            n *= 2
        ok, ov = hk, hv
        hk = np.full(n, -1, np.int64)
        hv = np.zeros(n, np.int64)
        mask = n - 1
        H[H_HMASK] = mask
        for s in range(ok.shape[0]):
            k = ok[s]
            if k != -1:
                i = _home(k, mask)
                while hk[i] != -1:
                    i = (i + 1) & mask
                hk[i] = k
                hv[i] = ov[s]
    return (H, cnt, tok, ln, rpos, par, pos, cst, clen, ccap, pl, hk, hv, fl)


# -- nodes and child slices -----------------------------------------------------------------------------
@njit(cache=True)
def new_node(T, count, token, length, rp, parent):
    H, cnt, tok, ln, rpos, par, pos, cst, clen, ccap = T[:10]
    v = H[H_FREE]
    if v >= 0:
        H[H_FREE] = par[v]
    else:
        v = H[H_NEXT]
        H[H_NEXT] = v + 1
    cnt[v] = count
    tok[v] = token
    ln[v] = length
    rpos[v] = rp
    par[v] = parent
    pos[v] = 0
    cst[v] = -1
    clen[v] = 0
    ccap[v] = 0
    return v


@njit(cache=True, inline="always")
def _cls(cap):
    c = 0
    while (2 << c) < cap:
        c += 1
    return c


@njit(cache=True)
def _free_block(T, start, cap):
    pl, fl = T[10], T[13]
    c = _cls(cap)
    pl[start] = fl[c]
    fl[c] = start


@njit(cache=True)
def append_child(T, u, v):
    H, pos, cst, clen, ccap, pl, fl = T[0], T[6], T[7], T[8], T[9], T[10], T[13]
    n = clen[u]
    if n == ccap[u]:
        cap = 2 if n == 0 else 2 * n
        c = _cls(cap)
        s = fl[c]
        if s >= 0:
            fl[c] = pl[s]
        else:
            s = H[H_PUSED]
            H[H_PUSED] = s + cap
        if cap > H[H_MAXCAP]:
            H[H_MAXCAP] = cap
        old = cst[u]
        for q in range(n):
            pl[s + q] = pl[old + q]
        if n > 0:
            _free_block(T, old, n)
        cst[u] = s
        ccap[u] = cap
    pl[cst[u] + n] = v
    pos[v] = n
    clen[u] = n + 1


@njit(cache=True)
def head(T, u):
    """First child of u (highest count, ties in the reference order), or -1."""
    if T[8][u] == 0:
        return -1
    return T[10][T[7][u]]


@njit(cache=True)
def replace_child(T, u, old, new):
    pos, cst, pl = T[6], T[7], T[10]
    i = pos[old]
    pl[cst[u] + i] = new
    pos[new] = i


@njit(cache=True)
def drop_child(T, u, v):
    pos, cst, clen, pl = T[6], T[7], T[8], T[10]
    s = cst[u]
    n = clen[u]
    for q in range(pos[v], n - 1):
        w = pl[s + q + 1]
        pl[s + q] = w
        pos[w] = q
    clen[u] = n - 1


@njit(cache=True)
def _first_at_most(T, s, lo, hi, value):
    """First index j in [lo, hi) of the slice at s with cnt <= value (counts decrease along it)."""
    cnt, pl = T[1], T[10]
    while lo < hi:
        mid = (lo + hi) >> 1
        if cnt[pl[s + mid]] <= value:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def inc(T, u, x):
    """Count of child x of u rises by one; it moves as the reference sibling list moves it."""
    cnt, pos, cst, clen, pl = T[1], T[6], T[7], T[8], T[10]
    c = cnt[x]
    if clen[u] > 1:
        i = pos[x]
        if i > 0:
            s = cst[u]
            pc = cnt[pl[s + i - 1]]
            j = -1
            if pc == c:                      # not first among c: becomes last among c+1
                j = _first_at_most(T, s, 0, i, c)
            elif pc == c + 1:                # first among c: becomes first among c+1
                j = _first_at_most(T, s, 0, i, c + 1)
            if j >= 0:
                for q in range(i, j, -1):
                    w = pl[s + q - 1]
                    pl[s + q] = w
                    pos[w] = q
                pl[s + j] = x
                pos[x] = j
    cnt[x] = c + 1


@njit(cache=True)
def dec(T, u, x):
    """Count of child x of u falls by one: it becomes first among its new count."""
    cnt, pos, cst, clen, pl = T[1], T[6], T[7], T[8], T[10]
    c = cnt[x]
    n = clen[u]
    if n > 1:
        s = cst[u]
        i = pos[x]
        J = _first_at_most(T, s, i + 1, n, c - 1)
        for q in range(i, J - 1):
            w = pl[s + q + 1]
            pl[s + q] = w
            pos[w] = q
        pl[s + J - 1] = x
        pos[x] = J - 1
    cnt[x] = c - 1


# -- building ---------------------------------------------------------------------------------------
@njit(cache=True)
def append_token(T, root, flat, base, n, act, na, depth):
    """Append flat[base + n] to the sequence at `base` (n tokens so far) of the tree at `root`.

    `act[:na]` are the sequence's active suffix nodes, longest first; returns their new count."""
    cnt, tok, ln, rpos, par = T[1], T[2], T[3], T[4], T[5]
    token = flat[base + n]
    if na == depth:
        for q in range(na - 1):
            act[q] = act[q + 1]
        na -= 1
    act[na] = root
    na += 1
    cnt[root] += 1
    n += 1
    for k in range(na):
        u = act[k]
        if u != root and cnt[u] == 1:
            # Only this suffix passes through u and ends there: the leaf grows.
            lu = ln[u] + 1
            ln[u] = lu
            rpos[u] = base + n - lu
            continue
        key = (u << SHIFT) | token
        c = h_get(T, key)
        if c < 0:
            v = new_node(T, 1, token, 1, base + n - 1, u)
            h_put(T, key, v)
            append_child(T, u, v)
            act[k] = v
        elif u != root and cnt[u] == cnt[c] + 1:
            # Only this suffix ends at u; all others continue into c.
            if ln[c] == 1:                                  # c absorbs u
                p = par[u]
                cnt[c] += 1
                tu = tok[u]
                tok[c] = tu
                lc = ln[u] + 1
                ln[c] = lc
                rpos[c] = base + n - lc
                par[c] = p
                replace_child(T, p, u, c)
                h_put(T, (p << SHIFT) | tu, c)
                h_del(T, key)
                act[k] = c
            else:                                           # u grows by one into c
                lu = ln[u] + 1
                ln[u] = lu
                rpos[u] = base + n - lu
                ln[c] -= 1
                rpos[c] += 1
                nt = flat[rpos[c]]
                tok[c] = nt
                if nt != token:
                    h_del(T, key)
                    h_put(T, (u << SHIFT) | nt, c)
        elif ln[c] == 1:
            inc(T, u, c)
            act[k] = c
        else:                                               # split c after its first token
            w = new_node(T, cnt[c], token, 1, base + n - 1, u)
            replace_child(T, u, c, w)
            h_put(T, key, w)
            ln[c] -= 1
            rpos[c] += 1
            nt = flat[rpos[c]]
            tok[c] = nt
            h_put(T, (w << SHIFT) | nt, c)
            par[c] = w
            append_child(T, w, c)
            inc(T, u, w)
            act[k] = w
    return na


@njit(cache=True)
def remove_seq(T, root, flat, base, n):
    """Remove every suffix of the n-token sequence at `base` from the tree at `root`."""
    cnt, tok, ln, rpos, par, clen = T[1], T[2], T[3], T[4], T[5], T[8]
    for start in range(n):
        node = root
        cnt[root] -= 1
        idx = start
        while idx < n:
            key = (node << SHIFT) | flat[base + idx]
            c = h_get(T, key)
            if c < 0:
                break
            if cnt[c] > 1:
                dec(T, node, c)
            else:
                drop_child(T, node, c)
                h_del(T, key)
                break
            idx += ln[c]
            node = c
        if node != root and clen[node] == 1:
            c = head(T, node)
            if cnt[node] == cnt[c]:                         # merge node into its only child
                p = par[node]
                h_del(T, (node << SHIFT) | tok[c])
                tok[c] = tok[node]
                ln[c] += ln[node]
                rpos[c] -= ln[node]
                par[c] = p
                replace_child(T, p, node, c)
                h_put(T, (p << SHIFT) | tok[node], c)
                clen[node] = 0


@njit(cache=True)
def free_tree(T, root, stack):
    """Free every node reachable from `root` (a finished local tree): hash keys, child slices, ids.
    `stack` needs room for the tree's node count; returns nothing."""
    H, tok, par, cst, clen, ccap, pl = T[0], T[2], T[5], T[7], T[8], T[9], T[10]
    sp = 0
    stack[sp] = root
    sp += 1
    while sp:
        sp -= 1
        u = stack[sp]
        s = cst[u]
        for q in range(clen[u]):
            c = pl[s + q]
            h_del(T, (u << SHIFT) | tok[c])
            stack[sp] = c
            sp += 1
        if ccap[u] > 0:
            _free_block(T, s, ccap[u])
        clen[u] = 0
        ccap[u] = 0
        par[u] = H[H_FREE]
        H[H_FREE] = u
