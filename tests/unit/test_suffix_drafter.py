"""Our suffix tree and drafter: counts, sibling order, float32 scores, all-K drafting (no arctic needed;
tests/slow/test_arctic_parity.py compares with the real SuffixDecodingCache)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.drafters.suffix.cache import SuffixCache, SuffixParams
from simkit.drafters.suffix.tree import ROOT, SuffixTree, f32, spec_cap


def _occurrences(seqs: list[list[int]], pattern: list[int]) -> int:
    n = len(pattern)
    return sum(1 for s in seqs for i in range(len(s) - n + 1) if s[i:i + n] == pattern)


def _check_counts(tree: SuffixTree, live: dict[int, list[int]]) -> None:
    """Every string in the tree has count = its occurrences; every live substring <= depth is there."""
    seqs = list(live.values())
    assert tree.cnt[ROOT] == sum(len(s) for s in seqs)
    stack = [(ROOT, [])]
    seen = set()
    while stack:
        u, path = stack.pop()
        kids = tree.multi.get(u) or ([tree.head1[u]] if tree.head1[u] >= 0 else [])
        counts = [tree.cnt[c] for c in kids]
        assert counts == sorted(counts, reverse=True), "children not in decreasing count order"
        for c in kids:
            ref = tree.store[tree.rseq[c]]
            p = path + ref[tree.ridx[c]:tree.ridx[c] + tree.ln[c]]
            assert len(p) <= tree.max_depth
            for L in range(len(path) + 1, len(p) + 1):
                assert _occurrences(seqs, p[:L]) == tree.cnt[c], p[:L]
                seen.add(tuple(p[:L]))
            stack.append((c, p))
    for s in seqs:
        for i in range(len(s)):
            for j in range(i + 1, min(len(s), i + tree.max_depth) + 1):
                assert tuple(s[i:j]) in seen


ops = st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 2), min_size=1, max_size=5),
                         st.booleans()), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops=ops, depth=st.sampled_from([2, 3, 5, 8]))
def test_counts_and_order_match_brute_force(ops, depth):
    tree = SuffixTree(depth)
    live: dict[int, list[int]] = {}
    for seq, toks, remove in ops:
        if remove and seq in live:
            tree.remove(seq)
            del live[seq]
        else:
            tree.extend(seq, toks)
            live.setdefault(seq, []).extend(toks)
        _check_counts(tree, live)


def test_tie_break_follows_the_real_sibling_list():
    # Children of "7": a=1 then b=2 appear (count 1 each, order [1, 2]); b reaches 2 first and goes
    # last among the 2s (= first, alone); then a reaches 2 while first among the 1s, so it becomes
    # FIRST among the 2s: the head is 1 although 2 got there first.
    tree = SuffixTree(4)
    tree.extend(0, [7, 1, 7, 2, 7, 2, 7, 1, 7])
    node, idx = tree.match([7])
    assert tree.cnt[node] == 5
    assert tree.tok[tree.head(node)] == 1
    toks, score, m = tree.speculate([7], 1, 1.0, 1.0, 0.0)
    assert (toks, m) == ([], 0)                              # a 1-token context has no match length < 1
    toks, score, m = tree.speculate([3, 7], 1, 1.0, 0.0, 0.0)
    assert toks == [1] and m == 1 and score == f32(2 / 5)


def test_hand_computed_draft_and_float32_score():
    # prompt 1 2 3 1 2, response 3: context 1 2 3 1 2 3. "1 2 3" occurs twice (one continues with 1),
    # so at match length 3 the draft is 1 2 3 (capped by depth 24 / K 8) with prob 1/2 each.
    cache = SuffixCache(SuffixParams(max_cached_requests=10))
    cache.start_request("a", [1, 2, 3, 1, 2])
    cache.add_active_response("a", [3])
    toks, score, m = cache.speculate("a", [1, 2, 3, 1, 2, 3], 8)
    assert toks == [1, 2, 3]
    assert score == f32(f32(0.5 + 0.5) + 0.5) == 1.5
    assert m == 3


def test_spec_cap_rounding():
    assert [spec_cap(m, 1.0, 0.0) for m in (1, 5, 23)] == [1, 5, 23]
    assert spec_cap(3, 0.5, 0.0) == 1          # 1.5 truncates
    assert spec_cap(1, 0.1, -1.0) == 0         # negative clips to 0
    assert spec_cap(3, 1 / 3, 0.0) == 1        # float32(3 * float32(1/3)) rounds to 1.0 -> 1


requests = st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=30),
                              st.lists(st.integers(0, 3), min_size=2, max_size=40)),
                    min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(reqs=requests, depth=st.sampled_from([4, 8, 24]), minp=st.sampled_from([0.0, 0.1, 0.4]),
       cached=st.sampled_from([0, 1, 10000]))
def test_draft_all_equals_speculate_for_every_k(reqs, depth, minp, cached):
    params = SuffixParams(max_tree_depth=depth, min_token_prob=minp, max_cached_requests=cached)
    fast, ref = SuffixCache(params), SuffixCache(params)
    kmax = 8
    for r, (prompt, out) in enumerate(reqs):
        for c in (fast, ref):
            c.start_request(r, prompt)
            c.add_active_response(r, out[:1])
        for t in range(1, len(out)):
            d, a = fast.draft_all(r, kmax, out[t:t + kmax])
            ctx = (prompt + out[:t])[-depth:]
            for k in range(1, kmax + 1):
                toks, _, _ = ref.speculate(r, ctx, k)
                acc = 0
                for x, y in zip(toks, out[t:]):
                    if x != y:
                        break
                    acc += 1
                assert (d[k - 1], a[k - 1]) == (len(toks), acc)
            for c in (fast, ref):
                c.add_active_response(r, out[t:t + 1])
        for c in (fast, ref):
            c.stop_request(r)


def test_fifo_eviction_keeps_the_newest_responses():
    cache = SuffixCache(SuffixParams(max_cached_requests=2))
    for r in range(4):
        cache.start_request(r, [9])
        cache.add_active_response(r, [r, r + 1])
        cache.stop_request(r)
    assert list(cache.req_to_seq) == [2, 3]
    assert cache.global_tree.cnt[ROOT] == 4       # two responses of two tokens


def test_token_range_is_checked():
    cache = SuffixCache()
    try:
        cache.start_request("x", np.array([1, -1]))
    except ValueError as exc:
        assert "token id -1" in str(exc)
    else:
        raise AssertionError("negative token accepted")
