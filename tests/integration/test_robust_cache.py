"""The cache defends itself: truncated, emptied or zeroed-at-the-same-size cache files are named,
removed and rebuilt (same content as before); an imported corpus whose source is gone names the
command that re-imports it; concurrent builders of one entry all get a valid, identical entry.

Requests here are small synthetic token sequences (no trace text); the user-corpus tests tokenize
with the real tokenizer files."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
import pytest

from simkit.acceptance.cache import cached_table, store_dir
from simkit.cachecheck import DamagedCache
from simkit.errors import InputError
from simkit.paths import traces_src_dir
from traces import cache
from traces.model import TraceRequest

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="../shared/traces-src (tokenizer files) not present")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))


def _requests(n: int = 6, seed: int = 3) -> list[TraceRequest]:
    rng = np.random.default_rng(seed)
    reqs = []
    for i in range(n):
        base = rng.integers(0, 50, size=40)
        reqs.append(TraceRequest(request_id=str(i), prompt_ids=rng.integers(0, 50, 20),
                                 output_ids=np.concatenate([base, base[:30]]).astype(np.int32),
                                 corpus="t", source="t", model="m", greedy=True, turn=1))
    return reqs


def _block(n: int = 5) -> cache.TokenizedBlock:
    rng = np.random.default_rng(1)
    p_tok, p_off = cache.pack([rng.integers(0, 1000, 7) for _ in range(n)])
    o_tok, o_off = cache.pack([rng.integers(0, 1000, 9) for _ in range(n)])
    return cache.TokenizedBlock([f"r{i}" for i in range(n)], p_tok, p_off, o_tok, o_off,
                                np.ones(n, bool), np.ones(n, np.int32), ["m"] * n, {"x": 1},
                                {"family": "llama3"})


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _zero_tail(p: Path) -> None:          # same size, data zeroed after the header
    size = p.stat().st_size
    with open(p, "r+b") as fh:
        fh.seek(160)
        fh.write(b"\0" * (size - 160))


DAMAGE = {"truncated": _truncate, "empty": _empty, "zeroed": _zero_tail}


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_block_is_detected_and_named(tmp_path, how):
    path = tmp_path / "b.npz"
    cache.save_block(path, _block())
    assert cache.load_block(path).request_ids == _block().request_ids
    DAMAGE[how](path)
    with pytest.raises(DamagedCache) as exc:
        cache.load_block(path)
    assert exc.value.path == path


def test_block_with_changed_numbers_fails_its_checksum(tmp_path):
    path = tmp_path / "b.npz"
    good = _block()
    cache.save_block(path, good)
    with np.load(path) as z:               # rewrite one token id, keep the stored checksum
        arrays = {k: z[k] for k in z.files}
    arrays["output_tokens"] = arrays["output_tokens"].copy()
    arrays["output_tokens"][3] += 1
    np.savez(path, **arrays)
    with pytest.raises(DamagedCache, match="does not match its checksum"):
        cache.load_block(path)


@pytest.mark.parametrize("how", ["zeroed", "truncated", "empty", "meta"])
def test_damaged_acceptance_table_is_rebuilt_identically(capsys, how):
    reqs = _requests()
    first = cached_table(reqs, kmax=4)
    (folder,) = [p for p in store_dir().iterdir() if p.is_dir()]
    victim = folder / ("meta.json" if how == "meta" else "accepted.npy")
    DAMAGE.get(how, _empty)(victim)
    again = cached_table(reqs, kmax=4)
    err = capsys.readouterr().err
    assert f"damaged cache entry {folder}" in err and "rebuilding" in err
    for name in ("accepted", "drafted", "offsets", "output_len", "prompt_len"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    third = cached_table(reqs, kmax=4)                  # the rebuilt entry is clean
    assert "damaged" not in capsys.readouterr().err
    assert np.array_equal(third.accepted, first.accepted)


def _build_in_child(args):
    cache_dir, n = args
    os.environ["SIMKIT_CACHE_DIR"] = cache_dir
    table = cached_table(_requests(), kmax=4)
    path = Path(cache_dir) / "blk.npz"
    cache.save_block(path, _block(n))
    return table.accepted.tobytes(), cache.load_block(path).request_ids


def test_concurrent_builders_get_one_valid_entry(tmp_path, monkeypatch):
    cache_dir = str(tmp_path / "shared-cache")
    with mp.get_context("spawn").Pool(4) as pool:
        results = pool.map(_build_in_child, [(cache_dir, 5)] * 8)
    assert len({r[0] for r in results}) == 1
    assert all(r[1] == [f"r{i}" for i in range(5)] for r in results)
    monkeypatch.setenv("SIMKIT_CACHE_DIR", cache_dir)    # it leaked into later tests
    folders = [p for p in store_dir().iterdir()]
    assert len(folders) == 1 and not any(".tmp" in p.name for p in folders)
    assert cached_table(_requests(), kmax=4).accepted.tobytes() == results[0][0]
    assert [p.name for p in Path(cache_dir).glob("*.tmp*")] == []


@needs_traces
def test_damaged_import_is_reimported_from_its_unchanged_source(tmp_path, capsys):
    from simkit.commands.traces_cmd import _import
    from traces.corpora import load_corpus
    from traces.user import user_corpus_path
    from user_traffic import write_openai_log

    log = tmp_path / "mine.jsonl"
    write_openai_log(log, ("mt_bench",), limit=30)
    _import(log, "openai", "mine", None, "llama-3.1-8b")
    before = load_corpus("mine", "llama-3.1-8b")
    _zero_tail(user_corpus_path("mine"))
    after = load_corpus("mine", "llama-3.1-8b")
    assert "re-importing it from" in capsys.readouterr().err
    assert [r.output_ids.tolist() for r in after.requests] == \
        [r.output_ids.tolist() for r in before.requests]
    log.unlink()                                         # source gone: name the command
    _truncate(user_corpus_path("mine"))
    with pytest.raises(InputError) as exc:
        load_corpus("mine", "llama-3.1-8b")
    msg = str(exc.value)
    assert str(user_corpus_path("mine")) in msg
    assert f"simkit traces import {log} --format openai --name mine --model llama-3.1-8b " \
           "--replace" in msg


def test_unwritable_cache_dir_is_one_line(tmp_path, monkeypatch):
    from simkit.paths import cache_dir

    afile = tmp_path / "not-a-folder"
    afile.write_text("x")
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(afile))
    with pytest.raises(InputError, match="SIMKIT_CACHE_DIR"):
        cache_dir()
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(afile / "sub"))
    with pytest.raises(InputError, match="cannot create"):
        cache_dir()


def test_stored_checksum_is_in_meta(tmp_path):
    cached_table(_requests(), kmax=4)
    (folder,) = list(store_dir().iterdir())
    meta = json.loads((folder / "meta.json").read_text())
    assert len(meta["content_sha256"]) == 64


@needs_traces
@pytest.mark.parametrize("how", ["truncated", "empty", "zeroed"])
def test_damaged_tokenized_source_is_rebuilt_from_the_raw_files(capsys, how):
    from traces.corpora import _source_block

    first = _source_block("mt_bench", "Llama-3.1-8B-Instruct", "llama3")
    (path,) = cache.tokenized_dir().glob("mt_bench-llama3-*.npz")
    DAMAGE[how](path)
    again = _source_block("mt_bench", "Llama-3.1-8B-Instruct", "llama3")
    err = capsys.readouterr().err
    assert f"damaged cache entry {path}" in err and "rebuilding it from its sources" in err
    assert np.array_equal(first.output_tokens, again.output_tokens)
    assert np.array_equal(first.prompt_tokens, again.prompt_tokens)
    assert cache.load_block(path).request_ids == first.request_ids      # clean again
