"""Greedy-verification replay and acceptance tables: properties on random sequences, real requests,
save/load determinism and the on-disk cache."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.acceptance.build import build_table, build_warm_table
from simkit.acceptance.cache import cached_table, cached_warm_table, store_dir
from simkit.acceptance.replay import ReplayMismatch, replay_direct, replay_table
from simkit.acceptance.stats import summarize
from simkit.acceptance.table import load_table, save_table
from simkit.drafters.ngram import NgramParams, ngram_propose
from simkit.drafters.suffix.cache import SuffixCache, SuffixParams
from simkit.drafters.suffix.tree import SuffixTree
from simkit.paths import traces_src_dir


def _reqs(pairs):
    return [SimpleNamespace(prompt_ids=np.array(p, np.int32), output_ids=np.array(o, np.int32))
            for p, o in pairs]


def _direct_suffix(reqs, params, k):
    """Replay each request step by step with SuffixCache.speculate, as vLLM would (sequential order)."""
    cache = SuffixCache(params)
    logs = []
    for r, req in enumerate(reqs):
        out = req.output_ids
        prompt = [int(x) for x in req.prompt_ids]
        cache.start_request(r, prompt)
        cache.add_active_response(r, [int(out[0])])
        known = prompt + [int(out[0])]

        def propose(t, r=r, known=known):
            return cache.speculate(r, known[-params.max_tree_depth:], k)[0]

        def advance(toks, r=r, known=known):
            cache.add_active_response(r, toks)
            known.extend(toks)

        logs.append(replay_direct(propose, advance, out, f"request {r}"))
        cache.stop_request(r)
    return logs


pairs = st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=25),
                           st.lists(st.integers(0, 3), min_size=1, max_size=40)),
                 min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(data=pairs, k=st.integers(1, 8), minp=st.sampled_from([0.0, 0.1, 0.5]))
def test_replayed_output_equals_recorded_and_table_agrees(data, k, minp):
    reqs = _reqs(data)
    params = SuffixParams(max_tree_depth=8, min_token_prob=minp)
    table = build_table(reqs, params=params, kmax=8)
    acc, dr = table.accepted.astype(int), table.drafted.astype(int)
    assert (acc <= dr).all() and (dr <= np.arange(1, 9)).all()
    assert (acc[dr == 0] == 0).all()
    for r, steps in enumerate(_direct_suffix(reqs, params, k)):   # raises if the output differs
        from_table = replay_table(table, r, k)
        assert [(s.t, s.d, s.a) for s in steps] == [(s.t, s.d, s.a) for s in from_table]


@settings(max_examples=30, deadline=None)
@given(data=pairs, conc=st.integers(1, 3))
def test_concurrent_table_properties(data, conc):
    reqs = _reqs(data)
    table = build_table(reqs, kmax=6, ordering="concurrent", concurrency=conc)
    acc, dr = table.accepted.astype(int), table.drafted.astype(int)
    assert (acc <= dr).all() and (dr <= np.arange(1, 7)).all() and (acc[dr == 0] == 0).all()
    assert table.params["concurrency"] == conc
    for r in range(len(reqs)):
        n = int(table.output_len[r])
        assert sum(min(s.a + 1, n - s.t) for s in replay_table(table, r, 6)) == max(n - 1, 0)


def test_concurrency_one_equals_sequential():
    rng = np.random.default_rng(5)
    reqs = _reqs([(rng.integers(0, 4, 20).tolist(), rng.integers(0, 4, 30).tolist()) for _ in range(5)])
    a = build_table(reqs, kmax=8)
    b = build_table(reqs, kmax=8, ordering="concurrent", concurrency=1)
    assert np.array_equal(a.accepted, b.accepted) and np.array_equal(a.drafted, b.drafted)


def test_rebuilt_output_check_rejects_differences():
    from simkit.acceptance.replay import verify_rebuilt

    out = np.array([1, 2, 3, 4], np.int32)
    verify_rebuilt([1, 2, 3, 4], out, "x")
    with pytest.raises(ReplayMismatch):
        verify_rebuilt([1, 2, 3, 5], out, "x")
    with pytest.raises(ReplayMismatch):
        verify_rebuilt([1, 2, 3], out, "x")


def test_table_replay_rejects_impossible_rows():
    reqs = _reqs([([1, 2, 3], [1, 2, 1, 2, 1, 2])])
    table = build_table(reqs, kmax=4)
    table.accepted[int(table.offsets[0]) + 1, 3] = 5
    with pytest.raises(ReplayMismatch):
        replay_table(table, 0, 4)


def test_ngram_table_matches_direct_replay():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 50, 30).tolist()
    reqs = _reqs([(base, base[5:25] + base[:10]), (base[::-1], base[:12])])
    params = NgramParams()
    table = build_table(reqs, drafter="ngram", params=params, kmax=8)
    for r, req in enumerate(reqs):
        known = [int(x) for x in req.prompt_ids] + [int(req.output_ids[0])]
        steps = replay_direct(lambda t: ngram_propose(known, 5, params), known.extend, req.output_ids)
        assert [(s.t, s.d, s.a) for s in steps] == [(s.t, s.d, s.a) for s in replay_table(table, r, 5)]
    assert summarize(table, 5)["mean_accepted"] > 0


def test_save_load_roundtrip_is_byte_identical(tmp_path):
    rng = np.random.default_rng(2)
    reqs = _reqs([(rng.integers(0, 5, 15).tolist(), rng.integers(0, 5, 25).tolist()) for _ in range(3)])
    table = build_table(reqs, kmax=16, model="m", corpus="c")
    for comp in ("deflate", "bzip2", "stored"):
        p1, p2 = tmp_path / f"a-{comp}.npz", tmp_path / f"b-{comp}.npz"
        save_table(table, p1, compression=comp)
        back = load_table(p1)
        assert np.array_equal(back.accepted, table.accepted) and back.params == table.params
        save_table(back, p2, compression=comp)
        assert hashlib.sha256(p1.read_bytes()).digest() == hashlib.sha256(p2.read_bytes()).digest()


def test_cached_table_reloads_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    reqs = _reqs([(rng.integers(0, 5, 15).tolist(), rng.integers(0, 5, 25).tolist()) for _ in range(3)])
    first = cached_table(reqs, kmax=8)
    assert len(list(store_dir().glob("suffix-*/meta.json"))) == 1
    again = cached_table(reqs, kmax=8)
    assert np.array_equal(first.accepted, again.accepted) and np.array_equal(first.drafted, again.drafted)


def test_stats_count_every_decode_token():
    rng = np.random.default_rng(4)
    reqs = _reqs([(rng.integers(0, 3, 10).tolist(), rng.integers(0, 3, n).tolist()) for n in (1, 2, 30, 45)])
    table = build_table(reqs, kmax=8)
    for k in (1, 4, 8):
        s = summarize(table, k)
        assert s["decode_tokens"] == sum(int(r.output_ids.shape[0]) - 1 for r in reqs)
        assert sum(s["accept_hist"]) == s["steps"]
        assert abs(s["tokens_per_step"] * s["steps"] - s["decode_tokens"]) < 1e-9


@pytest.mark.slow
def test_real_requests_replay_exactly():
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    from traces.corpora import load_corpus

    for corpus in ("math", "code-edit"):
        reqs = load_corpus(corpus, "llama-3.1-8b").requests[:6]
        reqs = [SimpleNamespace(prompt_ids=r.prompt_ids, output_ids=r.output_ids[:250]) for r in reqs]
        params = SuffixParams()
        table = build_table(reqs, params=params, kmax=16)
        for k in (3, 8, 16):
            for r, steps in enumerate(_direct_suffix(reqs, params, k)):
                assert [(s.t, s.d, s.a) for s in steps] == \
                    [(s.t, s.d, s.a) for s in replay_table(table, r, k)]
        assert summarize(table, 8)["mean_accepted"] > 0


# -- warm tables: sampled rows of a whole-corpus replay, other requests inserted only ------------------
def _rows(table, sample):
    return np.concatenate([np.arange(table.offsets[i], table.offsets[i + 1]) for i in sample])


def _assert_warm_equals_full(reqs, sample, params, kmax):
    full = build_table(reqs, params=params, kmax=kmax)
    warm = build_warm_table(reqs, sample, params=params, kmax=kmax)
    rows = _rows(full, sample)
    assert np.array_equal(warm.accepted, full.accepted[rows])
    assert np.array_equal(warm.drafted, full.drafted[rows])
    assert np.array_equal(warm.output_len, full.output_len[sample])
    assert np.array_equal(warm.prompt_len, full.prompt_len[sample])
    assert warm.params["tree"] == "warm" and warm.ordering == "sequential"
    return full, warm


@settings(max_examples=40, deadline=None)
@given(data=st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=15),
                               st.lists(st.integers(0, 3), min_size=0, max_size=30)),
                     min_size=1, max_size=7),
       picks=st.lists(st.booleans(), min_size=7, max_size=7),
       cache=st.sampled_from([0, 1, 2, 10000]))
def test_warm_rows_equal_full_replay_rows_on_random_sequences(data, picks, cache):
    reqs = _reqs(data)
    sample = [i for i in range(len(reqs)) if picks[i]] or [len(reqs) - 1]
    _assert_warm_equals_full(reqs, sample, SuffixParams(max_tree_depth=6, max_cached_requests=cache), 6)


@settings(max_examples=40, deadline=None)
@given(seqs=st.lists(st.lists(st.integers(0, 4), min_size=0, max_size=40), min_size=1, max_size=6),
       drop=st.lists(st.integers(0, 5), max_size=3))
def test_insert_fast_builds_the_tree_append_builds(seqs, drop):
    """Node for node (counts, tokens, lengths, references, parents, child order, child map)."""
    a, b = SuffixTree(5), SuffixTree(5)
    for i, s in enumerate(seqs):
        a.extend(i, s)
        b.insert_fast(i, s)
        if i in drop:
            a.remove(i // 2)
            b.remove(i // 2)
    for f in ("cnt", "tok", "ln", "rseq", "ridx", "par", "head1", "multi", "kids", "seqs", "store"):
        assert getattr(a, f) == getattr(b, f), f
    assert {k: list(v) for k, v in a.active.items()} == {k: list(v) for k, v in b.active.items()}


def test_warm_sample_rejects_bad_indices():
    reqs = _reqs([([1, 2], [1, 2, 3])] * 3)
    for bad in ([1, 0], [0, 0], [3], [-1, 1]):
        with pytest.raises(ValueError):
            build_warm_table(reqs, bad)


@pytest.mark.slow
@pytest.mark.parametrize("corpus,n,cache", [("code-edit", 60, 10000), ("chat", 70, 12)])
def test_warm_rows_equal_full_replay_rows_on_real_corpus(corpus, n, cache):
    """Real slice, vLLM defaults (and a FIFO of 12 so that eviction happens): exact equality."""
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    from simkit.profiles.sampling import sample_indices
    from traces.corpora import load_corpus

    reqs = load_corpus(corpus, "llama-3.1-8b").requests[:n]
    sample = sample_indices(n, 8).tolist()
    full, warm = _assert_warm_equals_full(reqs, sample, SuffixParams(max_cached_requests=cache), 16)
    cold = build_table([reqs[i] for i in sample], params=SuffixParams(max_cached_requests=cache), kmax=16)
    # The sample alone sees fewer earlier responses: fewer accepted tokens than inside the corpus.
    assert int(cold.accepted[:, 7].sum()) < int(warm.accepted[:, 7].sum())


def test_cached_warm_table_reloads_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(6)
    reqs = _reqs([(rng.integers(0, 5, 15).tolist(), rng.integers(0, 5, 25).tolist()) for _ in range(5)])
    first = cached_warm_table(reqs, [1, 4], kmax=8)
    assert len(list(store_dir().glob("suffix-warm-*/meta.json"))) == 1
    again = cached_warm_table(reqs, [1, 4], kmax=8)
    assert np.array_equal(first.accepted, again.accepted) and again.params == first.params
    other = cached_warm_table(reqs, [1, 3], kmax=8)
    assert len(list(store_dir().glob("suffix-warm-*/meta.json"))) == 2
    assert other.num_requests == 2
