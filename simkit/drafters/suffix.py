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

from simkit.drafters.suffix_tree import MAX_TOKEN, SuffixTree, f32, spec_cap


@dataclass(frozen=True)
class SuffixParams:
    """vLLM 0.26 suffix-decoding settings (defaults are vLLM's)."""

    max_tree_depth: int = 24
    max_cached_requests: int = 10000
    max_spec_factor: float = 1.0
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1

    def as_dict(self) -> dict:
        return {"drafter": "suffix", **asdict(self)}


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
    def _candidates(self, tree: SuffixTree, ctx: list[int], act, kmax: int) -> list:
        """(m, tokens, scores) for every matching suffix length m whose walk drafts something."""
        p = self.params
        out = []
        nact = len(act) if act is not None else 0
        ln, head = tree.ln, tree.head
        for m in range(1, len(ctx)):
            if m <= nact:
                node = act[-m]
                idx = ln[node]
            else:
                node, idx = tree.match(ctx[len(ctx) - m:])
                if node < 0:
                    break
            if idx >= ln[node] and head(node) < 0:
                continue
            cap = min(kmax, spec_cap(m, p.max_spec_factor, p.max_spec_offset))
            toks, scores = tree.walk(node, idx, cap, self._minp)
            if toks:
                out.append((m, toks, scores))
        return out

    def draft_all(self, req_id: Hashable, kmax: int, future: Sequence[int]) -> tuple[list[int], list[int]]:
        """Draft lengths d[K-1] and accepted lengths a[K-1] (vs `future`) for K = 1..kmax.

        The context is the request's own prompt + response so far (the local sequence), as in vLLM.
        """
        local = self.local[req_id]
        seq = local.store[local.seqs[self.LOCAL_SEQ]]
        ctx = seq[-self.params.max_tree_depth:]
        lc = self._candidates(local, ctx, local.active[self.LOCAL_SEQ], kmax)
        gseq = self.req_to_seq.get(req_id)
        gt = self.global_tree
        gc = self._candidates(gt, ctx, gt.active.get(gseq) if gseq is not None else None, kmax)
        d = [0] * kmax
        a = [0] * kmax
        if not lc and not gc:
            return d, a
        fut = list(future)
        acc_cache: dict[int, int] = {}

        def accepted(toks: list[int]) -> int:
            key = id(toks)
            v = acc_cache.get(key)
            if v is None:
                v = 0
                for x, y in zip(toks, fut):
                    if x != y:
                        break
                    v += 1
                acc_cache[key] = v
            return v

        for k in range(1, kmax + 1):
            best_l, best_ls, bl_t = 0.0, 0, None
            for _m, toks, scores in lc:
                n = len(toks) if len(toks) < k else k
                s = scores[n - 1]
                if s >= best_l:
                    best_l, best_ls, bl_t = s, n, toks
            best_g, best_gs, bg_t = 0.0, 0, None
            for _m, toks, scores in gc:
                n = len(toks) if len(toks) < k else k
                s = scores[n - 1]
                if s >= best_g:
                    best_g, best_gs, bg_t = s, n, toks
            if best_l >= best_g:
                n, toks = best_ls, bl_t
            else:
                n, toks = best_gs, bg_t
            if toks is not None and n:
                d[k - 1] = n
                acc = accepted(toks)
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


def _checked(tokens: Sequence[int]) -> list[int]:
    out = [int(t) for t in tokens]
    for t in out:
        if t < 0 or t > MAX_TOKEN:
            raise ValueError(f"token id {t} outside 0..{MAX_TOKEN}")
    return out
