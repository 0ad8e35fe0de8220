"""Shipped vLLM 0.34 (suffix_gpu) tables beside the profiles: consistent with their profile and
provenance, rebuilt byte for byte from the raw traces, and what a 0.34 prediction reads; a
profile without one is one error line under --source shipped (which never builds one)."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from cli_helpers import one_line_error, run
from simkit.paths import traces_src_dir
from simkit.profiles import corpus_profile as profiles
from simkit.profiles import version_tables as vt

DRAFTER = "suffix_gpu"
SHIPPED = sorted(profiles.shipped_dir().glob(f"*/*.{DRAFTER}.npz"))


def test_shipped_tables_match_their_profile_and_provenance():
    assert SHIPPED                                    # llama-3.1-8b and qwen2.5 chat, mix at least
    for path in SHIPPED:
        model, corpus = path.parent.name, path.name.split(".")[0]
        prof = profiles.load_profile(model, corpus, source="shipped")
        t = prof.tables[DRAFTER]
        prov = json.loads((path.parent / f"{corpus}.json").read_text())
        assert hashlib.sha256(path.read_bytes()).hexdigest() == prov[f"{DRAFTER}_npz_sha256"]
        assert t.drafter == DRAFTER and t.kmax == profiles.KMAX
        assert np.array_equal(t.output_len, prof.output_len)
        assert np.array_equal(t.prompt_len, prof.prompt_len)
        k = np.arange(1, t.kmax + 1)
        assert (t.drafted <= k).all() and (t.accepted <= k).all()
        assert t.params.get("tree", "cold") == prof.history.label


def test_a_shipped_table_is_rebuilt_byte_for_byte_from_the_raw_traces(tmp_path, monkeypatch):
    if traces_src_dir() is None:
        pytest.skip("raw traces not present")
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    prof = profiles.load_profile("llama-3.1-8b", "chat", source="shipped")
    del prof.tables[DRAFTER]
    rebuilt = vt.with_drafter_table(prof, DRAFTER, profiles.KMAX).tables[DRAFTER]
    vt.write_table(tmp_path / "chat.npz", DRAFTER, rebuilt)
    shipped = profiles.shipped_dir() / "llama-3.1-8b" / f"chat.{DRAFTER}.npz"
    assert vt.table_path(tmp_path / "chat.npz", DRAFTER).read_bytes() == shipped.read_bytes()


def test_034_prediction_names_the_version_and_its_calibration(capsys):
    code, out, err = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "chat",
                         "--vllm-version", "0.34", "--source", "shipped", "--configs",
                         "vanilla,suffix,kpad:4", "--seeds", "1", "--num-requests", "64")
    assert code == 0, err
    assert "vLLM 0.34" in out.splitlines()[0] and "calibrated h200-vllm034" in out
    rows = [line.split()[0] for line in out.splitlines() if line[:7] in ("vanilla", "suffix ",
                                                                          "suffix-")]
    assert rows == ["vanilla", "suffix", "suffix-4"]          # kpad:4 is suffix-4 on 0.34
    code, out, err = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "code",
                         "--vllm-version", "0.34", "--source", "shipped", "--configs", "suffix",
                         "--seeds", "1", "--num-requests", "64")
    assert code == 2
    one_line_error(err, "no vLLM 0.34.0 acceptance table for 'suffix' yet", "suffix_gpu")


def test_another_history_reads_its_own_shipped_table_or_none():
    from simkit.history import parse_history

    prof = profiles.load_profile("llama-3.1-8b", "mix", source="shipped")
    warm = prof.tables[DRAFTER]                           # shipped beside the warm profile
    npz = profiles.shipped_dir() / "llama-3.1-8b" / "mix.npz"
    entries = prof.provenance[vt.history_key(DRAFTER)]
    assert sorted(entries) == ["cold", "hot"]
    for label, entry in entries.items():
        path = npz.with_name(entry["file"])
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    hot = profiles.with_history(prof, parse_history("hot"))
    assert hot.tables[DRAFTER] is not warm
    assert np.array_equal(hot.tables[DRAFTER].output_len, warm.output_len)
    # the server answered these requests before: its corpus holds their own responses
    assert hot.tables[DRAFTER].accepted.sum() > warm.accepted.sum()
    # a history shipped for arctic's table only would drop suffix_gpu's (never the warm one)
    fake = dict(prof.provenance, **{vt.history_key(DRAFTER): {}})
    cold = profiles.with_history(replace(prof, provenance=fake), parse_history("cold"))
    assert DRAFTER not in cold.tables
