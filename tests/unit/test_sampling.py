"""The stratified, calibrated profile sample (simkit.profiles.sampling) and the engine's weighted draw:
deterministic, weights that sum to the corpus and match its totals, strata as designed, and a
run whose request counts follow the weights."""

from __future__ import annotations

import numpy as np
import pytest

from simkit.profiles import sampling
from simkit.acceptance.stats import summarize
from simkit.engine.config import EngineConfig
from simkit.engine.scheduler import mean_accepted_per_step
from simkit.engine.sim import request_order, weighted_order
from simkit.engine.workload import Workload
from tests.engine_doubles import make_table


def _stats(n: int = 3000, seed: int = 5) -> sampling.RequestStats:
    """A heavy-tailed synthetic corpus: 4 % capped 4,096-token loops that accept almost all."""
    rng = np.random.default_rng(seed)
    capped = rng.random(n) < 0.04
    out = np.where(capped, 4096, np.minimum(rng.lognormal(5.5, 0.9, n).astype(np.int64) + 2, 4000))
    plen = rng.integers(20, 3000, n)
    rate = np.where(capped, 0.9, rng.beta(1.5, 4, n))
    ks = sampling.CAL_KS
    acc = np.stack([(out * rate * min(k, 6) / (min(k, 6) + 1)).astype(np.int64) for k in ks], 1)
    steps = out[:, None] - 1 - acc
    ctx0 = (out - 1) * plen + (out - 1) * out / 2
    ctx = np.column_stack([ctx0] + [steps[:, j] * (plen + out / 2) for j in range(len(ks))])
    return sampling.RequestStats(plen.astype(np.int64), out.astype(np.int64), capped, acc,
                                 ctx.astype(np.float64), ks)


def test_stratified_sample_is_deterministic_and_sums_to_the_corpus():
    st = _stats()
    a, b = sampling.stratified_sample(st, 128), sampling.stratified_sample(st, 128)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.weights, b.weights)
    assert a.info == b.info and a.info["rule"] == sampling.RULE
    assert a.indices.size == 128 and (np.diff(a.indices) > 0).all()
    assert (a.weights > 0).all()
    assert a.weights.sum() == pytest.approx(3000, rel=1e-6)


def test_calibrated_totals_equal_the_corpus_totals():
    st = _stats()
    s = sampling.stratified_sample(st, 128)
    x, names = sampling._columns(st)
    used = s.info["calibrated_on"]
    assert {"requests", "capped_requests", "output_tokens", "prompt_tokens"} <= set(used)
    for j, name in enumerate(names):
        if name in used:
            assert s.weights @ x[s.indices, j] == pytest.approx(x[:, j].sum(), rel=1e-6), name
    lo, hi = s.info["weight_tilt_range"]
    assert 1 / sampling.MAX_TILT <= lo <= hi <= sampling.MAX_TILT


def test_capped_stratum_is_oversampled_and_weighted_back_to_its_share():
    st = _stats()
    s = sampling.stratified_sample(st, 128)
    capped = st.capped[s.indices]
    strata = s.info["strata"]
    assert strata["capped"] == {"corpus": int(st.capped.sum()), "sample": int(capped.sum())}
    assert strata["uncapped"]["sample"] + strata["capped"]["sample"] == 128
    # sqrt(length) allocation: long capped outputs are kept more often than their request share
    assert capped.mean() > 2 * st.capped.mean()
    assert s.weights[capped].sum() == pytest.approx(st.capped.sum(), rel=1e-6)


def test_small_corpus_is_taken_whole_and_unweighted():
    st = _stats(n=100)
    s = sampling.stratified_sample(st, 128)
    assert s.indices.tolist() == list(range(100)) and s.weights is None and s.info["rule"] == "all"


def test_blocks_are_contiguous_and_never_empty():
    mass = np.array([1.0] * 50 + [500.0] + [1.0] * 50)
    for k in (1, 3, 10, 101, 200):
        blocks = sampling._blocks(mass, k)
        assert blocks[0][0] == 0 and blocks[-1][1] == mass.size
        assert all(b > a for a, b in blocks)
        assert all(blocks[i][1] == blocks[i + 1][0] for i in range(len(blocks) - 1))
        assert len(blocks) == min(k, mass.size)


def test_request_stats_walk_equals_a_step_by_step_replay():
    lens = [1, 2, 9, 30, 57]
    tab = make_table([10, 20, 30, 40, 50], lens, lambda r, t, k: (r + t) % (k + 1),
                     lambda r, t, k: k, kmax=12)
    st = sampling.request_stats(tab, [False, False, True, False, True], ks=(2, 4))
    for r, n in enumerate(lens):
        for j, k in enumerate((2, 4)):
            t, acc, ctx = 1, 0, 0.0
            while t < n:
                a = min(int(tab.accepted[tab.offsets[r] + t, k - 1]), n - t - 1)
                acc, ctx, t = acc + a, ctx + tab.prompt_len[r] + t, t + a + 1
            assert st.accepted[r, j] == acc and st.context[r, j + 1] == ctx
        assert st.context[r, 0] == sum(tab.prompt_len[r] + t for t in range(1, n))


def test_weighted_draw_follows_the_weights():
    usable = np.arange(5)
    w = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    order = weighted_order(usable, w, 20, np.random.default_rng(3))
    assert np.bincount(order, minlength=5).tolist() == [1, 2, 3, 4, 10]   # n = W: exact
    for seed in range(20):
        got = np.bincount(weighted_order(usable, w, 37, np.random.default_rng(seed)), minlength=5)
        want = 37 * w / w.sum()
        assert got.sum() == 37 and (got >= np.floor(want)).all() and (got <= np.ceil(want)).all()
    again = weighted_order(usable, w, 37, np.random.default_rng(7))
    assert again == weighted_order(usable, w, 37, np.random.default_rng(7))


def _workload(weights=None) -> Workload:
    tab = make_table([100, 200, 300, 400], [40, 80, 120, 160], lambda r, t, k: (r * t) % (k + 1),
                     lambda r, t, k: k, kmax=8)
    return Workload(np.asarray(tab.prompt_len, np.int32), np.asarray(tab.output_len, np.int32),
                    {"suffix": tab}, weights=weights)


def test_engine_order_honours_weights_and_unweighted_order_is_unchanged():
    cfg = EngineConfig(kv_capacity_tokens=1 << 20)
    order, _ = request_order(_workload(np.array([1.0, 1.0, 1.0, 5.0])), cfg, 80, seed=2)
    assert np.bincount(order).tolist() == [10, 10, 10, 50]
    plain, _ = request_order(_workload(), cfg, 10, seed=2)
    rng = np.random.default_rng(2)
    cycled = rng.permutation(4).tolist() + rng.permutation(4).tolist() + rng.permutation(4).tolist()
    assert plain == cycled[:10]


def test_uniform_weights_leave_the_acceptance_figures_unchanged():
    plain, even = _workload(), _workload(np.full(4, 2.5))
    for k in (2, 4, 8):
        assert mean_accepted_per_step(even, "suffix", k) == pytest.approx(
            mean_accepted_per_step(plain, "suffix", k), rel=1e-12)
        a = summarize(plain.table("suffix"), k)
        b = summarize(plain.table("suffix"), k, weights=np.full(4, 2.5))
        assert b["mean_accepted"] == pytest.approx(a["mean_accepted"], rel=1e-12)
        assert b["tokens_per_step"] == pytest.approx(a["tokens_per_step"], rel=1e-12)
        assert b["steps"] == round(2.5 * a["steps"])


def test_bad_weights_are_named():
    from simkit.engine.workload import check_weights
    from simkit.errors import InputError

    with pytest.raises(InputError, match="weights"):
        check_weights([1.0, 0.0], 2)
    with pytest.raises(InputError, match="weights"):
        check_weights([1.0], 2)


def test_repeat_history_draws_of_repeated_requests_repeat_their_prompts():
    """On a weighted sample under hot / repeat:P every draw of a repeated request stands for a
    corpus request served before: it repeats its prompt (frozenset form of repeat_prompts)."""
    from simkit.block_hash import pack
    from simkit.engine.runner import history_repeated
    from simkit.engine.sim import simulate
    from simkit.history import parse_history, repeat_indices
    from tests.engine_doubles import LinearCost

    w = _workload(np.array([1.0, 2.0, 3.0, 4.0]))
    w.block_hashes = pack([np.arange(p // 16, dtype=np.uint64) + np.uint64(1000 * (i + 1))
                           for i, p in enumerate(w.prompt_len.tolist())])
    cfg = EngineConfig(kv_capacity_tokens=1 << 20)
    for label, want in (("hot", {0, 1, 2, 3}), ("cold", False), ("warm", False),
                        ("repeat:1,evicted", False)):
        w.history = parse_history(label)
        got = history_repeated(w, cfg)
        assert (set(got) if want else got) == want
    w.history = parse_history("repeat:0.5")
    assert history_repeated(w, cfg) == frozenset(int(i) for i in repeat_indices(4, 0.5))
    w.weights, w.history = None, parse_history("hot")
    assert history_repeated(w, cfg) is False
    w.weights = np.array([1.0, 2.0, 3.0, 4.0])
    from simkit.engine.config import SpecConfig

    spec = SpecConfig("vanilla")
    runs = {key: simulate(w, LinearCost(), cfg, spec, seed=1, num_requests=40,
                          repeat_prompts=key).prefix["hit_rate"]
            for key in (False, True, frozenset(range(4)))}
    assert runs[True] == runs[frozenset(range(4))] > runs[False]
