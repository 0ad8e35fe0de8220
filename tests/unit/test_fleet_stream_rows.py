"""fleet.plan's least-outstanding iteration moves each replica's suffix table into the whole
traffic's rows with one gather (`_stream_rows`): the same rows as a slice per request."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.fleet.plan import _stream_rows


@settings(max_examples=60, deadline=None)
@given(olen=st.lists(st.integers(1, 12), min_size=1, max_size=40), data=st.data())
def test_one_gather_gives_the_rows_of_a_slice_per_request(olen, data):
    offs = np.r_[0, np.cumsum(olen)].astype(np.int64)
    n = len(olen)
    picked = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    idx = np.array(sorted(picked), np.int64)
    toffs = np.r_[0, np.cumsum(np.asarray(olen)[idx])].astype(np.int64)
    table = np.arange(int(toffs[-1])) + 1000            # the replica's own rows, in its order
    moved = np.zeros(int(offs[-1]), np.int64)
    moved[_stream_rows(offs, idx, toffs)] = table
    expected = np.zeros_like(moved)
    for j, i in enumerate(idx.tolist()):
        expected[offs[i]:offs[i + 1]] = table[toffs[j]:toffs[j + 1]]
    assert np.array_equal(moved, expected)


def test_a_table_of_other_lengths_is_refused():
    offs = np.array([0, 3, 5, 9], np.int64)
    with pytest.raises(ValueError, match="stream's output tokens"):
        _stream_rows(offs, np.array([0, 2]), np.array([0, 3, 6], np.int64))
