"""The compiled in-loop suffix drafter (CompiledInLoopSuffix) against the pure-Python reference
(InLoopSuffix): the same drafts and accepted lengths on every call, byte for byte.

Random requests and random engine trajectories (hypothesis): batches in any order, several tokens
per step (accepted drafts), preemptions (a request stopped and started again later from the
position it reached), small max_cached_requests so that FIFO eviction of finished and of in-flight
responses happens, and shrunken forest capacities so that every growth path of the arrays runs.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.drafters.suffix import compiled as suffix_compiled
from simkit.drafters.suffix.cache import SuffixParams
from simkit.drafters.suffix.in_loop import CompiledInLoopSuffix, InLoopSuffix, in_loop_suffix


@pytest.fixture(autouse=True)
def _tiny_forest(monkeypatch):
    monkeypatch.setattr(suffix_compiled, "FOREST_SIZES", (2, 4, 2))


def _reqs(pairs):
    return [SimpleNamespace(prompt_ids=np.array(p, np.int32), output_ids=np.array(o, np.int32))
            for p, o in pairs]


def _drive(drafter, reqs, choices: list[int]) -> list:
    """An engine trajectory decided by `choices`, applied to `drafter`; every call's answer."""
    pos = [0] * len(reqs)                       # output tokens produced per request
    waiting = [i for i in range(len(reqs)) if len(reqs[i].output_ids)]
    running: list[int] = []
    out = []
    c = itertools.cycle(choices)
    while waiting or running:
        while waiting and len(running) < 1 + next(c) % 4:
            running.append(waiting.pop(0))
        batch = list(running)
        if next(c) % 2:
            batch.reverse()
        for i in batch:
            n = len(reqs[i].output_ids)
            e = min(n - pos[i], 1 + next(c) % 3)
            drafter.sampled(("req", i), i, pos[i], pos[i] + e)
            pos[i] += e
            if pos[i] >= n:
                drafter.stop(("req", i))
                running.remove(i)
            elif next(c) % 7 == 0:              # preempted: starts again later from pos[i]
                drafter.stop(("req", i))
                running.remove(i)
                waiting.append(i)
            else:
                d, a = drafter.draft(("req", i), i, pos[i])
                out.append((i, pos[i], list(d), list(a)))
    return out


pairs = st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=0, max_size=25),
                           st.lists(st.integers(0, 4), min_size=0, max_size=40)),
                 min_size=1, max_size=7)
param_st = st.builds(SuffixParams, max_tree_depth=st.sampled_from([2, 3, 5, 8, 24]),
                     max_cached_requests=st.sampled_from([0, 1, 2, 3, 10000]),
                     max_spec_factor=st.sampled_from([0.5, 1.0, 2.0]),
                     max_spec_offset=st.sampled_from([0.0, 1.0, -1.0]),
                     min_token_prob=st.sampled_from([0.0, 0.1, 0.4]))


@settings(max_examples=200, deadline=None)
@given(data=pairs, params=param_st, kmax=st.integers(1, 16),
       choices=st.lists(st.integers(0, 100), min_size=1, max_size=20))
def test_compiled_in_loop_drafts_equal_reference(data, params, kmax, choices):
    reqs = _reqs(data)
    ref = _drive(InLoopSuffix(reqs, kmax, params), reqs, choices)
    got = _drive(CompiledInLoopSuffix(reqs, kmax, params), reqs, choices)
    assert got == ref


def test_a_request_that_does_not_continue_its_output_is_refused():
    reqs = _reqs([([1, 2, 3], [4, 5, 6, 7])])
    d = CompiledInLoopSuffix(reqs, 4)
    d.sampled("a", 0, 0, 2)
    with pytest.raises(ValueError, match="do not continue"):
        d.sampled("a", 0, 3, 4)


def test_the_pure_drafter_switch_picks_the_reference(monkeypatch):
    reqs = _reqs([([1], [2, 3])])
    monkeypatch.setenv("SIMKIT_PURE_DRAFTER", "1")
    assert type(in_loop_suffix(reqs, 4)) is InLoopSuffix
    monkeypatch.delenv("SIMKIT_PURE_DRAFTER")
    assert type(in_loop_suffix(reqs, 4)) is CompiledInLoopSuffix
