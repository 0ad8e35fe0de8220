"""A depth-limited, path-compressed suffix tree with arctic-inference 0.3.0's exact draft semantics.

Written from a reading of arctic-inference 0.3.0 (csrc/suffix_decoding/suffix_tree.cc); no code copied.
What must match the real tree, because it decides the drafts:
- node counts = occurrences of the node's string among the stored sequences (strings <= max_depth);
- the order of a node's children, which decides the "highest count" child on ties. The real tree keeps
  children in a list sorted by decreasing count, and its moves boil down to four rules that we keep:
  a new child goes last; a child whose count rises from c to c+1 goes first among the (c+1)-children if
  it was first among the c-children, else last among them; a child whose count falls goes first among
  its new count; a child at count 0 leaves;
- float32 arithmetic of probabilities and scores (ties between scores are decided in float32).
Removed sequences keep their token arrays so node references stay readable (the real tree re-points
them to another live sequence; only the token values matter).
"""

from __future__ import annotations

import struct
from collections import deque

_F32 = struct.Struct("f")
_SHIFT = 21                       # child key = (node << _SHIFT) | token
MAX_TOKEN = (1 << _SHIFT) - 1
ROOT = 0
_ADD_MEMO: dict = {}              # (score, prob) -> float32(score + prob)
_MUL_MEMO: dict = {}              # (prob, child count, node count) -> float32 product


def f32(x: float) -> float:
    """Round a Python float to the nearest float32 value (the C++ code computes in float)."""
    return _F32.unpack(_F32.pack(x))[0]


def spec_cap(match_len: int, factor: float, offset: float) -> int:
    """Draft cap for a match of match_len tokens: int(match_len*factor + offset + 1e-6), at least 0."""
    v = int(f32(f32(match_len * f32(factor)) + f32(offset)) + 1e-6)
    return max(v, 0)


class SuffixTree:
    """Suffix tree over several sequences, each suffix truncated at max_depth tokens."""

    __slots__ = ("max_depth", "cnt", "tok", "ln", "rseq", "ridx", "par", "head1", "multi",
                 "kids", "seqs", "store", "active")

    def __init__(self, max_depth: int) -> None:
        if max_depth < 1:
            raise ValueError("max_depth must be >= 1")
        self.max_depth = max_depth
        # Node fields as parallel lists; node 0 is the root.
        self.cnt = [0]
        self.tok = [0]
        self.ln = [0]
        self.rseq = [0]
        self.ridx = [-1]
        self.par = [-1]
        self.head1 = [-1]          # the only child (nodes with < 2 children), else -1
        self.multi: dict[int, list[int]] = {}   # ordered children of nodes with >= 2 children
        self.kids: dict[int, int] = {}          # (node << _SHIFT | first token) -> child
        self.seqs: dict[int, int] = {}            # live sequence id -> index into store
        self.store: list[list[int]] = []          # token lists, kept after removal
        self.active: dict[int, deque] = {}

    # -- children lists ---------------------------------------------------------------------------
    def head(self, u: int) -> int:
        """The first child of u (highest count, ties in the real tree's order), or -1."""
        lst = self.multi.get(u)
        return lst[0] if lst is not None else self.head1[u]

    def _new_node(self, count: int, token: int, length: int, seq: int, idx: int, parent: int) -> int:
        self.cnt.append(count)
        self.tok.append(token)
        self.ln.append(length)
        self.rseq.append(seq)
        self.ridx.append(idx)
        self.par.append(parent)
        self.head1.append(-1)
        return len(self.cnt) - 1

    def _append_child(self, u: int, v: int) -> None:
        lst = self.multi.get(u)
        if lst is not None:
            lst.append(v)
        elif self.head1[u] < 0:
            self.head1[u] = v
        else:
            self.multi[u] = [self.head1[u], v]
            self.head1[u] = -1

    def _replace_child(self, u: int, old: int, new: int) -> None:
        lst = self.multi.get(u)
        if lst is not None:
            lst[self._index(lst, old)] = new
        else:
            self.head1[u] = new

    def _drop_child(self, u: int, v: int) -> None:
        lst = self.multi.get(u)
        if lst is not None:
            del lst[self._index(lst, v)]
            if len(lst) == 1:
                self.head1[u] = lst[0]
                del self.multi[u]
        else:
            self.head1[u] = -1

    def _index(self, lst: list[int], x: int) -> int:
        """Position of child x in the sorted sibling list: binary search for the first sibling with
        count <= cnt[x], then a scan of the equal-count group (a plain index() scans every sibling,
        which is slow on the root's thousands of children)."""
        return lst.index(x, self._first_at_most(lst, len(lst), self.cnt[x]))

    def _first_at_most(self, lst: list[int], hi: int, value: int) -> int:
        """First index j < hi with cnt[lst[j]] <= value (counts decrease along lst)."""
        cnt = self.cnt
        lo = 0
        while lo < hi:
            mid = (lo + hi) >> 1
            if cnt[lst[mid]] <= value:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _inc(self, u: int, x: int) -> None:
        """Count of child x of u rises by one; move it as the real sibling list would."""
        cnt = self.cnt
        c = cnt[x]
        lst = self.multi.get(u)
        if lst is not None:
            i = self._index(lst, x)
            if i > 0:
                pc = cnt[lst[i - 1]]
                if pc == c:                 # not first among c: becomes last among c+1
                    j = self._first_at_most(lst, i, c)
                    del lst[i]
                    lst.insert(j, x)
                elif pc == c + 1:           # first among c: becomes first among c+1
                    j = self._first_at_most(lst, i, c + 1)
                    del lst[i]
                    lst.insert(j, x)
        cnt[x] = c + 1

    def _dec(self, u: int, x: int) -> None:
        """Count of child x of u falls by one: it becomes first among its new count."""
        cnt = self.cnt
        c = cnt[x]
        lst = self.multi.get(u)
        if lst is not None:
            del lst[self._index(lst, x)]
        cnt[x] = c - 1
        if lst is not None:
            j = self._first_at_most(lst, len(lst), c - 1)
            lst.insert(j, x)

    # -- building -------------------------------------------------------------------------------
    def append(self, seq_id: int, token: int) -> None:
        """Append one token to sequence seq_id (created on first use)."""
        sid = self.seqs.get(seq_id)
        if sid is None:
            sid = self.seqs[seq_id] = len(self.store)
            self.store.append([])
            self.active[seq_id] = deque()
        seq = self.store[sid]
        store = self.store
        act = self.active[seq_id]
        cnt, ln, kids = self.cnt, self.ln, self.kids
        act.append(ROOT)
        cnt[ROOT] += 1
        if len(act) > self.max_depth:
            act.popleft()
        seq.append(token)
        n = len(seq)
        for k in range(len(act)):
            u = act[k]
            key = (u << _SHIFT) | token
            c = kids.get(key)
            if c is None:
                if cnt[u] == 1 and u != ROOT:
                    # A leaf only this suffix uses grows; point it at this sequence, since the
                    # sequence it pointed into may have been removed since.
                    ln[u] += 1
                    self.rseq[u] = sid
                    self.ridx[u] = n - ln[u]
                else:
                    v = self._new_node(1, token, 1, sid, n - 1, u)
                    kids[key] = v
                    self._append_child(u, v)
                    act[k] = v
            elif u != ROOT and cnt[u] == cnt[c] + 1:
                # Only this suffix ends at u; all others continue into c.
                if ln[c] == 1:                                  # c absorbs u
                    p = self.par[u]
                    cnt[c] += 1
                    self.tok[c] = self.tok[u]
                    ln[c] = ln[u] + 1
                    self.rseq[c] = sid
                    self.ridx[c] = n - ln[c]
                    self.par[c] = p
                    self._replace_child(p, u, c)
                    kids[(p << _SHIFT) | self.tok[u]] = c
                    del kids[key]
                    act[k] = c
                else:                                           # u grows by one into c
                    ln[u] += 1
                    self.rseq[u] = sid
                    self.ridx[u] = n - ln[u]
                    ln[c] -= 1
                    self.ridx[c] += 1
                    nt = store[self.rseq[c]][self.ridx[c]]
                    self.tok[c] = nt
                    if nt != token:
                        del kids[key]
                        kids[(u << _SHIFT) | nt] = c
            elif ln[c] == 1:
                self._inc(u, c)
                act[k] = c
            else:                                               # split c after its first token
                w = self._new_node(cnt[c], token, 1, sid, n - 1, u)
                self._replace_child(u, c, w)
                kids[key] = w
                ln[c] -= 1
                self.ridx[c] += 1
                nt = store[self.rseq[c]][self.ridx[c]]
                self.tok[c] = nt
                kids[(w << _SHIFT) | nt] = c
                self.par[c] = w
                self.head1[w] = c
                self._inc(u, w)
                act[k] = w

    def extend(self, seq_id: int, tokens) -> None:
        """Append several tokens to sequence seq_id."""
        for t in tokens:
            self.append(seq_id, int(t))

    def insert_fast(self, seq_id: int, tokens: list[int]) -> None:
        """Same tree as `extend(seq_id, tokens)`, with the per-token loop inlined (node ids included).

        The warm table build inserts whole corpora of responses that are never drafted for; this path
        does the work of `append` without its per-call overhead. Tests check it against `append`."""
        if not tokens:
            return
        sid = self.seqs.get(seq_id)
        if sid is None:
            sid = self.seqs[seq_id] = len(self.store)
            self.store.append([])
            self.active[seq_id] = deque()
        store = self.store
        seq = store[sid]
        act = self.active[seq_id]
        cnt, ln, kids, tok, rseq, ridx, par = self.cnt, self.ln, self.kids, self.tok, self.rseq, self.ridx, self.par
        head1, multi = self.head1, self.multi
        depth = self.max_depth
        inc, new_node, append_child, replace_child = self._inc, self._new_node, self._append_child, self._replace_child
        seq_append, act_append, act_popleft = seq.append, act.append, act.popleft
        for token in tokens:
            act_append(ROOT)
            cnt[ROOT] += 1
            if len(act) > depth:
                act_popleft()
            seq_append(token)
            n = len(seq)
            k = 0
            for u in act:
                if u and cnt[u] == 1:
                    # Only this suffix passes through u and it ends there, so u has no child (a
                    # child at count 0 is removed): the leaf grows, as `append` does when no child
                    # matches. Skips the child lookup for the (many) unique long suffixes.
                    lu = ln[u] + 1
                    ln[u] = lu
                    rseq[u] = sid
                    ridx[u] = n - lu
                    k += 1
                    continue
                key = (u << _SHIFT) | token
                c = kids.get(key)
                if c is None:
                    v = new_node(1, token, 1, sid, n - 1, u)
                    kids[key] = v
                    append_child(u, v)
                    act[k] = v
                elif u != ROOT and cnt[u] == cnt[c] + 1:
                    if ln[c] == 1:
                        p = par[u]
                        cnt[c] += 1
                        tu = tok[u]
                        tok[c] = tu
                        lc = ln[u] + 1
                        ln[c] = lc
                        rseq[c] = sid
                        ridx[c] = n - lc
                        par[c] = p
                        replace_child(p, u, c)
                        kids[(p << _SHIFT) | tu] = c
                        del kids[key]
                        act[k] = c
                    else:
                        lu = ln[u] + 1
                        ln[u] = lu
                        rseq[u] = sid
                        ridx[u] = n - lu
                        ln[c] -= 1
                        ic = ridx[c] + 1
                        ridx[c] = ic
                        nt = store[rseq[c]][ic]
                        tok[c] = nt
                        if nt != token:
                            del kids[key]
                            kids[(u << _SHIFT) | nt] = c
                elif ln[c] == 1:
                    if u in multi:
                        inc(u, c)
                    else:
                        cnt[c] += 1
                    act[k] = c
                else:
                    w = new_node(cnt[c], token, 1, sid, n - 1, u)
                    replace_child(u, c, w)
                    kids[key] = w
                    ln[c] -= 1
                    ic = ridx[c] + 1
                    ridx[c] = ic
                    nt = store[rseq[c]][ic]
                    tok[c] = nt
                    kids[(w << _SHIFT) | nt] = c
                    par[c] = w
                    head1[w] = c
                    inc(u, w)
                    act[k] = w
                k += 1

    def remove(self, seq_id: int) -> None:
        """Remove every suffix of sequence seq_id (its token array is kept for node references)."""
        if seq_id not in self.seqs:
            return
        seq = self.store[self.seqs.pop(seq_id)]
        self.active.pop(seq_id, None)
        cnt, ln, kids = self.cnt, self.ln, self.kids
        n = len(seq)
        for start in range(n):
            node = ROOT
            cnt[ROOT] -= 1
            idx = start
            while idx < n:
                key = (node << _SHIFT) | seq[idx]
                c = kids.get(key)
                if c is None:
                    break
                if cnt[c] > 1:
                    self._dec(node, c)
                else:
                    self._drop_child(node, c)
                    del kids[key]
                    break
                idx += ln[c]
                node = c
            if node != ROOT and node not in self.multi:
                c = self.head1[node]
                if c >= 0 and cnt[node] == cnt[c]:             # merge node into its only child
                    p = self.par[node]
                    del kids[(node << _SHIFT) | self.tok[c]]
                    self.tok[c] = self.tok[node]
                    ln[c] += ln[node]
                    self.ridx[c] -= ln[node]
                    self.par[c] = p
                    self._replace_child(p, node, c)
                    kids[(p << _SHIFT) | self.tok[node]] = c
                    self.head1[node] = -1

    # -- drafting -------------------------------------------------------------------------------
    def match(self, context) -> tuple[int, int]:
        """Node and offset inside it where `context` ends when read from the root, or (-1, -1)."""
        node, idx = ROOT, 0
        ln, kids = self.ln, self.kids
        ref = None
        base = 0
        for token in context:
            if idx >= ln[node]:
                c = kids.get((node << _SHIFT) | token)
                if c is None:
                    return -1, -1
                node = c
                ref = self.store[self.rseq[c]]
                base = self.ridx[c]
                idx = 0
            if ref[base + idx] != token:
                return -1, -1
            idx += 1
        return node, idx

    def walk(self, node: int, idx: int, max_tokens: int, min_prob: float) -> tuple[list[int], list[float]]:
        """Path-mode draft from (node, idx): tokens and the float32 score after each token."""
        toks: list[int] = []
        scores: list[float] = []
        if max_tokens <= 0:
            return toks, scores
        cnt, ln, store, rseq, ridx = self.cnt, self.ln, self.store, self.rseq, self.ridx
        add_memo, mul_memo = _ADD_MEMO, _MUL_MEMO
        multi, head1 = self.multi, self.head1
        prob = 1.0
        score = 0.0
        while prob >= min_prob:
            nl = ln[node]
            if idx < nl:
                # The rest of this node's tokens come with the same probability.
                n = min(nl - idx, max_tokens - len(toks))
                base = ridx[node] + idx
                toks.extend(store[rseq[node]][base:base + n])
                for _ in range(n):
                    key = (score, prob)
                    nxt = add_memo.get(key)
                    if nxt is None:
                        nxt = add_memo[key] = f32(score + prob)
                    score = nxt
                    scores.append(score)
                if len(toks) >= max_tokens:
                    break
                idx = nl
            else:
                lst = multi.get(node)
                child = lst[0] if lst is not None else head1[node]
                if child < 0:
                    break
                key = (prob, cnt[child], cnt[node])
                nxt = mul_memo.get(key)
                if nxt is None:
                    nxt = mul_memo[key] = f32(prob * f32(cnt[child] / cnt[node]))
                prob = nxt
                node = child
                idx = 0
        if len(add_memo) > 1_000_000:
            add_memo.clear()
        if len(mul_memo) > 1_000_000:
            mul_memo.clear()
        return toks, scores

    def speculate(self, context, max_spec_tokens: int, max_spec_factor: float = 1.0,
                  max_spec_offset: float = 0.0, min_token_prob: float = 0.1) -> tuple[list[int], float, int]:
        """Best path draft for `context`: (tokens, float32 score, match length); longer match wins ties."""
        ctx = [int(t) for t in context]
        minp = f32(min_token_prob)
        best: tuple[list[int], float, int] = ([], 0.0, 0)
        for m in range(1, len(ctx)):
            node, idx = self.match(ctx[len(ctx) - m:])
            if node < 0:
                break
            cap = min(max_spec_tokens, spec_cap(m, max_spec_factor, max_spec_offset))
            toks, scores = self.walk(node, idx, cap, minp)
            score = scores[-1] if scores else 0.0
            if score >= best[1]:
                best = (toks, score, m)
        return best
