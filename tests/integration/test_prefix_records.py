"""Prefix caching against the committed H200 records: the engine's scheduled prefill tokens per
run vs the recorder's `num_prefill_tokens` (done-when: within 2 %), on cold, hot and repeat:P runs."""

from __future__ import annotations

import numpy as np
import pytest

from simkit.paths import traces_src_dir

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (SIMKIT_TRACES_SRC) not here")

RUNS = ["qwen2.5-7b_vanilla-s3_code_c32_n128", "qwen2.5-7b_vanilla-s3_code_c32_n128_hot",
        "llama-3.1-8b_kpad4-s3_math_c32_n128_rep0.5", "llama-3.1-8b_kpad8-s3_chat_c32_n128"]


@needs_traces
def test_predicted_prefill_tokens_match_the_records():
    from simkit.validation.prefix import check_runs

    rows = check_runs(RUNS)
    assert [r["run_id"] for r in sorted(rows, key=lambda r: RUNS.index(r["run_id"]))] == RUNS
    for r in rows:
        assert abs(r["error"]) <= 0.02, r
        assert r["recorded_prefill"] < r["prompt_tokens"]          # the records did hit
    hot = next(r for r in rows if r["run_id"].endswith("_hot"))
    assert hot["predicted_hit_rate"] > 0.9


@needs_traces
def test_without_caching_the_prefill_is_far_off():
    """The comparison can fail: with caching off every prompt token is prefilled."""
    from simkit.validation.prefix import check_runs

    rows = check_runs(RUNS[1:3], prefix_caching=False)
    for r in rows:
        assert r["predicted_prefill"] == r["prompt_tokens"] and r["error"] > 0.3


@needs_traces
def test_profile_hashes_cover_whole_prompt_blocks():
    from simkit.profiles.corpus_profile import load_profile

    prof = load_profile("qwen2.5-7b", "code")
    flat, offs = prof.block_hashes
    assert np.array_equal(np.diff(offs), np.asarray(prof.prompt_len) // 16)
    assert flat.dtype == np.uint64
