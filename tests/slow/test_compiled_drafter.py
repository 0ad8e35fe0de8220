"""The compiled suffix replay (numba) against the pure-Python reference: byte-identical tables.

Random sequences (hypothesis) and real corpus slices, sequential and concurrent orderings and warm
tables, small max_cached_requests so that FIFO eviction (of finished and of in-flight responses)
happens. Forest capacities are shrunk so that every growth path of the compiled arrays runs.
The reference itself is checked against arctic-inference in tests/slow/test_arctic_parity.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.acceptance.build import build_table, build_warm_table
from simkit.drafters.suffix.replay import resolve_engine
from simkit.drafters.suffix import compiled as suffix_compiled
from simkit.drafters.suffix.cache import SuffixParams
from simkit.paths import traces_src_dir


@pytest.fixture(autouse=True)
def _tiny_forest(monkeypatch):
    monkeypatch.setattr(suffix_compiled, "FOREST_SIZES", (2, 4, 2))
    monkeypatch.setattr(suffix_compiled, "CHUNK_TOKENS", 7)     # several kernel calls per build


def _reqs(pairs):
    return [SimpleNamespace(prompt_ids=np.array(p, np.int32), output_ids=np.array(o, np.int32))
            for p, o in pairs]


def _same(a, b) -> None:
    assert a.accepted.dtype == b.accepted.dtype == np.uint8
    assert a.accepted.tobytes() == b.accepted.tobytes()
    assert a.drafted.tobytes() == b.drafted.tobytes()
    assert a.offsets.tobytes() == b.offsets.tobytes() and a.params == b.params


pairs = st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=0, max_size=30),
                           st.lists(st.integers(0, 4), min_size=0, max_size=45)),
                 min_size=1, max_size=7)
param_st = st.builds(SuffixParams, max_tree_depth=st.sampled_from([2, 3, 5, 8, 24]),
                     max_cached_requests=st.sampled_from([0, 1, 2, 3, 10000]),
                     max_spec_factor=st.sampled_from([0.5, 1.0, 2.0]),
                     max_spec_offset=st.sampled_from([0.0, 1.0, -1.0]),
                     min_token_prob=st.sampled_from([0.0, 0.1, 0.4]))


@settings(max_examples=150, deadline=None)
@given(data=pairs, params=param_st, kmax=st.integers(1, 16))
def test_sequential_tables_equal_reference(data, params, kmax):
    reqs = _reqs(data)
    py = build_table(reqs, params=params, kmax=kmax, engine="python")
    _same(build_table(reqs, params=params, kmax=kmax, engine="compiled"), py)


@settings(max_examples=150, deadline=None)
@given(data=pairs, params=param_st, kmax=st.integers(1, 16), conc=st.integers(1, 5))
def test_concurrent_tables_equal_reference(data, params, kmax, conc):
    reqs = _reqs(data)
    kw = dict(params=params, kmax=kmax, ordering="concurrent", concurrency=conc)
    _same(build_table(reqs, engine="compiled", **kw), build_table(reqs, engine="python", **kw))


@settings(max_examples=150, deadline=None)
@given(data=pairs, params=param_st, kmax=st.integers(1, 16), conc=st.integers(1, 5),
       prelude=st.lists(st.lists(st.integers(0, 4), min_size=0, max_size=30), max_size=5))
def test_concurrent_tables_after_a_prelude_equal_reference(data, params, kmax, conc, prelude):
    """A request history (responses served before) under the concurrent ordering: the compiled
    replay inserts them first as the reference does, FIFO eviction of prelude responses included."""
    reqs = _reqs(data)
    pre = [np.array(o, np.int32) for o in prelude]
    kw = dict(params=params, kmax=kmax, ordering="concurrent", concurrency=conc, prelude=pre)
    seen: list[int] = []
    _same(build_table(reqs, engine="compiled", progress=seen.append, **kw),
          build_table(reqs, engine="python", **kw))
    assert sum(seen) == sum(len(r.output_ids) for r in reqs)


@settings(max_examples=100, deadline=None)
@given(data=pairs, params=param_st, picks=st.lists(st.booleans(), min_size=7, max_size=7))
def test_warm_tables_equal_reference(data, params, picks):
    reqs = _reqs(data)
    sample = [i for i in range(len(reqs)) if picks[i]] or [0]
    seen: list[int] = []
    kw = dict(params=params, kmax=8)
    comp = build_warm_table(reqs, sample, engine="compiled", progress=seen.append, **kw)
    _same(comp, build_warm_table(reqs, sample, engine="python", **kw))
    assert sum(seen) == sum(len(r.output_ids) for r in reqs[:sample[-1] + 1])


def test_engine_switch(monkeypatch):
    monkeypatch.delenv("SIMKIT_PURE_DRAFTER", raising=False)
    assert resolve_engine() == "compiled"
    monkeypatch.setenv("SIMKIT_PURE_DRAFTER", "1")
    assert resolve_engine() == "python"
    assert resolve_engine("compiled") == "compiled"
    with pytest.raises(ValueError, match="engine"):
        resolve_engine("fast")


def test_bad_token_names_request_and_field():
    reqs = _reqs([([1, 2], [1, 2, 3]), ([1, 2], [1, 2, 3])])
    reqs[1].prompt_ids = np.array([1, -4], np.int64)
    with pytest.raises(ValueError, match=r"request 1: prompt_ids: token id -4 outside"):
        build_table(reqs, kmax=4, engine="compiled")
    reqs[1].prompt_ids = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match=r"request 1: prompt_ids must be a 1-D array of int"):
        build_table(reqs, kmax=4, engine="compiled")


def _real(corpus: str, n: int):
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    from traces.corpora import load_corpus
    return load_corpus(corpus, "llama-3.1-8b").requests[:n]


@pytest.mark.parametrize("corpus,n,cache", [("chat", 40, 6), ("code-edit", 30, 10000)])
def test_real_slice_sequential_and_warm(corpus, n, cache, monkeypatch):
    monkeypatch.setattr(suffix_compiled, "FOREST_SIZES", (1 << 10, 1 << 10, 1 << 10))
    monkeypatch.setattr(suffix_compiled, "CHUNK_TOKENS", 5000)
    reqs = _real(corpus, n)
    params = SuffixParams(max_cached_requests=cache)
    comp = build_table(reqs, params=params, engine="compiled")
    _same(comp, build_table(reqs, params=params, engine="python"))
    assert int(comp.accepted[:, 7].sum()) > 0
    sample = list(range(1, n, 5))
    _same(build_warm_table(reqs, sample, params=params, engine="compiled"),
          build_warm_table(reqs, sample, params=params, engine="python"))


def test_real_slice_concurrent_with_in_flight_eviction(monkeypatch):
    monkeypatch.setattr(suffix_compiled, "FOREST_SIZES", (1 << 10, 1 << 10, 1 << 10))
    reqs = [SimpleNamespace(prompt_ids=r.prompt_ids, output_ids=r.output_ids[:300])
            for r in _real("translation", 24)]
    kw = dict(params=SuffixParams(max_cached_requests=3, max_tree_depth=16), ordering="concurrent",
              concurrency=6)
    _same(build_table(reqs, engine="compiled", **kw), build_table(reqs, engine="python", **kw))


def test_sibling_tie_rule_decides_the_compiled_draft():
    # Children of "7" in the prompt: 1 and 2 reach count 2; 2 got there first (goes last among the
    # 2s, i.e. head), then 1 rises while FIRST among the 1s, so it becomes first among the 2s: the
    # head is 1. At t = 2 the context ends "9 7" and only "7" matches: K=1 drafts [1] (prob 2/6).
    reqs = _reqs([([7, 1, 7, 2, 7, 2, 7, 1, 7], [9, 7, 1, 4])])
    params = SuffixParams(max_cached_requests=0)
    comp = build_table(reqs, params=params, kmax=2, engine="compiled")
    _same(comp, build_table(reqs, params=params, kmax=2, engine="python"))
    row = comp.row(0, 2)
    assert (int(comp.drafted[row, 0]), int(comp.accepted[row, 0])) == (1, 1)


@pytest.mark.parametrize("ordering", ["sequential", "concurrent", "in-loop"])
def test_missing_numba_names_the_way_out(monkeypatch, ordering):
    """Whichever replay comes first in a process without numba (the kernels not yet imported
    by an earlier test) says how to go on, not "No module named 'numba'"."""
    import builtins
    import sys

    real_import = builtins.__import__

    def no_numba(name, *args, **kwargs):
        if name == "numba" or name.startswith("numba."):
            raise ImportError("No module named 'numba'")
        return real_import(name, *args, **kwargs)

    for name in [m for m in sys.modules if m.startswith("simkit.drafters.suffix.kernels")
                 or m == "simkit.drafters.suffix.core" or m.startswith("numba")]:
        monkeypatch.delitem(sys.modules, name)       # as in a process that never imported them
    monkeypatch.setattr(builtins, "__import__", no_numba)
    reqs = _reqs([([1, 2], [1, 2, 3])])
    with pytest.raises(ImportError, match="SIMKIT_PURE_DRAFTER=1"):
        if ordering == "in-loop":
            from simkit.drafters.suffix.in_loop import in_loop_suffix

            in_loop_suffix(reqs, 4)
        else:
            build_table(reqs, kmax=4, engine="compiled", ordering=ordering)
