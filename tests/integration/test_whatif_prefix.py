"""`simkit whatif prefix`: the preamble workload (pure) and the what-if on a real profile."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.paths import traces_src_dir
from simkit.whatif.prefix import parse_levels, preamble_ids, with_preamble


def test_preamble_blocks_are_shared_and_lengths_grow():
    prompts = [np.arange(40), np.arange(100, 133)]
    w = Workload(np.array([40, 33], np.int32), np.array([5, 5], np.int32), {}, name="t")
    p = with_preamble(w, prompts, 500)
    chains = p.hash_chains()
    assert p.prompt_len.tolist() == [540, 533]
    assert [len(c) for c in chains] == [540 // 16, 533 // 16]
    assert chains[0][:31] == chains[1][:31]                   # 500 // 16 whole shared blocks
    assert chains[0][31] != chains[1][31]                     # block 31 holds each prompt's start
    assert p.shared_blocks() == [31, 31]
    assert np.array_equal(preamble_ids(8), preamble_ids(8))   # fixed, seeded
    assert w.block_hashes is None and w.prompt_len.tolist() == [40, 33]   # base untouched


def test_levels_are_checked():
    assert parse_levels("2000, 0,500,500") == [0, 500, 2000]
    for bad in ("", "a", "-1,5"):
        with pytest.raises(InputError):
            parse_levels(bad)


@pytest.mark.skipif(traces_src_dir() is None, reason="raw traces (SIMKIT_TRACES_SRC) not here")
def test_whatif_prefix_cli_json():
    from simkit.cli import app

    res = CliRunner().invoke(app, ["whatif", "prefix", "--model", "llama-3.1-8b", "--corpus",
                                   "chat", "--preamble", "0,1000", "--configs", "vanilla",
                                   "--workers", "1", "--num-requests", "64", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    r0, r1 = doc["rows"]
    assert (r0["preamble"], r1["preamble"]) == (0, 1000)
    assert r1["prefix_hit_rate"] > r0["prefix_hit_rate"]      # the preamble is shared
    assert r1["no_cache_tok_s"] < r0["no_cache_tok_s"]       # 1000 more prefill tokens each
    assert r1["cache_gain"] > r0["cache_gain"]
    assert r1["ttft_ms_p50"] < r1["no_cache_ttft_ms_p50"]
