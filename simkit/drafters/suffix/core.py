"""Compiled (numba) suffix-tree primitives with the exact semantics of simkit.drafters.suffix.tree.

The pure-Python SuffixTree is the reference; this module keeps the same tree move for move, in flat
arrays so that numba can compile it. Differences of representation only (tested byte for byte):
- one "forest" holds every tree: the global tree's root is node 0, each request's local tree gets a
  root of its own, and node ids are unique across trees, so one hash map (parent << 21 | token ->
  child) serves all of them;
- a node is one 32-byte row of an int32 array (count, token, length, reference, parent, child slice
  start, child count | slice size class): one or two cache lines per node instead of one per field;
- a node refers to its tokens by an absolute position `rpos` into one flat token array holding every
  sequence (the requests' prompts and outputs, laid out before the replay); appending to a
  sequence reads its next token from there;
- a node's children are a sorted slice of a shared pool (same order as the reference sibling list);
  a child's index is found as the reference finds it (bisect on its count, scan its group), but the
  scan reads contiguous pool ids only;
- a finished local tree is freed (its node ids and child slices are reused); the reference never
  frees, but ids do not influence drafts.
State is a tuple of arrays, T (see new_forest); capacity is reserved by `ensure` before each token.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simkit.drafters.suffix._jit_cache import install as _install_cache_locators

_install_cache_locators()
# no_cpython_wrapper: a function only compiled code calls; numba compiles no Python-callable
# wrapper for it (those wrappers were ~1.2 of a fresh install's ~14 CPU-s of compile)

SHIFT = 21
# header fields of T[0]
H_NEXT, H_FREE, H_PUSED, H_HCNT, H_HMASK, H_MAXCAP = 0, 1, 2, 3, 4, 5
# node columns of T[1]; CL = child count | (slice size class << 24), a class-c slice holds 2^c children;
# column 5 is unused
CNT, TOK, LN, RPOS, PAR, CST, CL = 0, 1, 2, 3, 4, 6, 7
_LOW = (1 << 24) - 1
_NCLASS = 40
_MIX = np.uint64(0x9E3779B97F4A7C15)
# int64 scalars for constant arguments of compiled calls: numba compiles a function once per
# distinct literal argument (a Python 0 or 1 is typed Literal[int](0), a node field int32), so
# every call site passes int64 and each function compiles once.
I0, I1, NO_PARENT = np.int64(0), np.int64(1), np.int64(-1)
LIMIT = (1 << 31) - 1      # int32 node fields: node ids, counts, token positions, pool slots


def new_forest(nodes: int = 1 << 12, pool: int = 1 << 14, hash_slots: int = 1 << 13) -> tuple:
    """Empty forest with room for `nodes` nodes; grows on demand through `ensure`."""
    H = np.zeros(8, np.int64)
    H[H_FREE] = -1
    H[H_HMASK] = hash_slots - 1
    N = np.zeros((nodes, 8), np.int32)
    pl = np.zeros(pool, np.int32)
    hk = np.full((hash_slots, 2), -1, np.int64)
    fl = np.full(_NCLASS, -1, np.int64)
    return (H, N, pl, hk, fl)


# -- hash map: int64 key -> int64 value, linear probing, backward-shift deletion ---------------------
@njit(cache=True, no_cpython_wrapper=True, inline="always")
def _home(key, mask):
    h = np.uint64(key) * _MIX
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, no_cpython_wrapper=True)
def h_get(T, key):
    hk, mask = T[3], T[0][H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i, 0]
        if k == key:
            return hk[i, 1]
        if k == -1:
            return -1
        i = (i + 1) & mask


@njit(cache=True, no_cpython_wrapper=True)
def h_put(T, key, val):
    H, hk = T[0], T[3]
    mask = H[H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i, 0]
        if k == key:
            hk[i, 1] = val
            return
        if k == -1:
            hk[i, 0] = key
            hk[i, 1] = val
            H[H_HCNT] += 1
            return
        i = (i + 1) & mask


@njit(cache=True, no_cpython_wrapper=True)
def h_del(T, key):
    H, hk = T[0], T[3]
    mask = H[H_HMASK]
    i = _home(key, mask)
    while True:
        k = hk[i, 0]
        if k == key:
            break
        if k == -1:
            return
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        k = hk[j, 0]
        if k == -1:
            break
        h = _home(k, mask)
        if (i <= j and i < h <= j) or (i > j and (h > i or h <= j)):
            continue                                 # entry j is still reachable from its home
        hk[i, 0] = k
        hk[i, 1] = hk[j, 1]
        i = j
    hk[i, 0] = -1
    H[H_HCNT] -= 1


# -- capacity ----------------------------------------------------------------------------------------
@njit(cache=True, no_cpython_wrapper=True)
def _copy_rows(src, dst):
    """dst[:len(src)] = src, element by element: a slice assignment between arrays compiles
    numba's shape-checked broadcast and its error formatting, about 3 CPU-s of every first
    compile, for a copy made only when the forest grows."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@njit(cache=True, no_cpython_wrapper=True)
def ensure(T, nodes, keys, depth):
    """T with room for `nodes` fresh nodes, `keys` new hash keys and `depth` child-slice growths."""
    H, N, pl, hk, fl = T
    need = H[H_NEXT] + nodes
    if need > N.shape[0]:
        n = N.shape[0]
        while n < need:
            n *= 2
        if n > LIMIT:
            raise ValueError("suffix forest: more than 2^31 nodes")
        M = np.zeros((n, N.shape[1]), np.int32)
        _copy_rows(N, M)
        N = M
    needp = H[H_PUSED] + depth * 2 * (H[H_MAXCAP] + 2) + 4
    if needp > pl.shape[0]:
        n = pl.shape[0]
        while n < needp:
            n *= 2
        if n > LIMIT:
            raise ValueError("suffix forest: child pool over 2^31 slots")
        q = np.zeros(n, np.int32)
        for i in range(pl.shape[0]):
            q[i] = pl[i]
        pl = q
    if 2 * (H[H_HCNT] + keys) > hk.shape[0]:
        n = hk.shape[0]
        while 2 * (H[H_HCNT] + keys) > n:
            n *= 2
        old = hk
        hk = np.full((n, 2), -1, np.int64)
        mask = n - 1
        H[H_HMASK] = mask
        for s in range(old.shape[0]):
            k = old[s, 0]
            if k != -1:
                i = _home(k, mask)
                while hk[i, 0] != -1:
                    i = (i + 1) & mask
                hk[i, 0] = k
                hk[i, 1] = old[s, 1]
    return (H, N, pl, hk, fl)


@njit(cache=True, no_cpython_wrapper=True)
def reset_forest(T, keys):
    """The forest emptied for a new tree of about `keys` hash keys. The hash table is cleared, or
    reallocated when it is over 4x the size that `keys` needs, so a reset costs O(keys)."""
    H, N, pl, hk, fl = T
    H[:] = 0
    H[H_FREE] = -1
    fl[:] = -1
    n = 16
    while n < 2 * keys:
        n *= 2
    if hk.shape[0] > 4 * n:
        hk = np.full((n, 2), -1, np.int64)
    else:
        hk[:, 0] = -1
    H[H_HMASK] = hk.shape[0] - 1
    return (H, N, pl, hk, fl)


# -- nodes and child slices -----------------------------------------------------------------------------
@njit(cache=True)
def new_node(T, count, token, length, rp, parent):
    H, N = T[0], T[1]
    v = H[H_FREE]
    if v >= 0:
        H[H_FREE] = N[v, PAR]
    else:
        v = H[H_NEXT]
        H[H_NEXT] = v + 1
    N[v, CNT] = count
    N[v, TOK] = token
    N[v, LN] = length
    N[v, RPOS] = rp
    N[v, PAR] = parent
    N[v, CST] = -1
    N[v, CL] = 0
    return v


@njit(cache=True, no_cpython_wrapper=True)
def _free_block(T, start, cls):
    pl, fl = T[2], T[4]
    pl[start] = fl[cls]
    fl[cls] = start


@njit(cache=True, no_cpython_wrapper=True)
def append_child(T, u, v):
    H, N, pl, fl = T[0], T[1], T[2], T[4]
    cl = N[u, CL]
    n = cl & _LOW
    c = cl >> 24
    if c == 0 or n == (1 << c):
        nc = c + 1
        s = fl[nc]
        if s >= 0:
            fl[nc] = pl[s]
        else:
            s = H[H_PUSED]
            H[H_PUSED] = s + (1 << nc)
        if (1 << nc) > H[H_MAXCAP]:
            H[H_MAXCAP] = 1 << nc
        old = N[u, CST]
        for q in range(n):
            pl[s + q] = pl[old + q]
        if c > 0:
            _free_block(T, old, c)
        N[u, CST] = s
        c = nc
    pl[N[u, CST] + n] = v
    N[u, CL] = (n + 1) | (c << 24)


@njit(cache=True, no_cpython_wrapper=True)
def head(T, u):
    """First child of u (highest count, ties in the reference order), or -1."""
    N = T[1]
    if N[u, CL] & _LOW == 0:
        return -1
    return T[2][N[u, CST]]


@njit(cache=True, no_cpython_wrapper=True)
def replace_child(T, u, old, new):
    N, pl = T[1], T[2]
    s = N[u, CST]
    pl[s + _index(N, pl, s, N[u, CL] & _LOW, old)] = new


@njit(cache=True, no_cpython_wrapper=True)
def drop_child(T, u, v):
    N, pl = T[1], T[2]
    s = N[u, CST]
    n = N[u, CL] & _LOW
    for q in range(_index(N, pl, s, n, v), n - 1):
        pl[s + q] = pl[s + q + 1]
    N[u, CL] -= 1


@njit(cache=True, no_cpython_wrapper=True)
def _first_at_most(N, pl, s, lo, hi, value):
    """First index j in [lo, hi) of the slice at s with count <= value (counts decrease along it)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if N[pl[s + mid], CNT] <= value:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, no_cpython_wrapper=True)
def _index(N, pl, s, n, x):
    """Index of child x in the n-child slice at s: bisect to the first sibling whose count is <=
    x's, then scan the pool (contiguous ids, no node rows) for x. Kept instead of a per-node index
    field, which every shift of a sibling would have to rewrite in scattered rows."""
    j = 0 if n <= 16 else _first_at_most(N, pl, s, I0, n, np.int64(N[x, CNT]))
    while pl[s + j] != x:
        j += 1
    return j


@njit(cache=True, no_cpython_wrapper=True)
def inc(T, u, x):
    """Count of child x of u rises by one; it moves as the reference sibling list moves it."""
    N, pl = T[1], T[2]
    c = N[x, CNT]
    n = N[u, CL] & _LOW
    if n > 1:
        i = _index(N, pl, N[u, CST], n, x)
        if i > 0:
            s = N[u, CST]
            pc = N[pl[s + i - 1], CNT]
            j = -1
            if pc == c:                      # not first among c: becomes last among c+1
                j = _first_at_most(N, pl, s, I0, i, np.int64(c))
            elif pc == c + 1:                # first among c: becomes first among c+1
                j = _first_at_most(N, pl, s, I0, i, np.int64(c + 1))
            if j >= 0:
                for q in range(i, j, -1):
                    pl[s + q] = pl[s + q - 1]
                pl[s + j] = x
    N[x, CNT] = c + 1


@njit(cache=True, no_cpython_wrapper=True)
def dec(T, u, x):
    """Count of child x of u falls by one: it becomes first among its new count."""
    N, pl = T[1], T[2]
    c = N[x, CNT]
    n = N[u, CL] & _LOW
    if n > 1:
        s = N[u, CST]
        i = _index(N, pl, s, n, x)
        J = _first_at_most(N, pl, s, i + 1, n, c - 1)
        for q in range(i, J - 1):
            pl[s + q] = pl[s + q + 1]
        pl[s + J - 1] = x
    N[x, CNT] = c - 1


@njit(cache=True, no_cpython_wrapper=True, inline="always")
def _key(u, token):
    return (np.int64(u) << SHIFT) | np.int64(token)


@njit(cache=True, no_cpython_wrapper=True)
def find_child(T, u, token):
    """Child of u whose edge starts with `token`, or -1 (a lone child is checked without hashing)."""
    N = T[1]
    n = N[u, CL] & _LOW
    if n == 0:
        return -1
    if n == 1:
        c = T[2][N[u, CST]]
        return c if N[c, TOK] == token else -1
    return h_get(T, _key(u, token))


# -- building ---------------------------------------------------------------------------------------
@njit(cache=True, no_cpython_wrapper=True)
def append_token(T, root, flat, base, n, act, na, depth):
    """Append flat[base + n] to the sequence at `base` (n tokens so far) of the tree at `root`.

    `act[:na]` are the sequence's active suffix nodes, longest first; returns their new count."""
    N = T[1]
    token = flat[base + n]
    if na == depth:
        for q in range(na - 1):
            act[q] = act[q + 1]
        na -= 1
    act[na] = root
    na += 1
    N[root, CNT] += 1
    n += 1
    for k in range(na):
        u = act[k]
        if u != root and N[u, CNT] == 1:
            # Only this suffix passes through u and ends there: the leaf grows.
            lu = N[u, LN] + 1
            N[u, LN] = lu
            N[u, RPOS] = base + n - lu
            continue
        key = _key(u, token)
        c = find_child(T, u, token)
        if c < 0:
            v = new_node(T, I1, np.int64(token), I1, base + n - 1, u)
            h_put(T, key, v)
            append_child(T, u, v)
            act[k] = v
        elif u != root and N[u, CNT] == N[c, CNT] + 1:
            # Only this suffix ends at u; all others continue into c.
            if N[c, LN] == 1:                               # c absorbs u
                p = N[u, PAR]
                N[c, CNT] += 1
                tu = N[u, TOK]
                N[c, TOK] = tu
                lc = N[u, LN] + 1
                N[c, LN] = lc
                N[c, RPOS] = base + n - lc
                N[c, PAR] = p
                replace_child(T, np.int64(p), u, c)
                h_put(T, _key(p, tu), c)
                h_del(T, key)
                act[k] = c
            else:                                           # u grows by one into c
                lu = N[u, LN] + 1
                N[u, LN] = lu
                N[u, RPOS] = base + n - lu
                N[c, LN] -= 1
                rc = N[c, RPOS] + 1
                N[c, RPOS] = rc
                nt = flat[rc]
                N[c, TOK] = nt
                if nt != token:
                    h_del(T, key)
                    h_put(T, _key(u, nt), c)
        elif N[c, LN] == 1:
            inc(T, u, c)
            act[k] = c
        else:                                               # split c after its first token
            w = new_node(T, np.int64(N[c, CNT]), np.int64(token), I1, base + n - 1, u)
            replace_child(T, u, c, w)
            h_put(T, key, w)
            N[c, LN] -= 1
            rc = N[c, RPOS] + 1
            N[c, RPOS] = rc
            nt = flat[rc]
            N[c, TOK] = nt
            h_put(T, _key(w, nt), c)
            N[c, PAR] = w
            append_child(T, w, c)
            inc(T, u, w)
            act[k] = w
    return na


@njit(cache=True, no_cpython_wrapper=True)
def remove_seq(T, root, flat, base, n):
    """Remove every suffix of the n-token sequence at `base` from the tree at `root`."""
    N = T[1]
    for start in range(n):
        node = root
        N[root, CNT] -= 1
        idx = start
        while idx < n:
            tk = flat[base + idx]
            c = find_child(T, node, tk)
            if c < 0:
                break
            if N[c, CNT] > 1:
                dec(T, node, c)
            else:
                drop_child(T, node, c)
                h_del(T, _key(node, tk))
                break
            idx += N[c, LN]
            node = c
        if node != root and N[node, CL] & _LOW == 1:
            c = head(T, node)
            if N[node, CNT] == N[c, CNT]:                   # merge node into its only child
                p = N[node, PAR]
                h_del(T, _key(node, N[c, TOK]))
                tn = N[node, TOK]
                N[c, TOK] = tn
                N[c, LN] += N[node, LN]
                N[c, RPOS] -= N[node, LN]
                N[c, PAR] = p
                replace_child(T, np.int64(p), node, c)
                h_put(T, _key(p, tn), c)
                N[node, CL] &= ~np.int32(_LOW)             # no children (the slice stays allocated)


@njit(cache=True, no_cpython_wrapper=True)
def free_tree(T, root, stack):
    """Free every node reachable from `root` (a finished local tree): hash keys, child slices, ids.
    `stack` needs room for the tree's node count."""
    H, N, pl = T[0], T[1], T[2]
    sp = 0
    stack[sp] = root
    sp += 1
    while sp:
        sp -= 1
        u = stack[sp]
        s = N[u, CST]
        cl = N[u, CL]
        for q in range(cl & _LOW):
            c = pl[s + q]
            h_del(T, _key(u, N[c, TOK]))
            stack[sp] = c
            sp += 1
        if cl >> 24:
            _free_block(T, s, cl >> 24)
        N[u, CL] = 0
        N[u, PAR] = H[H_FREE]
        H[H_FREE] = u
