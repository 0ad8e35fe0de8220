"""Pure-NumPy reference of vLLM 0.34's GPU suffix speculator: the corpus ring and its hash index
(`Corpus`), and `propose`, the K draft slots of one request from its history (facts 2.3-2.6).

Written from the facts and the kernels' behaviour, one K at a time and in the kernels' own
vectorised form (candidates x depth matrices), so that it is an independent check of the compiled
all-K copy (kernels.py); tests/slow/test_suffix_gpu_parity.py holds it to vLLM's Triton kernels."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from simkit.drafters.suffix_gpu.params import HASH_MUL, PROMPT_CONTEXT, SLOTS, SuffixGpuParams

_MUL = np.uint64(HASH_MUL)


def _hash_keys(toks: Sequence[int]) -> tuple[int, int]:
    """(2-key hash, 4-key hash) of the 4 tokens before a position, newest first (0 where absent),
    in wrapping uint64 arithmetic."""
    hv = np.uint64(0)
    h2 = np.uint64(0)
    with np.errstate(over="ignore"):
        for d in range(4):
            hv = (hv ^ np.uint64(toks[d])) * _MUL
            if d == 1:
                h2 = hv
    return int(h2), int(hv)


def bucket(hv: int, nb: int) -> int:
    """((hv >> 29) ^ hv) & (nb - 1): the low bits agree for signed and unsigned shifts (nb <= 2^35)."""
    return ((hv >> 29) ^ hv) & (nb - 1)


def document(prompt: Sequence[int], output: Sequence[int]) -> np.ndarray:
    """What a finished request adds to the corpus: its last PROMPT_CONTEXT prompt tokens + output."""
    p = np.asarray(prompt, np.int64)
    return np.concatenate([p[max(len(p) - PROMPT_CONTEXT, 0):], np.asarray(output, np.int64)])


class Corpus:
    """The ring of finished documents (int32, -1 = empty or separator), `head`, the documents
    ingested so far and the index table [2, NB, SLOTS] (0 = 4-token key, 1 = 2-token key)."""

    def __init__(self, params: SuffixGpuParams):
        self.cap = params.corpus_tokens if params.has_corpus else 0
        self.nb = params.buckets
        self.ring = np.full(max(self.cap, 1), -1, np.int64)
        self.table = np.full((2, self.nb, SLOTS), -1, np.int64)
        self.head = 0
        self.docs = 0

    def ingest(self, docs: Sequence[Sequence[int]]) -> None:
        """One ingestion call: the documents (already in vLLM's sorted order) placed one after
        another, a later one overwriting an earlier; every position indexed by atomic max."""
        if not self.cap:
            return
        for doc in docs:
            tokens = np.asarray(doc, np.int64)[-(self.cap - 1):] if self.cap > 1 else np.zeros(0, np.int64)
            n = len(tokens)
            if self.head + n + 1 > self.cap:
                self.head = 0
            head = self.head
            self.ring[head:head + n] = tokens
            self.ring[head + n] = -1
            seq = self.docs
            for j in range(2, n):
                prev = [int(tokens[j - 1 - d]) if j - 1 - d >= 0 else 0 for d in range(4)]
                h2, h4 = _hash_keys(prev)
                val = (seq << 32) | (head + j)
                keys = [(1, h2)] + ([(0, h4)] if j >= 4 else [])
                for which, hv in keys:
                    b = bucket(hv, self.nb)
                    self.table[which, b, seq % SLOTS] = max(self.table[which, b, seq % SLOTS], val)
            self.head = head + n + 1
            self.docs += 1


def own_match(row: np.ndarray, depth: int) -> tuple[int, int]:
    """(l_len, l_pos): the longest match (<= depth) of the history's suffix ending before any
    position p in 1..len-1, the latest p among equals; (0, 0) when nothing matches."""
    n = len(row)
    best = (0, 0)
    for p in range(1, n):
        m = 0
        while m < depth and p - 1 - m >= 0 and row[p - 1 - m] == row[n - 1 - m]:
            m += 1
        if m > 0 and (m, p) > best:
            best = (m, p)
    return best


def corpus_draft(row: np.ndarray, corpus: Corpus, depth: int, k: int) -> tuple[int, np.ndarray, int]:
    """(g_len, chain, g_n): the corpus vote of facts 2.5 at K = k (g_len 0: no candidate)."""
    n = len(row)
    tail = np.array([row[n - 1 - d] if n - 1 - d >= 0 else -2 for d in range(depth)], np.int64)
    h2, h4 = _hash_keys([int(row[n - 1 - d]) if n - 1 - d >= 0 else 0 for d in range(4)])
    vals = np.concatenate([corpus.table[0, bucket(h4, corpus.nb)], corpus.table[1, bucket(h2, corpus.nb)]])
    key_len = np.array([4] * SLOTS + [2] * SLOTS)
    cpos = vals & 0xFFFFFFFF
    src_pos = cpos[:, None] - 1 - np.arange(depth)[None, :]
    ring = corpus.ring
    src = np.where((vals[:, None] >= 0) & (src_pos >= 0), ring[np.clip(src_pos, 0, len(ring) - 1)], -1)
    c_len = np.cumprod(src == tail[None, :], axis=1).sum(axis=1)
    nxt = np.where((vals >= 0) & (cpos < corpus.cap), ring[np.clip(cpos, 0, len(ring) - 1)], -1)
    ok = (vals >= 0) & (nxt >= 0) & (c_len >= key_len) & (n >= key_len)
    for i in range(len(vals)):
        if ok[i] and any(ok[j] and cpos[j] == cpos[i] for j in range(i)):
            ok[i] = False
    cont = np.full((len(vals), k), -1, np.int64)
    for i in np.flatnonzero(ok):
        for d in range(k):
            q = cpos[i] + d
            if q >= corpus.cap or ring[q] < 0:
                break
            cont[i, d] = ring[q]
    best = (-1, 1, 0, np.zeros(0, np.int64))       # num, den, L, chain
    seen: set[int] = set()
    for i in np.flatnonzero(ok):
        L = int(c_len[i])
        if L in seen:
            continue
        seen.add(L)
        alive = ok & (c_len >= L)
        den = max(int(alive.sum()), 1)
        num, chain = 0, []
        for d in range(k):
            col = cont[:, d]
            has = alive & (col >= 0)
            if not has.any():
                break
            counts = {int(tok): int((col[has] == tok).sum()) for tok in col[has]}
            cmax = max(counts.values())
            newest = max(int(vals[j]) for j in np.flatnonzero(has) if counts[int(col[j])] == cmax)
            tok = int(col[has & (vals == newest)][0])
            num += cmax
            chain.append(tok)
            alive = has & (col == tok)
        bnum, bden, blen, _ = best
        if num * bden > bnum * den or (num * bden == bnum * den and blen < L):
            best = (num, den, L, np.array(chain, np.int64))
    return best[2], best[3], len(best[3])


def propose(row: Sequence[int], corpus: Corpus | None, params: SuffixGpuParams, k: int
            ) -> tuple[np.ndarray, int]:
    """(the K draft slots, num_valid) for a decoding request whose history (prompt + outputs,
    the token just sampled last) is `row`; invalid slots hold the last token."""
    out, valid, _, _ = propose_with_source(row, corpus, params, k)
    return out, valid


def propose_with_source(row: Sequence[int], corpus: Corpus | None, params: SuffixGpuParams,
                        k: int) -> tuple[np.ndarray, int, int, int]:
    """propose's (slots, num_valid) plus the draft's source (0 own history, 1 corpus: the longer
    match wins, ties to the own history) and its match length, as the finalize kernel records
    them for adaptive verification's confidences."""
    row = np.asarray(row, np.int64)
    l_len, l_pos = own_match(row, params.max_depth)
    draft = row[l_pos:l_pos + k] if l_len > 0 else np.zeros(0, np.int64)
    source, match = 0, l_len
    if corpus is not None and corpus.cap:
        g_len, chain, g_n = corpus_draft(row, corpus, params.max_depth, k)
        if g_len > l_len:
            draft = chain[:g_n]
            source, match = 1, g_len
    out = np.full(k, row[-1], np.int64)
    out[:len(draft)] = draft
    return out, len(draft), source, int(match)
