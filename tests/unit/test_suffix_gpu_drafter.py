"""The suffix_gpu drafter (vLLM 0.34's GPU suffix speculator): hand-checked drafts, fillers, the
ingestion lag of each ordering, and the compiled all-K replay equal to the reference's one-K-at-a-
time tables byte for byte. Parity with vLLM's own kernels: tests/slow/test_suffix_gpu_parity.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from simkit.acceptance.build import build_table
from simkit.choices import Ordering
from simkit.drafters.base import get_drafter
from simkit.drafters.suffix_gpu import reference as ref
from simkit.drafters.suffix_gpu.params import SuffixGpuParams, num_buckets
from simkit.drafters.suffix_gpu.replay import replay_rows


@dataclass
class Req:
    prompt_ids: np.ndarray
    output_ids: np.ndarray


def _req(prompt, output) -> Req:
    return Req(np.array(prompt, np.int32), np.array(output, np.int32))


def _table(reqs, params, kmax, ordering=Ordering.SEQUENTIAL, concurrency=1, engine="compiled",
           prelude=()):
    offs = np.zeros(len(reqs) + 1, np.int64)
    np.cumsum([len(r.output_ids) for r in reqs], out=offs[1:])
    acc = np.zeros((int(offs[-1]), kmax), np.uint8)
    dr = acc.copy()
    replay_rows(reqs, params, kmax, offs[:-1], acc, dr, ordering=ordering,
                concurrency=concurrency, progress=None, engine=engine, prelude=prelude)
    return offs, acc, dr


def test_registered_with_vllm034_defaults():
    d = get_drafter("suffix_gpu")
    assert (d.default_k, d.remembers_history) == (8, True)
    assert d.label(8) == "suffix_gpu" and d.label(4) == "suffix_gpu-4"
    p = d.default_params()
    assert (p.max_depth, p.corpus_tokens, p.ingest_lag, p.buckets) == (24, 1 << 20, 2, 1 << 18)
    assert num_buckets(64) == 16 and num_buckets(1000) == 256 and num_buckets(0) == 16


def test_compiled_constants_are_vllms():
    from simkit.drafters.suffix_gpu import kernels, params

    assert (kernels.HASH_MUL, kernels.SLOTS, kernels.PROMPT_CONTEXT) == \
        (params.HASH_MUL, params.SLOTS, params.PROMPT_CONTEXT) == (0x9E3779B97F4A7C15, 8, 3)


def test_hash_is_wrapping_uint64_like_the_signed_kernel():
    # vLLM multiplies signed int64s; the bucket's low bits equal the unsigned computation's
    mul = 0x9E3779B97F4A7C15 - (1 << 64)
    for toks in ([1, 2, 3, 4], [128000, 0, 7, 151643], [5, 5, 5, 5]):
        hv = 0
        for t in toks:
            hv = ((hv ^ t) * mul + (1 << 63)) % (1 << 64) - (1 << 63)      # int64 wrap
        signed = ((hv >> 29) ^ hv) & ((1 << 18) - 1)
        assert ref.bucket(ref._hash_keys(toks)[1], 1 << 18) == signed


def test_own_history_latest_longest_match_and_fillers():
    params = SuffixGpuParams(corpus_tokens=0)
    # suffix [7, 8] occurs ending at 2 and at 6; the latest (p = 7) continues with 3
    row = [1, 7, 8, 9, 5, 7, 8, 3, 4, 7, 8]
    assert ref.own_match(np.array(row), 24) == (2, 7)
    slots, valid = ref.propose(row, None, params, 6)
    assert list(slots) == [3, 4, 7, 8, 8, 8] and valid == 4      # 2 fillers = last token
    slots, valid = ref.propose([1, 2, 3], None, params, 3)        # nothing matches
    assert list(slots) == [3, 3, 3] and valid == 0


def test_fillers_are_accepted_and_not_counted_as_drafted():
    # output "5 5 5 5": from t = 1 the history ends "... 5"; the own match continues with 5s
    # until the end of the history, then fillers (5) keep being accepted
    req = _req([9, 8], [5, 5, 5, 5, 5, 5])
    _, acc, dr = _table([req], SuffixGpuParams(corpus_tokens=0), 4, engine="python")
    assert list(dr[1]) == [0, 0, 0, 0]          # history 9 8 5: no earlier 5
    assert list(acc[1]) == [1, 2, 3, 4]         # the filler 5 is verified and accepted
    assert dr[3, 3] < acc[3, 3]


def test_corpus_vote_draws_from_finished_requests_only():
    params = SuffixGpuParams(corpus_tokens=256)
    first = _req([100, 101, 102], [1, 2, 3, 4, 5])
    again = _req([200, 101, 102], [1, 2, 3, 4, 5])
    offs, acc, dr = _table([first, again], params, 4, engine="python")
    # the first request never sees its own document; the second copies it from the corpus
    assert dr[offs[0] + 1:offs[1]].max() == 0
    assert list(dr[offs[1] + 1]) == [1, 2, 3, 4] and list(acc[offs[1] + 1]) == [1, 2, 3, 4]
    corpus = ref.Corpus(params)
    corpus.ingest([ref.document(first.prompt_ids, first.output_ids)])
    assert list(corpus.ring[:9]) == [100, 101, 102, 1, 2, 3, 4, 5, -1]
    assert (corpus.head, corpus.docs) == (9, 1)


def test_concurrent_replay_honours_the_ingestion_lag():
    a = _req([100, 101, 102], [1, 2, 3, 4])            # finishes at tick 2
    b = _req([200], [61, 62, 1, 2, 3, 4, 80])          # history ends "1 2" at tick 3 (t = 4)
    rows = {}
    for lag in (1, 2):
        params = SuffixGpuParams(corpus_tokens=256, ingest_lag=lag)
        offs, acc, dr = _table([a, b], params, 4, Ordering.CONCURRENT, 2, engine="python")
        rows[lag] = (dr[offs[1] + 4].copy(), dr[offs[1] + 5].copy())
    assert list(rows[1][0]) == [1, 2, 2, 2]      # ingested before tick 3: draft "3 4"
    assert list(rows[2][0]) == [0, 0, 0, 0]      # lag 2: not yet
    assert list(rows[2][1]) == [1, 1, 1, 1]      # tick 4: "4" from the corpus


def _random_requests(rng, n, vocab=12):
    base = rng.integers(0, vocab, 40)
    out = []
    for _ in range(n):
        p = rng.integers(0, vocab, rng.integers(0, 12))
        o = np.concatenate([base[rng.integers(0, 20):][:rng.integers(1, 25)],
                            rng.integers(0, vocab, rng.integers(0, 15))])
        out.append(_req(p, o))
    return out


@pytest.mark.parametrize("params", [SuffixGpuParams(), SuffixGpuParams(corpus_tokens=64, max_depth=5),
                                    SuffixGpuParams(corpus_tokens=0),
                                    SuffixGpuParams(corpus_tokens=100, ingest_lag=1)],
                         ids=["default", "small-ring", "no-corpus", "lag1"])
def test_compiled_all_k_equals_reference_per_k(params):
    # a small vocabulary: many corpus candidates that disagree, so the vote's per-K choice of
    # match length matters (scored at kmax it differs from this reference)
    rng = np.random.default_rng(7)
    for trial in range(2):
        reqs = _random_requests(rng, 8)
        prelude = [reqs[0], reqs[1].output_ids]
        for ordering, conc in ((Ordering.SEQUENTIAL, 1), (Ordering.CONCURRENT, 3)):
            got = [_table(reqs, params, 8, ordering, conc, engine, prelude)
                   for engine in ("python", "compiled")]
            assert np.array_equal(got[0][1], got[1][1]), (trial, ordering)
            assert np.array_equal(got[0][2], got[1][2]), (trial, ordering)


def test_build_table_by_name_is_deterministic():
    reqs = _random_requests(np.random.default_rng(3), 8)
    t1 = build_table(reqs, drafter="suffix_gpu", kmax=16)
    t2 = build_table(reqs, drafter="suffix_gpu", kmax=16)
    assert t1.params["drafter"] == "suffix_gpu" and t1.kmax == 16
    assert np.array_equal(t1.accepted, t2.accepted) and np.array_equal(t1.drafted, t2.drafted)
    ks = np.arange(1, 17)
    assert (t1.drafted <= ks).all() and (t1.accepted <= ks).all()


def test_warm_table_equals_the_sampled_rows_of_the_whole_replay():
    from simkit.acceptance.build import build_warm_table
    from simkit.acceptance.table import take_requests

    reqs = _random_requests(np.random.default_rng(5), 9)
    sample = [1, 4, 5, 8]
    warm = build_warm_table(reqs, sample, drafter="suffix_gpu", kmax=8)
    whole = take_requests(build_table(reqs, drafter="suffix_gpu", kmax=8), sample)
    assert warm.drafter == "suffix_gpu" and warm.params["tree"] == "warm"
    assert np.array_equal(warm.accepted, whole.accepted)
    assert np.array_equal(warm.drafted, whole.drafted)


def test_hot_table_equals_the_second_pass_of_a_doubled_replay():
    # hot: every request was served before (prompt context and response enter the corpus)
    from simkit.acceptance.history_tables import cached_history_table
    from simkit.acceptance.table import take_requests
    from simkit.history import parse_history

    reqs = _random_requests(np.random.default_rng(6), 6)
    hot = cached_history_table(reqs, parse_history("hot"), drafter="suffix_gpu", kmax=8,
                               use_cache=False)
    doubled = build_table(reqs + reqs, drafter="suffix_gpu", kmax=8)
    second = take_requests(doubled, range(len(reqs), 2 * len(reqs)))
    assert np.array_equal(hot.accepted, second.accepted)
    assert np.array_equal(hot.drafted, second.drafted)
    cold = build_table(reqs, drafter="suffix_gpu", kmax=8)
    assert hot.accepted.sum() > cold.accepted.sum()


def test_stats_count_every_step_as_k_verified_slots():
    # fillers are verified like drafts, so vLLM 0.34 reports K drafted slots per step: the rates
    # are over all steps (a step with no real draft can still accept its fillers)
    from simkit.acceptance.stats import summarize

    reqs = [_req([9, 8], [5, 5, 5, 5, 5, 5, 7, 5, 5, 5])] + _random_requests(np.random.default_rng(2), 6)
    table = build_table(reqs, drafter="suffix_gpu", kmax=8)
    for k in (1, 4, 8):
        r = summarize(table, k)
        assert r["num_drafts"] == r["steps"]
        assert r["draft_acceptance_rate"] == pytest.approx(r["mean_accepted"] / k)
        assert r["per_position_accept_rate"][0] == pytest.approx(1 - r["accept_hist"][0] / r["steps"])
        assert all(0 <= x <= 1 for x in r["per_position_accept_rate"])
    # the filler case of the first request: accepted tokens on steps with no real draft
    assert (table.accepted[1:6, 3] > table.drafted[1:6, 3]).any()
