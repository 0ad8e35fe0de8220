"""n-gram (prompt lookup) drafter: vLLM 0.26 match rule and the all-positions table builder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.drafters.ngram import NgramParams, ngram_draft_all_positions, ngram_propose


def test_earliest_occurrence_of_the_last_n_tokens_wins():
    a = [1, 2, 3, 4, 5]
    ctx = a + [10, 11] + a + [20, 21] + a
    assert ngram_propose(ctx, 3) == [10, 11, 1]


def test_draft_is_cut_at_the_end_of_the_context():
    ctx = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5]
    assert ngram_propose(ctx, 10) == [6, 1, 2, 3, 4, 5]


def test_overlapping_occurrence_counts():
    # Six equal tokens: the last five occur at 0 (followed by the sixth token).
    assert ngram_propose([7] * 6, 4) == [7]


def test_no_match_no_draft_and_short_context():
    assert ngram_propose([1, 2, 3, 4, 5, 6, 7], 4) == []
    assert ngram_propose([1, 2, 3], 4) == []


def test_longest_n_preferred_over_earliest():
    p = NgramParams(prompt_lookup_min=2, prompt_lookup_max=4)
    # "8 9" occurs at 0 (followed by 50); "7 8 9" occurs at 4 (followed by 60): longest wins.
    ctx = [8, 9, 50, 0, 7, 8, 9, 60, 1, 7, 8, 9]
    assert ngram_propose(ctx, 2, p) == [60, 1]


def test_params_are_validated():
    with pytest.raises(ValueError):
        NgramParams(prompt_lookup_min=4, prompt_lookup_max=3)


@settings(max_examples=80, deadline=None)
@given(prompt=st.lists(st.integers(0, 2), min_size=0, max_size=25),
       out=st.lists(st.integers(0, 2), min_size=1, max_size=30),
       lo=st.integers(1, 3), extra=st.integers(0, 2))
def test_table_rows_equal_direct_proposals(prompt, out, lo, extra):
    params = NgramParams(prompt_lookup_min=lo, prompt_lookup_max=lo + extra)
    kmax = 6
    d, a = ngram_draft_all_positions(np.array(prompt, np.int32), np.array(out, np.int32), kmax, params)
    assert d.shape == (len(out), kmax) and not d[0].any()
    for t in range(1, len(out)):
        for k in range(1, kmax + 1):
            draft = ngram_propose(prompt + out[:t], k, params)
            acc = 0
            for x, y in zip(draft, out[t:]):
                if x != y:
                    break
                acc += 1
            assert (d[t, k - 1], a[t, k - 1]) == (len(draft), acc)
