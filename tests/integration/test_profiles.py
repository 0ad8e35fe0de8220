"""Shipped corpus profiles: complete, small, free of token ids, reproducible byte for byte, and the
same figures through `simkit acceptance` from raw traces and from the shipped files."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.profiles import corpus_profile as profiles, sampling
from simkit.errors import InputError, UnknownNameError
from simkit.history import parse_history
from simkit.paths import traces_src_dir
from traces.corpora import CORPORA, MIX, list_models

PAIRS = [(m, c) for m in list_models() for c in list(CORPORA) + [MIX]]
RESULT_KEYS = {"k", "steps", "mean_accepted", "tokens_per_step", "mean_draft", "zero_draft_frac",
               "accept_hist"}


def _need_raw():
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_every_model_and_corpus_is_shipped_and_consistent():
    for model, corpus in PAIRS:
        prof = profiles.load_profile(model, corpus, source="shipped")
        t = prof.table
        assert prof.origin == "shipped" and t.kmax == profiles.KMAX and t.drafter == "suffix"
        assert t.params["max_tree_depth"] == 24 and t.params["max_cached_requests"] == 10000
        assert np.array_equal(prof.prompt_len, t.prompt_len) and np.array_equal(prof.output_len, t.output_len)
        assert int(t.offsets[-1]) == int(t.output_len.sum()) == t.accepted.shape[0]
        assert (t.accepted <= t.drafted).all() and (t.drafted <= np.arange(1, 17)).all()
        prov = prof.provenance
        assert prov["tree"] == prov["history"] == prof.history.label
        assert prof.history.kind in ("warm", "cold") and t.params.get("tree", "cold") == prov["tree"]
        assert prov["command"].endswith(f"--tree {prov['tree']}")
        _check_sample(prof)
        assert prof.proxy_note == prov["proxy_note"] != ""
        for src in prov["sources"].values():
            assert src["files"] and all(re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) for f in src["files"])
        npz = profiles.shipped_dir() / model / f"{corpus}.npz"
        assert hashlib.sha256(npz.read_bytes()).hexdigest() == prov["npz_sha256"]
        ng = prof.tables["ngram"]
        assert prof.tables["suffix"] is t and ng.drafter == "ngram" and ng.params == prov["ngram_drafter"]
        assert np.array_equal(ng.output_len, t.output_len) and (ng.accepted <= ng.drafted).all()
        ngz = profiles.shipped_dir() / model / f"{corpus}.ngram.npz"
        assert hashlib.sha256(ngz.read_bytes()).hexdigest() == prov["ngram_npz_sha256"]


def _check_sample(prof) -> None:
    """The shipped sample is what its provenance says: the whole corpus unweighted, or a
    stratified sample whose weights sum to the corpus, with the capped stratum as recorded."""
    prov, t = prof.provenance, prof.table
    n, info, idx = prov["corpus_requests"], prov["sample"], prov["sample_indices"]
    assert len(idx) == t.num_requests and idx == sorted(set(idx)) and 0 <= idx[0] <= idx[-1] < n
    assert sampling.rule_is_current(info, sampling.SAMPLE_SIZE)
    assert prov["sample_rule"] == sampling.rule_text(info)
    if info["rule"] == "all":
        assert idx == list(range(n)) and prof.weights is None and "sample_weights" not in prov
        assert n <= sampling.SAMPLE_SIZE or info["corpus_positions"] <= info["position_budget"]
        return
    w = prof.weights
    assert info["rule"] == sampling.RULE and np.array_equal(w, prov["sample_weights"])
    assert (w > 0).all() and w.sum() == pytest.approx(n, rel=1e-6)
    assert t.num_requests >= sampling.SAMPLE_SIZE and t.num_requests < n
    assert t.num_requests == sampling.SAMPLE_SIZE or int(t.output_len.sum()) <= info["position_budget"]
    strata = info["strata"]
    assert strata["capped"]["corpus"] == prov["capped_corpus"]
    assert strata["capped"]["sample"] == len(prov["capped_sample"])
    assert strata["capped"]["sample"] + strata["uncapped"]["sample"] == t.num_requests
    if "capped_requests" in info["calibrated_on"]:
        assert w[prov["capped_sample"]].sum() == pytest.approx(prov["capped_corpus"], rel=1e-6)
    for name in ("requests", "output_tokens", "prompt_tokens"):
        assert name in info["calibrated_on"]
    assert w @ t.output_len == pytest.approx(prov["sample"]["corpus_positions"], rel=1e-6)


def _npz_dtypes(npz) -> dict[str, np.dtype]:
    """{array name: dtype} of an .npz, read from each member's .npy header alone (a member that
    is not an array: its name, dtype None): the dtype check needs no array data, and
    decompressing every shipped array took ~30 s."""
    out = {}
    with zipfile.ZipFile(npz) as zf:
        for member in zf.namelist():
            if not member.endswith(".npy"):
                out[member] = None
                continue
            with zf.open(member) as fh:
                version = np.lib.format.read_magic(fh)
                header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)
                out[member[:-len(".npy")]] = header(fh)[2]
    return out


def test_npz_dtypes_reads_what_numpy_loads(tmp_path):
    path = tmp_path / "t.npz"
    np.savez_compressed(path, a=np.arange(3, dtype=np.int32), b=np.zeros(2, dtype=np.uint8))
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("meta.json", "{}")
    with np.load(path) as z:
        loaded = {name: z[name].dtype for name in ("a", "b")}
    assert _npz_dtypes(path) == {**loaded, "meta.json": None}
    assert loaded == {"a": np.dtype(np.int32), "b": np.dtype(np.uint8)}


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_shipped_set_is_small_and_holds_no_token_ids():
    files = list(profiles.shipped_dir().glob("*/*"))
    # 24 MiB: the four full-thinking reasoning profiles (the R1 distills' KORGym and R1's
    # IntegralBench outputs, 8-10 k tokens each, so ~1 M positions per 128-request sample) take
    # 6.3 MB together; the other 106 profiles 13.1 MB, since the stratified rule ships up to
    # 160,000 output positions per corpus (simkit.profiles.sampling.POSITION_BUDGET; whole corpora that
    # fit it); the cold and hot history tables of the 11 mix profiles 3.0 MiB more. 21.6 MiB in
    # all (measured 2026-12-01; 10.4 MiB under the old 128-request rule, 18.6 MiB before the
    # history tables); with the suffix_gpu tables of vLLM 0.34 (six profiles, each draft's source
    # and match length beside a(t, K)) 22.4 MiB (2026-12-05)
    assert sum(f.stat().st_size for f in files) < 24 * 2**20
    for npz in profiles.shipped_dir().glob("*/*.npz"):
        dtypes = _npz_dtypes(npz)
        if npz.name.endswith(".prefix.npz"):         # prefix table: two int32 per request
            assert dtypes == {"ref": np.dtype(np.int32), "shared": np.dtype(np.int32)}
            continue
        base = ["prompt_len.npy", "output_len.npy", "offsets.npy", "accepted.npy", "drafted.npy",
                "meta.json"]
        with zipfile.ZipFile(npz) as zf:
            names = sorted(zf.namelist())
        if ".suffix_gpu" in npz.name:                # + each draft's source and match length
            assert names == sorted(base + ["source.npy", "match_len.npy"])
            assert dtypes["source"] == np.uint8 and dtypes["match_len"] == np.uint8
        else:
            assert names == sorted(base)
        assert dtypes["accepted"] == np.uint8 and dtypes["drafted"] == np.uint8
        assert dtypes["prompt_len"] == np.int32 and dtypes["offsets"] == np.int64


def test_unknown_shipped_profile_is_named():
    with pytest.raises(UnknownNameError, match="nope"):
        profiles.load_shipped("llama-3.1-8b", "nope")
    with pytest.raises(UnknownNameError):
        profiles.load_profile("llama-3.1-8b", "code", source="somewhere")


def test_sample_rule():
    assert sampling.sample_indices(5).tolist() == [0, 1, 2, 3, 4]
    idx = sampling.sample_indices(1000, 128)
    assert len(idx) == 128 and idx[0] == 0 and len(set(idx.tolist())) == 128 and idx[-1] == 992


def test_stratified_sample_is_reproduced_from_the_raw_traces():
    """The rule is deterministic: recomputed (whole-corpus stats cached or not) it gives the
    shipped indices and weights, and its weights reproduce the corpus's totals."""
    _need_raw()
    from traces.corpora import load_corpus

    corp = load_corpus("code", "llama-3.1-8b")
    shipped = profiles.load_shipped("llama-3.1-8b", "code").provenance
    first, _ = sampling.choose_sample(corp.requests, sampling.SAMPLE_SIZE)
    again, whole = sampling.choose_sample(corp.requests, sampling.SAMPLE_SIZE)
    assert whole is None                                  # the second came from the cache
    for s in (first, again):
        assert s.indices.tolist() == shipped["sample_indices"]
        assert s.weights.tolist() == shipped["sample_weights"] and s.info == shipped["sample"]
    out = np.array([len(r.output_ids) for r in corp.requests])
    assert first.weights @ out[first.indices] == pytest.approx(out.sum(), rel=1e-6)
    even, _ = sampling.choose_sample(corp.requests, 128, "even")
    assert even.weights is None and even.indices.tolist() == sampling.sample_indices(len(out)).tolist()


def test_source_files_are_the_ones_here():
    _need_raw()
    from traces.cache import file_digest

    prov = json.loads((profiles.shipped_dir() / "llama-3.1-8b" / "chat.json").read_text())
    for src in prov["sources"].values():
        for f in src["files"]:
            assert file_digest(traces_src_dir() / f["path"]) == f["sha256"]


@pytest.mark.parametrize("model,corpus", [("llama-3.1-8b", "code"), ("qwen2.5-7b", "summarization")])
def test_rebuild_reproduces_shipped_bytes(tmp_path, model, corpus):
    _need_raw()
    prof = profiles.profile_from_raw(model, corpus,
                                     history=profiles.shipped_history(model, corpus))
    npz, js = profiles.write_profile(prof, tmp_path)
    shipped = profiles.shipped_dir() / model
    assert npz.read_bytes() == (shipped / f"{corpus}.npz").read_bytes()
    assert js.read_bytes() == (shipped / f"{corpus}.json").read_bytes()
    assert (tmp_path / model / f"{corpus}.ngram.npz").read_bytes() == \
        (shipped / f"{corpus}.ngram.npz").read_bytes()
    auto = profiles.load_profile(model, corpus)   # shipped, verified against these raw files
    assert auto.origin.startswith("shipped (source files verified")
    assert np.array_equal(auto.table.accepted, prof.table.accepted)
    assert np.array_equal(auto.table.drafted, prof.table.drafted)


def test_auto_falls_back_to_raw_when_a_source_file_differs(monkeypatch, tmp_path):
    """A shipped profile whose recorded source digest no longer matches is not used by "auto"."""
    import shutil

    original = traces_src_dir()
    if original is None:
        pytest.skip("raw traces not available")
    shipped = profiles.load_shipped("llama-3.1-8b", "code")
    first = shipped.provenance["sources"]
    src_name = sorted(first)[0]
    rel = first[src_name]["files"][0]["path"]
    copy = tmp_path / "traces-src"
    shutil.copytree(original, copy)
    (copy / rel).chmod(0o644)
    with open(copy / rel, "ab") as fh:
        fh.write(b"\n")
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(copy))
    assert profiles._shipped_if_current("llama-3.1-8b", "code", None) is None
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(original))
    assert profiles._shipped_if_current("llama-3.1-8b", "code", None) is not None


def _cli_json(*args) -> dict:
    from simkit.cli import app

    res = CliRunner().invoke(app, ["acceptance", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_cli_json_from_shipped_profile_and_raw_traces_agree():
    args = ["--model", "llama-3.1-8b", "--corpus", "code", "--k", "4,6,8,12", "--format", "json"]
    shipped = _cli_json(*args, "--source", "shipped")
    assert shipped["origin"].startswith("shipped profile")
    assert [r["k"] for r in shipped["results"]] == [4, 6, 8, 12]
    for r in shipped["results"]:
        assert RESULT_KEYS <= set(r) and len(r["accept_hist"]) == r["k"] + 1
        assert 0 <= r["mean_accepted"] <= r["mean_draft"] <= r["k"]
        assert r["tokens_per_step"] > 1.0
    ngram = _cli_json(*args, "--source", "shipped", "--drafter", "ngram")
    assert ngram["drafter"] == "ngram" and ngram["results"] != shipped["results"]
    if traces_src_dir() is not None:
        raw = _cli_json(*args, "--source", "raw")
        assert raw["origin"].startswith("raw traces")
        assert raw["results"] == shipped["results"]
        assert _cli_json(*args, "--source", "raw", "--drafter", "ngram")["results"] == ngram["results"]


def test_shipped_history_is_kept_and_checked():
    """load_profile follows the shipped history; asking a shipped profile for another it holds
    no table of is an error."""
    have = profiles.shipped_history("llama-3.1-8b", "code")
    other = parse_history("cold" if have.kind == "warm" else "warm")
    prof = profiles.load_profile("llama-3.1-8b", "code", source="shipped", history=have)
    assert prof.provenance["tree"] == have.label and prof.history == have
    with pytest.raises(InputError, match="history"):
        profiles.load_profile("llama-3.1-8b", "code", source="shipped", history=other)


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_warm_and_cold_profiles_differ_where_the_tree_matters():
    """Same sample, lengths and local trees; the warm tree (whole corpus before each sampled request)
    gives more accepted tokens than the sample alone. Exactness of warm rows: tests/integration/test_replay.py."""
    _need_raw()
    warm = profiles.profile_from_raw("llama-3.1-8b", "code-edit", history=parse_history("warm"))
    cold = profiles.profile_from_raw("llama-3.1-8b", "code-edit", history=parse_history("cold"))
    assert (warm.provenance["tree"], cold.provenance["tree"]) == ("warm", "cold")
    assert warm.provenance["sample_indices"] == cold.provenance["sample_indices"]
    assert np.array_equal(warm.table.output_len, cold.table.output_len)
    assert int(warm.table.accepted[:, 7].sum()) > int(cold.table.accepted[:, 7].sum())


def test_cli_history_option_and_its_deprecated_tree_alias():
    from simkit.cli import app

    base = ["acceptance", "--model", "llama-3.1-8b", "--corpus", "code", "--source", "shipped"]
    for flag in ("--history", "--tree"):
        res = CliRunner().invoke(app, [*base, flag, "tepid"])
        assert isinstance(res.exception, InputError) and "field 'history'" in str(res.exception)
    res = CliRunner().invoke(app, [*base, "--tree", "warm", "--history", "warm"])
    assert isinstance(res.exception, InputError) and "--history only" in str(res.exception)
    doc = _cli_json("--model", "llama-3.1-8b", "--corpus", "code", "--k", "8", "--format", "json",
                    "--source", "shipped")
    assert doc["tree"] == doc["history"] == profiles.shipped_history("llama-3.1-8b", "code").label
    res = CliRunner().invoke(app, [*base, "--k", "8", "--format", "json", "--tree", "warm"])
    assert res.exit_code == 0
    assert res.stderr.count("\n") == 1 and "--tree is deprecated" in res.stderr
    assert json.loads(res.stdout)["results"] == doc["results"]


def test_cli_rejects_bad_options():
    from simkit.cli import app

    res = CliRunner().invoke(app, ["acceptance", "--model", "llama-3.1-8b", "--corpus", "code", "--k", "0"])
    assert isinstance(res.exception, InputError) and "field 'k'" in str(res.exception)
    res = CliRunner().invoke(app, ["acceptance", "--model", "llama-3.1-8b", "--corpus", "code",
                                   "--source", "shipped", "--max-requests", "0"])
    assert isinstance(res.exception, InputError)


def test_profiles_build_takes_history_and_its_deprecated_tree_alias(tmp_path):
    """profiles build names the request history --history like every command; --tree still works
    for one release (one warning line) and both at once is one error."""
    from simkit.cli import app

    base = ["profiles", "build", "--model", "llama-3.1-8b", "--corpus", "code", "--out", str(tmp_path)]
    for flag in ("--history", "--tree"):
        res = CliRunner().invoke(app, [*base, flag, "tepid"])
        assert isinstance(res.exception, InputError) and "tepid" in str(res.exception)
        assert not list(tmp_path.iterdir())                  # refused before any work
    res = CliRunner().invoke(app, [*base, "--tree", "cold", "--history", "cold"])
    assert isinstance(res.exception, InputError) and "--history only" in str(res.exception)
    res = CliRunner().invoke(app, [*base, "--tree", "tepid"])
    assert "--tree is deprecated" in res.stderr
