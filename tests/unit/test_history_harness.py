"""Pure parts of the GPU harness for request history and dynamic-K (no vLLM needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate.dynk import TablePolicy, choose_and_pad, make_policy, step_pairs
from calibrate.kpad import PLACEHOLDER
from calibrate.passes import plan_passes
from traces.calibration_requests import CalRequest
from calibrate.runner import RunSpec, dynk_policy, repeat_tag, repeated, unique_id
from simkit.errors import InputError
from simkit.history import repeat_indices


def _reqs(n: int) -> list[CalRequest]:
    return [CalRequest(f"r{i}", np.arange(3, dtype=np.int32) + i, np.arange(5, dtype=np.int32))
            for i in range(n)]


def test_cold_is_one_recorded_pass_of_the_list():
    reqs = _reqs(4)
    (p,) = plan_passes(reqs, "cold")
    assert p.record and p.suffix == "" and [r.id for r in p.requests] == ["r0", "r1", "r2", "r3"]


def test_hot_serves_the_list_twice_with_fresh_ids():
    reqs = _reqs(3)
    first, second = plan_passes(reqs, "hot")
    assert first.record and second.record
    assert (first.suffix, second.suffix) == ("", "hot")
    assert [r.id for r in second.requests] == ["hr0", "hr1", "hr2"]
    assert all(np.array_equal(a.output_ids, b.output_ids)
               for a, b in zip(first.requests, second.requests))


def test_repeat_prelude_is_the_seeded_share_unrecorded():
    reqs = _reqs(8)
    pre, run = plan_passes(reqs, "repeat:0.25")
    assert not pre.record and run.record and run.suffix == "rep0.25"
    idx = repeat_indices(8, 0.25)
    assert len(idx) == 2
    assert [r.id for r in pre.requests] == [f"pr{i}" for i in idx]
    assert [r.id for r in run.requests] == [r.id for r in reqs]


@pytest.mark.parametrize("bad", ["warm", "hot,diverge:10", "repeat:2"])
def test_histories_the_gpu_cannot_serve_are_refused(bad):
    with pytest.raises((ValueError, InputError)):
        plan_passes(_reqs(2), bad)


def test_run_spec_keeps_history_with_colons():
    s = RunSpec.parse("math:32:128:validation:repeat:0.5")
    assert (s.corpus, s.concurrency, s.num_requests, s.purpose, s.history) == \
        ("math", 32, 128, "validation", "repeat:0.5")
    assert RunSpec.parse("chat:8:24").history == "cold"
    with pytest.raises(InputError):
        RunSpec.parse("math:32:128:validation:lukewarm")


def test_run_spec_reads_cap_and_repeats_after_any_history():
    s = RunSpec.parse("math:32:256:validation:repeat:0.25:cap=4096*3")
    assert (s.history, s.cap, s.repeats) == ("repeat:0.25", 4096, 3)
    plain = RunSpec.parse("chat:32:64")
    assert (plain.cap, plain.repeats) == (None, 1)
    for bad in ("chat:32:64*0", "chat:32:64*x", "chat:32:64:cap=0", "chat:32:64:cap=big"):
        with pytest.raises(InputError):
            RunSpec.parse(bad)


def test_repeats_interleave_rounds_and_get_their_own_ids():
    a, b = RunSpec.parse("chat:32:64*3"), RunSpec.parse("math:32:256")
    order = [(r, s.corpus) for r, s in repeated([a, b])]
    assert order == [(1, "chat"), (1, "math"), (2, "chat"), (3, "chat")]
    assert [repeat_tag("", r) for r in (1, 2, 3)] == ["", "rep2", "rep3"]
    assert repeat_tag("s4", 2) == "s4-rep2"


def test_a_second_run_of_one_id_on_an_engine_is_renamed_not_overwritten():
    used: set[str] = set()
    ids = [unique_id("m_kpad8_chat_c32_n64", used) for _ in range(3)]
    assert ids == ["m_kpad8_chat_c32_n64", "m_kpad8_chat_c32_n64-again2",
                   "m_kpad8_chat_c32_n64-again3"]


def test_step_pairs_counts_real_drafts_and_accepted():
    spec = {"a": [5, 6, PLACEHOLDER, PLACEHOLDER], "b": [PLACEHOLDER] * 4, "c": [1, 2, 3, 4]}
    sampled = {"a": [5, 6, 9], "b": [7], "c": [1, 8]}
    pairs, k = step_pairs(spec, sampled)
    assert k == 4
    assert pairs == [(2, 2), (0, 0), (1, 4)]


def test_choose_and_pad_cuts_and_pads_to_the_chosen_k():
    pol = TablePolicy([[8, 12], [64, 4]])
    k, padded = choose_and_pad(pol, [[1] * 12, [2, 3], []], n_scheduled=32, context=100)
    assert k == 4
    assert padded == [[1, 1, 1, 1], [2, 3, PLACEHOLDER, PLACEHOLDER], [PLACEHOLDER] * 4]
    k, padded = choose_and_pad(pol, [[1] * 12], n_scheduled=3, context=10)
    assert k == 12 and padded == [[1] * 12]


def test_feedback_policy_drops_k_when_deep_slots_are_not_accepted():
    pol = make_policy({"policy": "feedback", "ks": [4, 6, 12]})
    assert choose_and_pad(pol, [[1] * 12], 1, 10)[0] == 12      # optimistic start
    for _ in range(60):                                         # nothing accepted, K=12 drafted
        pol.observe([(0, 12)] * 32, 12)
    assert choose_and_pad(pol, [[1] * 12] * 32, 32, 3200)[0] == 4


def test_dynk_documents_are_json_and_build_policies(tmp_path):
    settings = {"tp": 1, "max_model_len": 16384, "max_num_batched_tokens": 8192,
                "max_num_seqs": 1024, "cudagraph_mode": "FULL_AND_PIECEWISE",
                "gpu": "NVIDIA H200"}
    spec = RunSpec.parse("math:32:128:validation")
    (tmp_path / "llama-3.1-8b__math__c32_n128.json").write_text(
        json.dumps({"table": [[16, 12], [1024, 4]]}))
    for policy in ("table", "feedback", "goodput"):
        doc = json.loads(json.dumps(dynk_policy(policy, spec, "llama-3.1-8b", settings,
                                                (4, 6, 12), tmp_path)))
        pol = make_policy(doc)
        k, _ = choose_and_pad(pol, [[1, 2, 3]] * 32, 32, 32 * 600)
        assert k in (4, 6, 12)
    with pytest.raises(InputError):
        dynk_policy("table", RunSpec.parse("chat:32:128"), "llama-3.1-8b", settings, (4, 6, 12),
                    tmp_path)
