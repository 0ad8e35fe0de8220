"""A profile's table for vLLM 0.34's suffix drafter: built from the raw traces for the profile's
own sample under its history (warm = the sampled rows of a whole-corpus replay, cold = the sample
alone), shipped beside the profile when written, and never built for a history it cannot."""

from types import SimpleNamespace

import numpy as np
import pytest

from simkit.acceptance.build import build_table
from simkit.acceptance.table import take_requests
from simkit.history import COLD, WARM, parse_history
from simkit.profiles.corpus_profile import CorpusProfile
from simkit.profiles import version_tables as vt

DRAFTER = "suffix_gpu"


def _requests(n=9):
    rng = np.random.default_rng(3)
    base = rng.integers(0, 50, 40)
    out = []
    for i in range(n):           # shared phrases, so the corpus ring has something to give
        o = np.concatenate([base[i % 5: i % 5 + 12], rng.integers(0, 50, 6), base[:10]])
        out.append(SimpleNamespace(prompt_ids=np.arange(5 + i, dtype=np.int32) % 50,
                                   output_ids=o.astype(np.int32)))
    return out


def _profile(reqs, idx, history):
    chosen = [reqs[i] for i in idx]
    table = build_table(chosen, kmax=8)                    # arctic's, as a profile holds
    return CorpusProfile("m", "c", table.prompt_len, table.output_len, table,
                         {"sample_indices": idx}, tables={"suffix": table}, history=history)


@pytest.fixture
def raw(monkeypatch, tmp_path):
    reqs = _requests()
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SIMKIT_PURE_DRAFTER", "1")
    # load_corpus first: importing traces.corpora binds simkit.paths.traces_src_dir at module
    # level in traces.tokenizers, which must keep the real one after this test
    monkeypatch.setattr("traces.corpora.load_corpus",
                        lambda corpus, model, progress=False: SimpleNamespace(requests=reqs))
    monkeypatch.setattr("simkit.paths.traces_src_dir", lambda: tmp_path)
    return reqs


def test_warm_rows_are_the_samples_rows_of_a_whole_corpus_replay(raw):
    idx = [1, 4, 6]
    prof = vt.with_drafter_table(_profile(raw, idx, WARM), DRAFTER, 8)
    got = prof.tables[DRAFTER]
    whole = take_requests(build_table(raw[:7], drafter=DRAFTER, kmax=8), idx)
    assert np.array_equal(got.accepted, whole.accepted)
    assert np.array_equal(got.drafted, whole.drafted)
    assert got.drafted.any()                               # the test is not vacuous
    # a warm row differs from the sample replayed alone (the unsampled responses are in the ring)
    cold = vt.with_drafter_table(_profile(raw, idx, COLD), DRAFTER, 8).tables[DRAFTER]
    alone = build_table([raw[i] for i in idx], drafter=DRAFTER, kmax=8)
    assert np.array_equal(cold.accepted, alone.accepted)
    assert not np.array_equal(cold.drafted, got.drafted)


def test_a_hot_history_serves_the_sample_first_and_missing_traces_build_nothing(raw, monkeypatch):
    hot = vt.with_drafter_table(_profile(raw, [0, 2, 5], parse_history("hot")), DRAFTER, 8)
    cold = vt.with_drafter_table(_profile(raw, [0, 2, 5], COLD), DRAFTER, 8)
    # the server answered these requests before: its corpus holds their own responses
    assert hot.tables[DRAFTER].accepted.sum() > cold.tables[DRAFTER].accepted.sum()
    monkeypatch.setattr("simkit.paths.traces_src_dir", lambda: None)
    assert DRAFTER not in vt.with_drafter_table(_profile(raw, [0, 2], WARM), DRAFTER, 8).tables


def test_written_beside_the_profile_and_read_back(raw, tmp_path):
    prof = vt.with_drafter_table(_profile(raw, [0, 3], COLD), DRAFTER, 8)
    npz = tmp_path / "c.npz"
    digest = vt.write_table(npz, DRAFTER, prof.tables[DRAFTER])
    assert vt.table_path(npz, DRAFTER).name == "c.suffix_gpu.npz" and len(digest) == 64
    back = vt.load_shipped_table(npz, DRAFTER)
    assert np.array_equal(back.accepted, prof.tables[DRAFTER].accepted)
    assert vt.load_shipped_table(tmp_path / "none.npz", DRAFTER) is None

