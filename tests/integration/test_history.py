"""Request history (issue 12): parsing, the tables it decides (exact against a doubled replay),
and the commands that take it, on real traces."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simkit.errors import InputError
from simkit.history import History, parse_history, repeat_indices
from simkit.paths import traces_src_dir

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")


@pytest.mark.parametrize("text,label,kind,share,diverge", [
    ("cold", "cold", "cold", 0.0, None), ("warm", "warm", "warm", 0.0, None),
    ("hot", "hot", "repeat", 1.0, None), ("repeat:1", "hot", "repeat", 1.0, None),
    ("repeat:0.5", "repeat:0.5", "repeat", 0.5, None), ("repeat:0", "cold", "cold", 0.0, None),
    (" HOT , diverge:64", "hot,diverge:64", "repeat", 1.0, 64),
    ("repeat:0.25,diverge:0", "repeat:0.25,diverge:0", "repeat", 0.25, 0),
    ("hot,evicted,diverge:8", "hot,diverge:8,evicted", "repeat", 1.0, 8)])
def test_parse_history_canonical_labels(text, label, kind, share, diverge):
    h = parse_history(text)
    assert (h.label, h.kind, h.share, h.diverge) == (label, kind, share, diverge)
    assert parse_history(h.label) == h                     # the label round-trips


@pytest.mark.parametrize("bad", ["", "lukewarm", "repeat:1.5", "repeat:-0.1", "repeat:nan",
                                 "repeat:x", "cold,diverge:3", "hot,diverge:-1", "hot,fast:1",
                                 "warm,evicted"])
def test_parse_history_rejects_with_the_field_named(bad):
    with pytest.raises(InputError) as e:
        parse_history(bad)
    assert e.value.field == "history"


@given(st.integers(0, 500), st.floats(0, 1))
@settings(max_examples=60, deadline=None)
def test_repeat_indices_are_a_seeded_distinct_share(n, share):
    idx = repeat_indices(n, share)
    assert len(idx) == int(round(share * n)) and len(set(idx.tolist())) == len(idx)
    assert all(0 <= i < n for i in idx)
    assert np.array_equal(idx, repeat_indices(n, share))              # deterministic
    bigger = repeat_indices(n, min(1.0, share + 0.25))
    assert np.array_equal(bigger[:len(idx)], idx)                     # shares nest


@pytest.fixture(scope="module")
def chat_slice():
    from traces.corpora import load_corpus

    return list(load_corpus("chat", "llama-3.1-8b").requests[:24])


@needs_traces
def test_hot_table_equals_the_second_pass_of_a_doubled_sequential_replay(chat_slice):
    from simkit.acceptance.build import build_warm_table
    from simkit.acceptance.history_tables import cached_history_table

    n = len(chat_slice)
    hot = cached_history_table(chat_slice, parse_history("hot"), kmax=8, use_cache=False)
    doubled = build_warm_table(chat_slice + chat_slice, list(range(n, 2 * n)), kmax=8)
    assert np.array_equal(np.asarray(hot.accepted), np.asarray(doubled.accepted))
    assert np.array_equal(np.asarray(hot.drafted), np.asarray(doubled.drafted))


@needs_traces
def test_history_orders_acceptance_cold_below_repeat_below_hot(chat_slice):
    from simkit.acceptance.build import build_table
    from simkit.acceptance.history_tables import cached_history_table

    means = {}
    for h in ("cold", "repeat:0.5", "hot"):
        t = cached_history_table(chat_slice, parse_history(h), kmax=8, ordering="concurrent", concurrency=8,
                                 use_cache=False)
        means[h] = float(np.asarray(t.accepted)[:, 7].mean())
    assert means["cold"] < means["repeat:0.5"] < means["hot"]
    # a repeat whose earlier output diverged at token 0 left nothing in the tree: cold exactly
    cold = build_table(chat_slice, kmax=8, ordering="concurrent", concurrency=8)
    zero = cached_history_table(chat_slice, parse_history("hot,diverge:0"), kmax=8, ordering="concurrent",
                                concurrency=8, use_cache=False)
    assert np.array_equal(np.asarray(zero.accepted), np.asarray(cold.accepted))


@needs_traces
def test_eviction_at_max_cached_requests_limits_what_a_repeat_sees(chat_slice):
    from simkit.acceptance.history_tables import cached_history_table
    from simkit.drafters.suffix.cache import SuffixParams

    full = cached_history_table(chat_slice, parse_history("hot"), kmax=8, use_cache=False)
    tiny = cached_history_table(chat_slice, parse_history("hot"), kmax=8, use_cache=False,
                                params=SuffixParams(max_cached_requests=2))
    assert np.asarray(tiny.accepted).sum() < np.asarray(full.accepted).sum()


@needs_traces
@pytest.mark.slow
def test_predict_json_names_the_history_and_hot_favours_large_k():
    from simkit.cli import app

    out = {}
    for h in ("cold", "hot"):
        res = CliRunner().invoke(app, ["predict", "--model", "llama-3.1-8b", "--corpus", "mix",
                                       "--history", h, "--format", "json", "--seeds", "1",
                                       "--configs", "vanilla,kpad:4,12", "--workers", "1"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["history"] == h and doc["assumptions"]["history"]["value"]["history"] == h
        out[h] = {r["config"]: r["output_tok_s"] for r in doc["results"]}
    assert out["hot"]["kpad-12"] > out["hot"]["kpad-4"] > out["hot"]["vanilla"]
    assert out["cold"]["kpad-12"] < out["cold"]["kpad-4"]
    # vanilla drafts nothing: a repeat helps it only through the prefix cache (its prompts)
    assert out["hot"]["vanilla"] > out["cold"]["vanilla"]


def test_crossover_interpolates_and_says_none_when_it_never_pays():
    from simkit.whatif.history import crossover, parse_shares

    assert crossover([(0.0, 0.8), (0.5, 1.2)]) == pytest.approx(0.25)
    assert crossover([(0.0, 1.1), (1.0, 2.0)]) == 0.0
    assert crossover([(0.0, 0.5), (1.0, 0.9)]) is None
    assert parse_shares("1,0,0.5,0.5") == [0.0, 0.5, 1.0]
    for bad in ("", "2", "a", "-0.1", "nan"):
        with pytest.raises(InputError):
            parse_shares(bad)


def test_break_even_between_two_shares_is_not_given_a_share():
    """`whatif history --shares 0,1` printed 'from P = 0.08 (interpolated)' out of two points:
    between two shares only 'somewhere between' is measured; with more, the straight-line
    figure is named as such and the two measured shares around it are given."""
    from simkit.whatif.history import crossover_note

    two = crossover_note([(0.0, 0.9), (1.0, 2.2)], 1.0)
    assert "somewhere between P = 0 and 1, the only shares measured" in two
    assert "0.08" not in two and "interpolated" not in two
    three = crossover_note([(0.0, 0.9), (0.5, 1.1), (1.0, 2.2)], 1.0)
    assert ("between the measured shares P = 0 and 0.5: about 0.25 on a straight line between "
            "them (not measured there)") in three
    assert crossover_note([(0.0, 1.1), (1.0, 2.0)], 1.0).endswith("at P = 0 already")
    assert crossover_note([(0.0, 0.5), (1.0, 0.9)], 1.0).endswith("at no measured share (up to 1)")


@needs_traces
@pytest.mark.slow
def test_whatif_history_on_real_traces(tmp_path):
    from simkit.whatif.history import history, plot

    from simkit.app.options import RunOptions

    res = history(RunOptions("qwen2.5-7b", "code", seeds=1, num_requests=64, workers=1),
                  shares="0,1", configs="vanilla,kpad:4,8", warm=False)
    by = {(r["history"], r["config"]): r for r in res.rows}
    assert set(h for h, _ in by) == {"cold", "hot"}
    assert by[("hot", "kpad-8")]["mean_accepted"] > 3 * by[("cold", "kpad-8")]["mean_accepted"]
    assert by[("hot", "vanilla")]["output_tok_s"] > by[("cold", "vanilla")]["output_tok_s"]
    cross = res.extra["crossover_share"]
    assert cross is None or 0.0 <= cross <= 1.0
    plot(res, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 0


def test_history_describe_and_dict_are_consistent():
    h = parse_history("repeat:0.25,diverge:10")
    assert h.as_dict() == {"history": "repeat:0.25,diverge:10", "kind": "repeat",
                           "repeat_share": 0.25, "diverge_tokens": 10, "prompts_cached": True}
    assert "25%" in h.describe() and "10 tokens" in h.describe()
    assert History("warm").describe().startswith("warm")


@needs_traces
@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_compiled_prelude_equals_the_reference_engine(chat_slice):
    from simkit.acceptance.build import build_table
    from simkit.acceptance.history_tables import prelude_outputs
    from simkit.drafters.suffix.cache import SuffixParams

    for h in ("repeat:0.5", "hot,diverge:40"):
        for params in (SuffixParams(), SuffixParams(max_cached_requests=5)):
            pre = prelude_outputs(chat_slice, parse_history(h))
            for kw in ({}, {"ordering": "concurrent", "concurrency": 6}):
                ref = build_table(chat_slice, kmax=8, prelude=pre, params=params, engine="python",
                                  **kw)
                fast = build_table(chat_slice, kmax=8, prelude=pre, params=params,
                                   engine="compiled", **kw)
                assert np.array_equal(np.asarray(ref.accepted), np.asarray(fast.accepted)), h
                assert np.array_equal(np.asarray(ref.drafted), np.asarray(fast.drafted)), h


def test_history_list_keeps_diverge_with_its_history():
    from simkit.history import split_histories

    def labels(text):
        return [h.label for h in split_histories(text)]

    assert labels("cold,warm,hot") == ["cold", "warm", "hot"]
    assert labels("cold, hot,diverge:32 ,repeat:0.5") == ["cold", "hot,diverge:32", "repeat:0.5"]
    assert labels("cold,hot,evicted,hot") == ["cold", "hot,evicted", "hot"]
    assert split_histories(None) == [] and split_histories("") == []
    with pytest.raises(InputError):
        split_histories("cold,tepid")


@needs_traces
@pytest.mark.slow
def test_reference_one_column_set_per_history(tmp_path):
    from simkit.commands.whatif import _history_ref_plot
    from simkit.reference.reproduce import STUDY, reproduce_histories

    res = reproduce_histories([parse_history("cold"), parse_history("hot")],
                              STUDY.but(num_requests=64, workers=1), models=["llama-3.1-8b"])
    (row,) = res.rows
    assert row["ratio_pub"] == pytest.approx(3.79)           # the published row, carried as data
    assert row["ratio_hot"] > 2 * row["ratio_cold"]
    assert {"ratio_cold", "lever_cold", "best_k_cold", "ratio_hot", "best_k_hot"} <= set(res.columns)
    assert row["best_k_hot"] >= row["best_k_cold"]
    _history_ref_plot(res, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_evicted_prompts_leave_only_the_suffix_tree():
    from simkit.engine.prefix_cache import history_prefixes

    chains = [[1, 2], [3], [4, 5, 6]]
    assert history_prefixes(chains, parse_history("hot")) == chains
    assert history_prefixes(chains, parse_history("hot,evicted")) == []
    assert history_prefixes(chains, parse_history("warm")) == []
    assert history_prefixes(chains, parse_history("cold")) == []
    assert parse_history("hot,evicted").is_repeat and not parse_history("hot,evicted").prompts_cached
    assert "left the prefix cache" in parse_history("repeat:0.5,evicted").describe()
