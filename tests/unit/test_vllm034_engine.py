"""vLLM 0.34's engine rules: the version registry of parts, request-keyed decode graphs, exactly
K verified slots with fillers, per-request cuts near max_model_len, the batch-size K table (its
checks, dense expansion, one-step lag and graph tiers) and the transferred calibration."""

import numpy as np
import pytest

from engine_doubles import LinearCost, make_table
from simkit.acceptance.table import AcceptanceTable
from simkit.catalog.vllm_versions import (GRAPH_RULES, HARNESS_ADAPTERS, RUNNERS, VERSIONS,
                                          get_vllm_version)
from simkit.catalog.nearest_version import resolve_vllm_version
from simkit.costmodel.batch import GraphMode
from simkit.drafters.base import get_drafter
from simkit.engine.config import EngineConfig, kpad, parse_configs
from simkit.engine.cudagraph import (GRAPH_RULES as ENGINE_GRAPH_RULES, CudagraphMode,
                                     RequestKeyedDispatcher, decode_request_counts)
from simkit.engine.policies import check_k_ranges, dense_k_table, tier_widths
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.slots import SLOT_POLICIES
from simkit.engine.workload import Workload
from simkit.errors import InputError, UnknownNameError

V34 = EngineConfig(vllm_version="0.34", max_num_seqs=16)
V33 = EngineConfig(vllm_version="0.33", max_num_seqs=16)


def gpu_table(prompt_len, output_len, drafted_fn, accepted_fn, kmax=12,
              drafter="suffix_gpu") -> AcceptanceTable:
    """A suffix_gpu-style table: d(t,K) real drafts <= K, a(t,K) accepted SLOTS <= K (fillers
    included, so a may exceed d)."""
    return make_table(prompt_len, output_len, accepted_fn, drafted_fn, kmax, drafter, slots=True)


def _workload(n=12, drafter="suffix_gpu"):
    return Workload.from_table(gpu_table([40 + 13 * (r % 5) for r in range(n)],
                                         [30 + 11 * (r % 4) for r in range(n)],
                                         lambda r, t, k: (r + t) % 3,        # 0..2 real drafts
                                         lambda r, t, k: (r + 2 * t) % 5,    # up to 4 accepted
                                         drafter=drafter))


# -- the registry of parts --------------------------------------------------------------------
def test_every_version_names_parts_that_resolve():
    from simkit.costmodel.calibrations import list_calibrations

    for v in VERSIONS.values():
        assert v.graph_rule in GRAPH_RULES and v.graph_rule in ENGINE_GRAPH_RULES
        assert v.harness_adapter in HARNESS_ADAPTERS
        assert v.calibration_name("h200") in list_calibrations()
        for method, parts in v.methods.items():
            assert parts.runner in RUNNERS and parts.slots in SLOT_POLICIES, (v.key, method)
            if parts.drafter != "none":                     # the drafter registry knows it
                d = get_drafter(parts.drafter)
                assert d.name == parts.drafter
                if not parts.refused:                       # exact-K slots = a K-slot drafter
                    assert d.fills_k_slots == (parts.slots == "exact-k"), (v.key, method)
        assert v.sources, v.key
    v34 = get_vllm_version("0.34.0")
    assert v34.method("suffix").drafter == "suffix_gpu" and v34.method("suffix").default_k == 8
    assert get_vllm_version("0.33").method("suffix").drafter == "suffix"
    assert all(RUNNERS[p.runner].async_scheduling for p in v34.methods.values())
    assert not get_vllm_version("0.33").runner_for("suffix").async_scheduling
    assert (get_vllm_version("0.26").harness_adapter, v34.harness_adapter) == ("forcing",
                                                                                 "trace_replay")


def test_a_newer_unknown_version_gets_the_nearest_rules_with_a_warning_an_older_is_refused():
    r = resolve_vllm_version("0.35.1")
    v, warning = r.rules, r.warning
    assert v.key == "0.34" and "vLLM 0.35 is newer" in warning and "vLLM 0.34.0" in warning
    r = resolve_vllm_version("0.34")
    assert (r.rules, r.warning) == (VERSIONS["0.34"], "")
    for old in ("0.25", "0.30.0", "banana"):
        with pytest.raises(UnknownNameError, match="known: 0.26, 0.33, 0.34"):
            resolve_vllm_version(old)
    with pytest.raises(UnknownNameError):          # records and calibrations name exact ones
        get_vllm_version("0.35")


def test_cli_option_warns_for_a_newer_version(capsys):
    from simkit.commands.options import pick_vllm_version

    assert pick_vllm_version("0.40") == "0.34"
    assert "warning: vLLM 0.40 is newer" in capsys.readouterr().err
    assert pick_vllm_version(None) == "0.33"        # the default stays one constant


# -- configurations ---------------------------------------------------------------------------
def test_suffix_on_034_is_the_gpu_drafter_at_k8_and_kpad_is_suffix():
    specs = {s.name: s for s in parse_configs("vanilla,suffix,kpad:4,8,suffix:12", "0.34")}
    assert list(specs) == ["vanilla", "suffix", "suffix-4", "suffix-12"]    # kpad-8 = suffix
    assert (specs["suffix"].drafter, specs["suffix"].k) == ("suffix_gpu", 8)
    old = {s.name: s for s in parse_configs("suffix,kpad:4", "0.33")}
    assert (old["suffix"].drafter, old["suffix"].k, old["kpad-4"].pad) == ("suffix", 24, True)


def test_k_table_parses_checks_and_expands_like_vllm():
    (spec,) = parse_configs("ktable:1-16=8/17-64=4/65-1024=2", "0.34")
    assert spec.name == "ktable-8.4.2" and spec.k == 8 and spec.ks == (2, 4, 8)
    assert spec.k_table == ((1, 16, 8), (17, 64, 4), (65, 1024, 2))
    for bad, why in (("ktable:2-16=8", "start at batch size 1"), ("ktable:1-16=8/10-20=4", "overlap"),
                     ("ktable:1-16=8/30-20=4", "start <= end"), ("ktable:1-4=0", "vanilla"),
                     ("ktable:1-16", "START-END=K"), ("ktable", "needs its ranges")):
        with pytest.raises(InputError, match=why):
            parse_configs(bad, "0.34")
    with pytest.raises(InputError, match="refuses num_speculative_tokens_per_batch_size"):
        parse_configs("ktable:1-16=8", "0.33")
    # gaps carry the previous K, the tail carries the last, every K clamped to the configured K
    table = dense_k_table(check_k_ranges(((1, 2, 8), (5, 6, 2))), 6, 10)
    assert table[1:] == [6, 6, 6, 6, 2, 2, 2, 2, 2, 2]
    assert tier_widths(table) == {6: 4, 2: 10}


# -- CUDA graphs ------------------------------------------------------------------------------
def test_full_decode_graphs_reach_the_facts_request_counts_on_h200_defaults():
    for k, top in ((4, 100), (6, 72), (8, 56), (12, 39)):
        counts = decode_request_counts(1024, k, 8192)
        assert counts[-1] == top, k
        assert all(n * (1 + k) <= 512 for n in counts)   # captured as n x (1+K) tokens
    # K=8: ceil(s/9) over the token grid (plain grid + n x 9) covers every count to 29
    assert decode_request_counts(1024, 8, 8192)[:29] == list(range(1, 30))
    d = RequestKeyedDispatcher.build(CudagraphMode.FULL_AND_PIECEWISE, 1024, 8, 8192)
    assert d.dispatch(9 * 30, 30, 9) == (GraphMode.FULL, 9 * 31)       # padded to 31 requests
    assert d.dispatch(9 * 57, 57, 9) == (GraphMode.NONE, 9 * 57)       # above 512 tokens
    assert d.dispatch(27, 3, 9, num_prefill_reqs=1)[0] is GraphMode.PIECEWISE
    assert d.dispatch(100, 3, 50, 1) == (GraphMode.PIECEWISE, 104)     # plain token grid


# -- exactly K slots ------------------------------------------------------------------------
def test_every_decoding_request_verifies_exactly_k_slots_and_fillers_can_be_accepted():
    w = _workload()
    (spec,) = parse_configs("suffix:4", "0.34")
    res = simulate(w, LinearCost(), V34, spec, load=ClosedLoop(4), seed=0, keep_steps=True)
    decodes = [d for d, _ in res.step_log if d.num_prefill_reqs == 0 and d.num_decode_reqs]
    assert decodes and all(d.num_spec_tokens == 4 * d.num_decode_reqs for d in decodes)
    assert all(d.graph_mode is GraphMode.FULL and d.async_scheduling for d in decodes)
    assert all(d.num_drafting_reqs == 0 for d, _ in res.step_log)      # drafts on the GPU
    # fillers (slots without a real draft) are verified, so acceptance can exceed the drafts
    assert any(d.num_accepted_tokens > d.num_spec_tokens - d.num_pad_drafts for d in decodes)
    assert all(d.num_accepted_tokens <= d.num_spec_tokens for d, _ in res.step_log)
    # the same table on 0.33's K-pad: placeholders are never accepted
    old = simulate(_workload(drafter="suffix"), LinearCost(), V33, kpad(4), load=ClosedLoop(4),
                   seed=0, keep_steps=True)
    assert all(d.num_accepted_tokens <= d.num_spec_tokens - d.num_pad_drafts
               for d, _ in old.step_log)
    assert res.metrics.mean_accepted > old.metrics.mean_accepted


def test_near_max_model_len_only_that_request_is_cut():
    # request 0 ends 1 token short of max_model_len 200; request 1 is far from it
    w = Workload.from_table(gpu_table([150, 10], [49, 120], lambda r, t, k: k,
                                      lambda r, t, k: 0))
    cfg = dict(max_model_len=200, max_num_seqs=4)
    new = simulate(w, LinearCost(), EngineConfig(vllm_version="0.34", **cfg),
                   parse_configs("suffix:8", "0.34")[0], load=ClosedLoop(2), seed=0,
                   keep_steps=True, shuffle=False)
    both = [d for d, _ in new.step_log if d.num_decode_reqs == 2 and d.num_prefill_reqs == 0]
    cut = [d for d in both if d.num_spec_tokens < 16]
    assert cut and all(d.num_spec_tokens >= 8 for d in both)        # request 1 keeps its 8
    assert all(d.graph_mode is GraphMode.PIECEWISE for d in cut)    # non-uniform
    old = simulate(Workload.from_table(gpu_table([150, 10], [49, 120], lambda r, t, k: k,
                                                 lambda r, t, k: 0, drafter="suffix")),
                   LinearCost(), EngineConfig(vllm_version="0.33", **cfg), kpad(8),
                   load=ClosedLoop(2), seed=0, keep_steps=True, shuffle=False)
    assert any(d.num_decode_reqs == 2 and d.num_prefill_reqs == 0 and d.num_spec_tokens == 0
               for d, _ in old.step_log)                            # V1: the batch drafts nothing


# -- the batch-size K table ---------------------------------------------------------------------
def test_k_table_takes_k_from_the_step_before_and_captures_graphs_per_tier():
    from simkit.engine.scheduler import Scheduler

    w = _workload(n=10)
    (spec,) = parse_configs("ktable:1-2=8/3-16=2", "0.34")
    sched = Scheduler(V34, spec, w, LinearCost())
    assert sched.dispatchers[8].decode_reqs[-1] == 2       # the K=8 tier serves <= 2 requests
    assert sched.dispatchers[2].decode_reqs[-1] == 16
    res = simulate(w, LinearCost(), V34, spec, load=ClosedLoop(4), seed=0, keep_steps=True,
                   num_requests=10)
    steps = [d for d, _ in res.step_log]
    table = {n: (8 if n <= 2 else 2) for n in range(1, 17)}
    checked = lagged = 0
    for prev, cur in zip(steps, steps[1:]):
        if cur.num_prefill_reqs or not cur.num_decode_reqs:
            continue
        k = cur.num_spec_tokens // cur.num_decode_reqs
        assert k == table[prev.num_reqs], (prev, cur)      # K of the step before's batch size
        checked += 1
        lagged += table[prev.num_reqs] != table[cur.num_reqs]
    assert checked > 10 and lagged >= 1                    # the lag shows where sizes change


def test_034_refuses_another_versions_drafter_and_a_profile_without_its_table():
    from simkit.engine.config import suffix
    from simkit.engine.runner import Cell, run_ladder

    ladder = run_ladder(Cell(_workload(drafter="suffix"), LinearCost(), V34), [suffix(8)],
                        seeds=1, num_requests=8, load=ClosedLoop(2))
    assert "vLLM 0.26.0 runs for 'suffix'" in ladder.unavailable["suffix-8"]
    with pytest.raises(InputError, match="no vLLM 0.34.0 acceptance table for 'suffix' yet"):
        run_ladder(Cell(_workload(drafter="suffix"), LinearCost(), V34),
                   parse_configs("suffix", "0.34"), seeds=1, num_requests=8, load=ClosedLoop(2))


# -- the transferred calibration ----------------------------------------------------------------
def test_034_calibration_is_transferred_and_every_output_says_its_error_is_unmeasured():
    import json

    from simkit.app.options import RunOptions
    from simkit.app.predict import predict
    from simkit.costmodel.calibrations import default_calibration, load_cost_model
    from simkit.report.render import document, render_table

    assert default_calibration("h200", "0.34") == "h200-vllm034"
    assert default_calibration("h200") == "h200-vllm033"            # the default stays 0.33
    cost = load_cost_model("llama-3.1-8b", "h200", vllm_version="0.34")
    note = "transferred from the vLLM 0.33 calibration, not yet measured on vLLM 0.34 runs"
    assert note in cost.label
    run = RunOptions(model="llama-3.1-8b", corpus="chat", hardware="h200", vllm_version="0.34",
                     seeds=1, num_requests=24, concurrency=4)
    pred = predict(run, configs="vanilla,suffix:4,8", workload=_workload(), cost=cost)
    assert pred.run.calibration == "h200-vllm034"
    text = render_table(pred)
    assert note in text and "this ranking cannot tell apart configurations" in text
    assert "unmeasured" in text and "interval for a rerun ±" not in text   # no borrowed 0.33 band
    assert "kpad:K is suffix:K" in text                 # what kpad means on 0.34, said
    assert "filler slots without a draft" in text       # not called placeholder padding
    doc = document(pred)
    cm = doc["assumptions"]["cost_model"]["value"]
    assert "interval" not in cm and cm["validation"] is None and cm["transferred_from"]
    assert "cannot tell apart" in json.dumps(doc)
    graphs = doc["assumptions"]["cudagraph"]
    assert graphs["value"]["decode_request_counts"]["8"][-1] == 56     # the H200 grid at K=8
    assert "B200" in graphs["text"]                    # whose wider defaults are not modelled
    assert pred.best_k in (4, 8)                      # the suffix rows are the fixed-K rows


def test_feedback_policies_observe_every_verified_slot_on_034(monkeypatch):
    """A 0.34 step verifies K slots, so an acceptance-learning policy sees (accepted, K slots):
    accepted fillers never exceed what it believes was verified."""
    from simkit.engine.policies import FeedbackK

    seen = []
    original = FeedbackK.observe
    monkeypatch.setattr(FeedbackK, "observe",
                        lambda self, pairs, k: (seen.extend(pairs), original(self, pairs, k))[1])
    (spec,) = parse_configs("dynamic-feedback:2,5", "0.34")
    simulate(_workload(), LinearCost(), V34, spec, load=ClosedLoop(4), seed=0)
    assert seen and all(a <= d for a, d in seen)
    assert any(a > 0 for a, _ in seen)
