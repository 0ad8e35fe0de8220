"""Suffix-decoding drafter as vLLM 0.26 drives arctic-inference 0.3.0's SuffixDecodingCache (path mode).

Per request a local tree over prompt + response; one global tree over responses (each response is added
token by token while it is generated, FIFO eviction beyond max_cached_requests, 0 disables it). A draft
queries both with the last max_tree_depth context tokens; the local draft wins score ties.
`SuffixCache.speculate` is the call vLLM makes; `SuffixCache.draft_all` gives the same answer for every
K = 1..kmax at once (one walk per match length, shared by all K) and is what the tables use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Hashable, Sequence

from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.drafters.suffix.tree import MAX_TOKEN, SuffixTree, f32, spec_cap


@dataclass(frozen=True)
class SuffixParams:
    """vLLM 0.26 suffix-decoding settings (defaults are vLLM's)."""

    max_tree_depth: int = 24
    max_cached_requests: int = 10000
    max_spec_factor: float = 1.0
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1

    def as_dict(self) -> dict:
        return {"drafter": SUFFIX_DRAFTER, **asdict(self)}


class SuffixCache:
    """Our SuffixDecodingCache: same calls, same eviction, same drafts."""

    LOCAL_SEQ = 0

    def __init__(self, params: SuffixParams = SuffixParams()) -> None:
        if params.max_cached_requests > 0x7FFFFFFF:
            raise ValueError("max_cached_requests must be at most 2^31")
        self.params = params
        self.global_tree = SuffixTree(params.max_tree_depth)
        self.local: dict[Hashable, SuffixTree] = {}
        self.req_to_seq: dict[Hashable, int] = {}     # insertion order = FIFO order
        self.seq_to_req: dict[int, Hashable] = {}
        self._next_seq = 0
        self._minp = f32(params.min_token_prob)
        self._caps = [spec_cap(m, params.max_spec_factor, params.max_spec_offset)
                      for m in range(params.max_tree_depth + 1)]

    # -- the calls vLLM makes -------------------------------------------------------------------
    def start_request(self, req_id: Hashable, prompt_ids: Sequence[int]) -> None:
        """Build the local tree for the prompt; reserve a global slot (evicting the oldest)."""
        if req_id in self.local:
            raise ValueError(f"request {req_id!r} is already active")
        tree = SuffixTree(self.params.max_tree_depth)
        tree.extend(self.LOCAL_SEQ, _checked(prompt_ids))
        self.local[req_id] = tree
        if self.params.max_cached_requests != 0:
            if req_id in self.req_to_seq:
                self.evict(req_id)
            self._new_seq(req_id)

    def stop_request(self, req_id: Hashable) -> None:
        """Drop the local tree; the response stays in the global tree until evicted."""
        if req_id not in self.local:
            raise ValueError(f"request {req_id!r} is not active")
        del self.local[req_id]

    def add_active_response(self, req_id: Hashable, token_ids: Sequence[int]) -> None:
        """Append generated tokens to the local tree and, while cached, to the global tree."""
        if req_id not in self.local:
            raise ValueError(f"request {req_id!r} is not active")
        toks = _checked(token_ids)
        self.local[req_id].extend(self.LOCAL_SEQ, toks)
        seq = self.req_to_seq.get(req_id)
        if seq is not None:
            self.global_tree.extend(seq, toks)

    def insert_response(self, req_id: Hashable, token_ids: Sequence[int]) -> None:
        """The global tree as after start_request + add_active_response(token_ids) + stop_request,
        with no local tree and no drafts: the insert-only path of the warm table build."""
        if req_id in self.local:
            raise ValueError(f"request {req_id!r} is active")
        if self.params.max_cached_requests == 0:
            return
        if req_id in self.req_to_seq:
            self.evict(req_id)
        seq = self._new_seq(req_id)
        self.global_tree.insert_fast(seq, _checked(token_ids))

    def evict(self, req_id: Hashable) -> None:
        """Remove a cached response from the global tree."""
        seq = self.req_to_seq.pop(req_id)
        del self.seq_to_req[seq]
        self.global_tree.remove(seq)

    def speculate(self, req_id: Hashable, context: Sequence[int],
                  max_spec_tokens: int) -> tuple[list[int], float, int]:
        """Draft for an active request: (tokens, float32 score, match length); local wins ties."""
        if req_id not in self.local:
            raise ValueError(f"request {req_id!r} is not active")
        p = self.params
        ctx = [int(t) for t in context][-p.max_tree_depth:]
        d1 = self.local[req_id].speculate(ctx, max_spec_tokens, p.max_spec_factor,
                                          p.max_spec_offset, p.min_token_prob)
        d2 = self.global_tree.speculate(ctx, max_spec_tokens, p.max_spec_factor,
                                        p.max_spec_offset, p.min_token_prob)
        return d1 if d1[1] >= d2[1] else d2

    # -- all K at once --------------------------------------------------------------------------
    def _match_nodes(self, tree: SuffixTree, ctx: list[int], act) -> list[tuple[int, int]]:
        """(node, offset) where each context suffix of length m = 1.. ends; stops at the first miss."""
        nodes = []
        nact = len(act) if act is not None else 0
        ln = tree.ln
        for m in range(1, len(ctx)):
            if m <= nact:
                node = act[-m]                 # the suffix of the sequence itself ends at a node end
                nodes.append((node, ln[node]))
            else:
                node, idx = tree.match(ctx[len(ctx) - m:])
                if node < 0:
                    break
                nodes.append((node, idx))
        return nodes

    def draft_all(self, req_id: Hashable, kmax: int, future: Sequence[int]) -> tuple[list[int], list[int]]:
        """Draft lengths d[K-1] and accepted lengths a[K-1] (vs `future`) for K = 1..kmax.

        Same result as `speculate` for each K. One walk per match length m serves every K (the
        walk capped at K is a prefix of the walk capped at kmax). Match lengths are visited longest
        first and the local tree before the global one, and a candidate replaces the best only when
        strictly better, which is the real tie rule. A walk is skipped when even its upper bound
        (the float32 sum of n copies of its first-step probability) cannot beat the best for any K.
        """
        local = self.local[req_id]
        seq = local.store[local.seqs[self.LOCAL_SEQ]]
        ctx = seq[-self.params.max_tree_depth:]
        gseq = self.req_to_seq.get(req_id)
        gt = self.global_tree
        best_s = [0.0] * (kmax + 1)
        best_n = [0] * (kmax + 1)
        best_t: list = [None] * (kmax + 1)
        caps, minp, sums = self._caps, self._minp, _SUMS
        for tree, act in ((local, local.active[self.LOCAL_SEQ]),
                          (gt, gt.active.get(gseq) if gseq is not None else None)):
            if tree is gt and not gt.seqs:
                continue
            nodes = self._match_nodes(tree, ctx, act)
            cnt, ln, walk, multi, head1 = tree.cnt, tree.ln, tree.walk, tree.multi, tree.head1
            for m in range(len(nodes), 0, -1):
                node, idx = nodes[m - 1]
                if idx < ln[node]:
                    p1 = 1.0
                else:
                    lst = multi.get(node)
                    h = lst[0] if lst is not None else head1[node]
                    if h < 0:
                        continue
                    p1 = f32(cnt[h] / cnt[node])
                    if p1 < minp:
                        continue
                cap = caps[m] if caps[m] < kmax else kmax
                if cap <= 0:
                    continue
                # Every prob of this walk is <= p1 and float32 addition is monotonic, so its score
                # after n tokens is <= S_n(p1), the float32 sum of n copies of p1. Skip the walk when
                # that bound cannot strictly beat the best for any K.
                bound = sums.get((p1, kmax))
                if bound is None:
                    bound = sums[(p1, kmax)] = _repeated_sums(p1, kmax)
                need = cap
                while need and bound[need] <= best_s[need]:
                    need -= 1
                if not need:
                    continue
                # Beyond `need` tokens the bound already loses for every K, so a walk cut there
                # changes no best (a cut walk scores no more than the whole one).
                toks, scores = walk(node, idx, need, minp)
                nt = len(toks)
                if not nt:
                    continue
                for k in range(1, nt + 1):
                    sc = scores[k - 1]
                    if sc > best_s[k]:
                        best_s[k] = sc
                        best_n[k] = k
                        best_t[k] = toks
                sc = scores[nt - 1]
                for k in range(nt + 1, kmax + 1):
                    if sc <= best_s[k]:
                        break                      # best_s is nondecreasing in K
                    best_s[k] = sc
                    best_n[k] = nt
                    best_t[k] = toks
        d = best_n[1:]
        a = [0] * kmax
        fut = list(future)
        last = None
        acc = 0
        for k in range(1, kmax + 1):
            toks = best_t[k]
            if toks is None:
                continue
            if toks is not last:
                acc = 0
                for x, y in zip(toks, fut):
                    if x != y:
                        break
                    acc += 1
                last = toks
            n = best_n[k]
            a[k - 1] = acc if acc < n else n
        return d, a

    def _new_seq(self, req_id: Hashable) -> int:
        while True:
            seq = self._next_seq
            self._next_seq = (self._next_seq + 1) & 0x7FFFFFFF
            if seq not in self.seq_to_req or self.seq_to_req[seq] not in self.local:
                break
        if seq in self.seq_to_req:
            old = self.seq_to_req.pop(seq)
            del self.req_to_seq[old]
            self.global_tree.remove(seq)
        self.req_to_seq[req_id] = seq
        self.seq_to_req[seq] = req_id
        if self.params.max_cached_requests > 0:
            while len(self.req_to_seq) > self.params.max_cached_requests:
                for rid, s in self.req_to_seq.items():
                    if s != seq:
                        self.evict(rid)
                        break
        return seq


_SUMS: dict[tuple[float, int], list[float]] = {}


def _repeated_sums(p: float, kmax: int) -> list[float]:
    """[0, p, p+p, ...] in float32: S_n(p) for n = 0..kmax."""
    out = [0.0]
    for _ in range(kmax):
        out.append(f32(out[-1] + p))
    return out


def _checked(tokens: Sequence[int]) -> list[int]:
    out = [int(t) for t in tokens]
    for t in out:
        if t < 0 or t > MAX_TOKEN:
            raise ValueError(f"token id {t} outside 0..{MAX_TOKEN}")
    return out
