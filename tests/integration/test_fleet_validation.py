"""The fleet against the recorded vLLM 0.33 fleet runs (calibrate/data/vllm-0.33, fleet-*):
each replica's stream rebuilt from the raw traces with simkit.fleet's own stream and router
functions, replayed through the suffix drafter in arrival order, the closed loop simulated.

Asserted: the rebuilt streams are exactly the runs' (request count, output tokens, emitted and
prefill tokens) and the policy ranking by accepted tokens per step is vLLM's. The issue's 2 %
accepted-per-step goal is not met (2 of 8 runs; docs/fleet.md "Validation": repeats that overlap
their earlier copy in flight): it is reported by `simkit validate` and `simkit fleet validate`,
and tested here only as a figure that is computed for every run, not as a goal reached."""

from __future__ import annotations

import pytest

from simkit.paths import traces_src_dir

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")


@pytest.fixture(scope="module")
def rows():
    from simkit.fleet.validate import validate_fleet

    return validate_fleet()


@needs_traces
def test_every_fleet_run_is_rebuilt_exactly(rows):
    assert len(rows) == 24                       # 2 policies x 4 replicas x (vanilla, suffix, kpad 12)
    for r in rows:
        assert r["requests_match_records"], r["run_id"]
        # the prefix cache of each replica filled from its own earlier prompts, as on the GPU
        assert r["predicted_prefill_tokens"] == r["measured_prefill_tokens"], r["run_id"]


@needs_traces
def test_policy_ranking_by_accepted_per_step_is_vllms(rows):
    from simkit.fleet.validate import summary

    s = summary(rows)
    assert s["ranking_agrees"]
    acc = s["accepted_by_policy"]
    assert acc["prefix-affinity"]["measured"] > 1.5 * acc["round-robin"]["measured"]


@needs_traces
def test_accepted_per_step_error_is_reported_for_every_speculative_run(rows):
    import math

    from simkit.fleet.validate import ACCEPT_GOAL, summary

    spec = [r for r in rows if r["accepted_error"] is not None]
    assert len(spec) == 16
    assert all(math.isfinite(r["accepted_error"]) for r in spec)
    assert summary(rows)["accepted_within_goal"] == sum(abs(r["accepted_error"]) <= ACCEPT_GOAL
                                                       for r in spec)
