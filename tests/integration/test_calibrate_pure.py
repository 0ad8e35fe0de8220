"""Pure parts of the calibration harness (no GPU): forcing index arithmetic, K-padding,
steady-state window, request files made from the real corpora."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.forcing import ForceApplier, ForcedOutputs, forced_rows
from calibrate.kpad import PLACEHOLDER, pad_drafts
from calibrate.records import Window, steady_window, window_throughput
from traces.calibration_requests import CalRequest, read_requests, select_requests, write_requests
from simkit.errors import InputError
from simkit.paths import traces_src_dir


def _reg(**reqs):
    f = ForcedOutputs()
    for rid, (plen, out) in reqs.items():
        f.register(rid, plen, np.array(out))
    return f


def test_prefill_then_decode_rows_pick_the_next_trace_token():
    f = _reg(a=(5, [10, 11, 12, 13]))
    # last prefill chunk: positions 0..4 scheduled, the row at position 4 predicts out[0]
    rows, toks = forced_rows(f, ["a"], np.array([4]), np.array([1]))
    assert rows.tolist() == [0] and toks.tolist() == [10]
    # decode: out[0] sits at position 5 (computed=5, 1 scheduled) and predicts out[1]
    rows, toks = forced_rows(f, ["a"], np.array([5]), np.array([1]))
    assert toks.tolist() == [11]


def test_spec_decode_rows_verify_each_draft_position():
    # t=1 output known, 2 drafts: positions 5,6,7 scheduled; rows predict out[1], out[2], out[3]
    f = _reg(a=(5, [10, 11, 12, 13]), b=(3, [7, 8]))
    rows, toks = forced_rows(f, ["b", "a"], np.array([3, 7]), np.array([1, 3]))
    assert rows.tolist() == [0, 1, 2, 3]
    assert toks.tolist() == [8, 11, 12, 13]


def test_rows_outside_the_trace_and_unknown_requests_are_left_alone():
    f = _reg(a=(300, [1, 2]))
    # partial prefill (positions 0..99 of a 300-token prompt): nothing to force
    assert forced_rows(f, ["a"], np.array([99]), np.array([1]))[0].size == 0
    # drafts running past max_tokens: only in-range rows forced
    # (positions 299..302 predict out[0..3]; only out[0], out[1] exist; "zz" is unknown)
    rows, toks = forced_rows(f, ["a", "zz"], np.array([302, 9]), np.array([4, 2]))
    assert rows.tolist() == [0, 1] and toks.tolist() == [1, 2]


def test_internal_request_ids_resolve_to_the_registered_id():
    f = _reg(r7=(2, [5, 6]))
    assert f.resolve("r7-1a2b3c4d") == "r7"
    assert f.resolve("nope-1a2b3c4d") is None
    with pytest.raises(ValueError):
        f.register("bad-id", 1, np.array([1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 30), st.integers(0, 35),
                          st.integers(0, 6)), min_size=1, max_size=8), st.integers(0, 2**31 - 1))
def test_forced_rows_match_position_arithmetic(reqs, seed):
    rng = np.random.default_rng(seed)
    f = ForcedOutputs()
    ids, last, nrows, expect = [], [], [], []
    row = 0
    for i, (plen, olen, t, d) in enumerate(reqs):
        out = rng.integers(0, 1000, olen)
        f.register(f"q{i}", plen, out)
        # the request knows t outputs (t=0: prompt's last chunk ends at plen-1)
        lp = plen - 1 + t + d
        ids.append(f"q{i}"), last.append(lp), nrows.append(d + 1)
        for k in range(d + 1):
            j = lp - d + k + 1 - plen
            if 0 <= j < olen:
                expect.append((row, int(out[j])))
            row += 1
    rows, toks = forced_rows(f, ids, np.array(last), np.array(nrows))
    assert list(zip(rows.tolist(), toks.tolist())) == expect


def test_force_applier_makes_greedy_pick_the_forced_tokens_and_reuses_its_slots():
    """The ring applier (CPU torch here; the same ops run on CUDA) changes exactly the forced
    (row, token) cells, in contiguous and strided logits, over more steps than it has slots."""
    torch = pytest.importorskip("torch")
    apply = ForceApplier(slots=2, capacity=4)
    gen = torch.Generator().manual_seed(0)
    for step in range(5):
        base = torch.randn(6, 50, generator=gen) * 1e-2
        logits = base.clone() if step % 2 else base.t().clone().t()  # strided every other step
        rows = np.array([0, 2, 3, 5, 1][: step + 1], np.int64)
        toks = np.array([7, 0, 49, 13, 21][: step + 1], np.int64)
        apply(logits, rows, toks)
        assert logits.argmax(-1)[torch.from_numpy(rows)].tolist() == toks.tolist()
        changed = (logits != base).nonzero().tolist()
        assert sorted(changed) == sorted(map(list, zip(rows.tolist(), toks.tolist())))
    assert apply.capacity >= 5  # grew for the 5-row step


def test_pad_drafts_pads_to_k_with_placeholder_and_never_grows_past_k():
    assert pad_drafts([[1, 2], [], [3, 4, 5, 6]], 3) == [[1, 2, PLACEHOLDER],
                                                          [PLACEHOLDER] * 3, [3, 4, 5]]
    with pytest.raises(ValueError):
        pad_drafts([[1]], 0)


def test_steady_window_spans_first_completion_to_last_admission():
    w = steady_window([5.0, 2.0, 9.0], last_admission=7.0, run_end=10.0)
    assert (w.t0, w.t1, w.steady) == (2.0, 7.0, True)
    tokens, rate = window_throughput(np.array([1.0, 3.0, 7.0, 8.0]), np.array([10, 20, 30, 40]), w)
    assert tokens == 50 and rate == pytest.approx(50 / 5.0)
    # no admission after the first completion: whole run, flagged
    w2 = steady_window([5.0, 6.0], last_admission=None, run_end=6.5)
    assert not w2.steady and (w2.t0, w2.t1) == (0.0, 6.5)
    assert window_throughput(np.array([1.0, 6.5]), np.array([3, 4]), w2)[0] == 7
    assert isinstance(w2, Window)


def test_request_file_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"id": "a", "prompt_ids": [1], "output_ids": [2]}) + "\n"
                 + json.dumps({"id": "b", "prompt_ids": [1, -3], "output_ids": [2]}) + "\n")
    with pytest.raises(InputError, match=r"r.jsonl, line 2, field 'prompt_ids'"):
        read_requests(p)
    p.write_text(json.dumps({"id": "a-1", "prompt_ids": [1], "output_ids": [2]}) + "\n")
    with pytest.raises(InputError, match=r"line 1, field 'id'"):
        read_requests(p)
    p.write_text("{not json\n")
    with pytest.raises(InputError, match=r"line 1"):
        read_requests(p)


def test_select_requests_counts_what_it_skips():
    reqs = [CalRequest("a", np.arange(10, dtype=np.int32), np.arange(50, dtype=np.int32)),
            CalRequest("b", np.arange(90, dtype=np.int32), np.arange(5, dtype=np.int32)),
            CalRequest("c", np.arange(5, dtype=np.int32), np.arange(8, dtype=np.int32))]
    kept, skipped = select_requests(reqs, 5, max_model_len=99, k_max=4, max_tokens_cap=20)
    assert [r.id for r in kept] == ["a", "c"] and len(kept[0].output_ids) == 20
    assert skipped == {"too_long_for_max_model_len": 1}


def test_select_requests_reads_no_further_than_the_last_kept():
    """simkit validate hands it a generator over the whole corpus pool (validation.requests):
    each request is made only as far as the selection reads."""
    made = []

    def pool():
        for i in range(1000):
            made.append(i)
            yield CalRequest(f"r{i}", np.arange(10 + 90 * (i % 3 == 1), dtype=np.int32),
                             np.arange(5, dtype=np.int32))

    kept, skipped = select_requests(pool(), 4, max_model_len=99, k_max=4, max_tokens_cap=0)
    assert [r.id for r in kept] == ["r0", "r2", "r3", "r5"]
    assert skipped == {"too_long_for_max_model_len": 2} and made == list(range(7))   # one past


@pytest.mark.skipif(traces_src_dir() is None, reason="needs ../shared/traces-src")
def test_request_files_from_the_real_corpus_round_trip(tmp_path):
    from calibrate.make_requests import make
    from traces.corpora import load_corpus

    meta = make("llama-3.1-8b", "code", tmp_path, n=40, seed=3)
    reqs = read_requests(tmp_path / "llama-3.1-8b__code.jsonl")
    assert meta["count"] == len(reqs) == 40
    assert meta["producers"] == {"Llama-3.1-8B-Instruct": 40}
    corpus = {(tuple(r.prompt_ids), tuple(r.output_ids)) for r in load_corpus("code", "llama-3.1-8b").requests}
    assert all((tuple(r.prompt_ids), tuple(r.output_ids)) in corpus for r in reqs)
    # deterministic: same seed, same bytes
    make("llama-3.1-8b", "code", tmp_path / "again", n=40, seed=3)
    assert ((tmp_path / "again" / "llama-3.1-8b__code.jsonl").read_bytes()
            == (tmp_path / "llama-3.1-8b__code.jsonl").read_bytes())
    write_requests(tmp_path / "w.jsonl", reqs)
    assert [r.id for r in read_requests(tmp_path / "w.jsonl")] == [r.id for r in reqs]
