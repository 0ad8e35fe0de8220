"""`simkit acceptance --drafter suffix_gpu` (vLLM 0.34's drafter): from raw traces, the table of
the profiles' own sample under the asked history; the shipped profiles carry no such table."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.errors import InputError
from simkit.paths import traces_src_dir

BASE = ["acceptance", "--model", "llama-3.1-8b", "--corpus", "code", "--k", "1,8,16",
        "--format", "json", "--drafter", "suffix_gpu"]


def _invoke(*args):
    from simkit.cli import app

    return CliRunner().invoke(app, [*BASE, *args])


def test_shipped_profile_has_no_suffix_gpu_table():
    res = _invoke("--source", "shipped")
    assert isinstance(res.exception, InputError) and "no suffix_gpu table" in str(res.exception)


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_raw_traces_give_the_profile_samples_table():
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    from simkit.acceptance.build import build_table
    from simkit.acceptance.stats import summarize
    from simkit.history import parse_history
    from simkit.profiles import corpus_profile as profiles
    from traces.corpora import load_corpus

    res = _invoke("--source", "raw", "--history", "cold")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["drafter"] == "suffix_gpu" and doc["weighted"] and doc["history"] == "cold"
    assert doc["params"]["corpus_tokens"] == 1 << 20 and doc["params"]["max_depth"] == 24
    prof = profiles.profile_from_raw("llama-3.1-8b", "code", history=parse_history("cold"))
    corpus = load_corpus("code", "llama-3.1-8b").requests      # once: not once per sampled index
    reqs = [corpus[i] for i in prof.provenance["sample_indices"]]
    direct = build_table(reqs, drafter="suffix_gpu", kmax=16)
    for r, k in zip(doc["results"], (1, 8, 16)):
        want = json.loads(json.dumps(summarize(direct, k, weights=prof.weights)))
        assert r == want
    hot = json.loads(_invoke("--source", "raw", "--history", "hot").stdout)
    assert hot["results"][1]["mean_accepted"] > 2 * doc["results"][1]["mean_accepted"]
    assert np.isfinite(hot["results"][2]["tokens_per_step"])
