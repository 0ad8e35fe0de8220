"""vLLM 0.34's adaptive verification rules (simkit.engine.adaptive), on cases worked by hand from the
rules read in vllm-0.34.0 (docs/engine.md, "Adaptive verification")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from simkit.engine.adaptive import (STATS_HALF_LIFE, AcceptanceCounters, allocate, choose_budget,
                                    len_bucket)


def test_length_buckets_follow_the_source():
    assert [len_bucket(m) for m in (0, 1, 2, 6, 7, 10, 11, 20, 21, 24)] == \
        [0, 0, 1, 5, 6, 6, 7, 7, 8, 8]


def test_fresh_counters_give_one_half_and_fillers_zero():
    c = AcceptanceCounters(k=4)
    conf = c.confidences(source=1, match_len=3, num_valid=2)
    assert conf.dtype == np.float32
    assert conf.tolist() == [0.5, 0.5, 0.0, 0.0]


def test_observe_counts_up_to_the_first_rejection_within_valid_and_verified_slots():
    c = AcceptanceCounters(k=4)
    b = c.bucket(0, 2)
    c.observe(b, num_valid=4, num_accepted=1, num_verified=4)   # slot 0 accepted, 1 rejected
    assert c.counts[b, :, 0].tolist() == [1, 0, 0, 0]
    assert c.counts[b, :, 1].tolist() == [1, 1, 0, 0]
    c.observe(b, num_valid=2, num_accepted=2, num_verified=4)   # both valid accepted, filler not seen
    assert c.counts[b, :, 0].tolist() == [2, 1, 0, 0]
    assert c.counts[b, :, 1].tolist() == [2, 2, 0, 0]
    c.observe(b, num_valid=4, num_accepted=1, num_verified=1)   # trimmed to one admitted slot
    assert c.counts[b, :, 1].tolist() == [3, 2, 0, 0]
    before = c.counts.copy()
    c.observe(-1, num_valid=0, num_accepted=0, num_verified=4)  # no valid draft: nothing
    assert (c.counts == before).all()
    assert c.counts[b, :, 0].tolist() == [3, 1, 0, 0]
    assert c.confidences(0, 2, 4)[0] == np.float32(4.0) / np.float32(5.0)


def test_counters_halve_every_half_life():
    c = AcceptanceCounters(k=2)
    c.counts[:] = 7
    for _ in range(STATS_HALF_LIFE - 1):
        c.tick()
    assert int(c.counts.max()) == 7
    c.tick()
    assert int(c.counts.max()) == 3


def test_budget_buys_a_slot_only_while_it_raises_tokens_per_ms():
    # two requests; survivals 0.9, 0.45 and 0.5, 0.05; cost 10 ms + 1 ms per token
    stale = np.array([[0.9, 0.5], [0.5, 0.1]], np.float32)
    cost = lambda tokens: 1.0 * tokens                                    # noqa: E731
    b = choose_budget(stale, np.array([2, 2]), num_sampling_requests=2, num_non_draft_tokens=2,
                      draft_cost_ms=10.0, verify_cost_ms=cost)
    # ratios: b0 2/12=.167, b1 2.9/13=.223, b2 3.4/14=.243, b3 3.85/15=.2567, b4 3.9/16=.244
    assert b == 3


def test_flat_cost_buys_every_slot_that_adds_expected_tokens_and_no_filler():
    stale = np.array([[0.8, 0.0]], np.float32)          # second slot a filler (confidence 0)
    b = choose_budget(stale, np.array([2]), 1, 1, 0.0, lambda t: 5.0)
    assert b == 1                                       # the first maximum: the filler adds nothing


def test_allocation_takes_highest_survival_and_ties_in_request_order():
    conf = np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.9]], np.float32)
    # survivals: r0 .5 .25; r1 .5 .25; r2 .9 .81
    assert allocate(conf, np.array([2, 2, 2]), 3).tolist() == [1, 0, 2]
    assert allocate(conf, np.array([2, 2, 2]), 4).tolist() == [1, 1, 2]
    assert allocate(conf, np.array([2, 2, 2]), 5).tolist() == [2, 1, 2]
    assert allocate(conf, np.array([2, 2, 2]), 0).tolist() == [0, 0, 0]
    assert allocate(conf, np.array([1, 2, 0]), 9).tolist() == [1, 2, 0]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.data())
def test_allocation_is_a_per_request_prefix_summing_to_the_budget(n, k, data):
    conf = np.array(data.draw(st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
                                                min_size=k, max_size=k), min_size=n, max_size=n)),
                    np.float32)
    cap = np.array(data.draw(st.lists(st.integers(0, k), min_size=n, max_size=n)))
    budget = data.draw(st.integers(0, int(cap.sum())))
    got = allocate(conf, cap, budget)
    assert int(got.sum()) == budget
    assert ((0 <= got) & (got <= cap)).all()
    # the admitted slots are the best ones: no admitted slot survives less than a refused one
    surv = np.cumprod(conf, axis=1, dtype=np.float32)
    admitted = [surv[r, j] for r in range(n) for j in range(got[r])]
    refused = [surv[r, j] for r in range(n) for j in range(got[r], cap[r])]
    if admitted and refused:
        assert min(admitted) >= max(refused)


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        AcceptanceCounters(k=0)
