"""Step-time cost model: hand-checked terms, monotonicity, graph-mode order, host/async behaviour,
fast path == term-by-term model, profiles and labels, and a sanity check against the one real
H200 measurement we have (docs/gpu-recipe.md), which the coefficients were NOT fitted to."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.catalog.hardware import get_hardware
from simkit.costmodel import CostModel, load_cost_model
from simkit.costmodel.batch import BatchDescriptor, GraphMode, StepCost
from simkit.costmodel.coefficients import Coefficients
from simkit.costmodel.calibrations import CALIBRATION_KIND, write_calibration
from simkit.errors import InputError, UnknownNameError

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "deepseek-r1", "k-exaone-236b", "llama-3.1-405b-fp8"]


@pytest.fixture(scope="module")
def cms():
    return {m: load_cost_model(m, "h200") for m in MODELS}


def decode(reqs, k=0, ctx=1000, mode=GraphMode.FULL, async_=False, drafter="none", padded=None):
    tokens = reqs * (1 + k)
    return BatchDescriptor(reqs, tokens, padded or tokens, 0, 0, reqs, reqs * k, 0,
                           reqs if drafter != "none" else 0, reqs * ctx, mode, async_, drafter)


batches = st.builds(
    lambda reqs, k, ctx, pre, extra_pad, mode, asy, drafter: BatchDescriptor(
        reqs, reqs * (1 + k) + pre, reqs * (1 + k) + pre + (0 if mode == GraphMode.NONE else extra_pad), pre,
        1 if pre else 0, reqs - (1 if pre else 0), reqs * k, 0, reqs if drafter != "none" else 0,
        reqs * ctx + pre, mode, asy, drafter),
    st.integers(1, 256), st.integers(0, 12), st.integers(1, 16000), st.integers(0, 4096), st.integers(0, 64),
    st.sampled_from(list(GraphMode)), st.booleans(), st.sampled_from(["none", "suffix", "ngram"]))


def test_labels_tp_and_capacity_are_exposed():
    from simkit.costmodel.calibrations import default_calibration

    cm = load_cost_model("llama-3.1-70b", "h200")
    default = default_calibration("h200")
    assert (cm.tp, cm.tp_chosen) == (2, True)
    assert cm.label == (f"calibrated {default}" if default else "analytic")
    assert load_cost_model("llama-3.1-70b", "h200", calibration="analytic").label == "analytic"
    assert cm.kv_capacity_tokens > 131072
    assert "TP=2 (chosen)" in cm.describe() and cm.label in cm.describe()
    given_tp = load_cost_model("llama-3.1-70b", "h200", tp=4)
    assert (given_tp.tp, given_tp.tp_chosen) == (4, False)
    assert given_tp.kv_capacity_tokens > cm.kv_capacity_tokens


def test_weight_bound_decode_reads_the_weights_once():
    # one request, tiny context: the step is the weight read at 80 % of 4.8 TB/s plus small terms
    cm = load_cost_model("llama-3.1-8b", "h200", calibration="analytic")
    m = cm.model
    terms = cm.device_breakdown(decode(1, ctx=16))
    weights_read = m.weight_bytes() - m.vocab * m.hidden * 2 - m.hidden * 2   # all but the input embedding
    assert terms["gemm"] == pytest.approx(weights_read / (4.8e12 * 0.8), rel=0.01)
    assert terms["attn"] < 0.01 * terms["gemm"] and terms["moe"] == 0 and terms["comm"] == 0


def test_compute_bound_prefill_costs_its_flops():
    cm = load_cost_model("llama-3.1-8b", "h200", calibration="analytic")
    n = 16384
    b = BatchDescriptor(16, n, n, n, 16, 0, 0, 0, 0, n, GraphMode.NONE, False)
    gemm = cm.device_breakdown(b)["gemm"]
    body = cm.model.param_count() - 2 * cm.model.vocab * cm.model.hidden   # lm_head runs on 16 rows only
    assert gemm == pytest.approx(2 * body * n / (989.4e12 * 0.7), rel=0.02)


def test_moe_distinct_experts_follow_top_k_occupancy():
    cm = load_cost_model("deepseek-r1", "h200", tp=8)
    E, k = 256, 8
    one = cm.device_terms(decode(1, ctx=16))["moe"]
    per_expert_s = cm.expert_bytes_all * cm.inv_bw
    assert one == pytest.approx(k * per_expert_s, rel=1e-9)          # n=1 touches k experts
    n = 64
    sixty_four = cm.device_terms(decode(n, ctx=16))["moe"]
    assert sixty_four == pytest.approx(E * (1 - (1 - k / E) ** n) * per_expert_s, rel=1e-9)
    assert sixty_four < E * per_expert_s


def test_tp_adds_all_reduce_and_splits_weights():
    b = decode(32, ctx=2000)
    tp2 = load_cost_model("llama-3.1-70b", "h200", tp=2, calibration="analytic")
    tp4 = load_cost_model("llama-3.1-70b", "h200", tp=4, calibration="analytic")
    t2, t4 = tp2.device_breakdown(b), tp4.device_breakdown(b)
    assert t4["gemm"] < t2["gemm"] and t2["comm"] > 0 and t2["allreduce"] == 2 * 80 * 8e-6
    assert load_cost_model("llama-3.1-8b", "h200", tp=1, calibration="analytic").device_breakdown(b)["allreduce"] == 0


def test_mla_kv_cache_is_read_whole_on_every_rank():
    cm = load_cost_model("deepseek-r1", "h200", tp=8)
    assert cm.kv_full == (512 + 64) * 2 * 61


@settings(max_examples=150, deadline=None)
@given(b=batches, model=st.sampled_from(MODELS))
def test_fast_path_equals_the_term_by_term_model(cms, b, model):
    cm = cms[model]
    fast = cm.step_cost(b)
    dev = cm.device_time(b)
    host = cm.host_time(b)
    assert isinstance(fast, StepCost)
    assert fast.device_s == pytest.approx(dev, rel=1e-9)
    assert fast.host_s == pytest.approx(host.total, rel=1e-9)
    assert fast.step_s == pytest.approx(cm.step_time(dev, host, b.async_scheduling), rel=1e-9)
    assert fast == StepCost(fast.device_s, fast.host_s, fast.step_s)


@settings(max_examples=150, deadline=None)
@given(b=batches, model=st.sampled_from(MODELS), more=st.integers(1, 2048), ctx=st.integers(0, 100000))
def test_more_tokens_or_context_never_cost_less(cms, b, model, more, ctx):
    cm = cms[model]
    base = cm.step_cost(b)
    bigger = dataclasses.replace(b, num_tokens=b.num_tokens + more, num_padded_tokens=b.num_padded_tokens + more,
                                 num_prefill_tokens=b.num_prefill_tokens + more)
    assert cm.step_cost(bigger).device_s >= base.device_s
    padded = dataclasses.replace(b, num_padded_tokens=b.num_padded_tokens + more)
    assert cm.step_cost(padded).device_s >= base.device_s
    longer = dataclasses.replace(b, context_tokens=b.context_tokens + ctx)
    assert cm.step_cost(longer).device_s >= base.device_s


@settings(max_examples=100, deadline=None)
@given(b=batches, model=st.sampled_from(MODELS))
def test_graph_modes_order_full_piecewise_none(cms, b, model):
    cm = cms[model]
    full, pw, none = (cm.step_cost(dataclasses.replace(b, graph_mode=m)) for m in GraphMode)
    assert full.device_s < pw.device_s < none.device_s
    assert full.step_s <= pw.step_s <= none.step_s


def test_padding_costs_its_padded_tokens_when_compute_bound():
    cm = load_cost_model("llama-3.1-8b", "h200", calibration="analytic")
    b = BatchDescriptor(8, 3000, 3000, 3000, 8, 0, 0, 0, 0, 3000, GraphMode.PIECEWISE, False)
    padded = dataclasses.replace(b, num_padded_tokens=3500)
    ratio = cm.device_breakdown(padded)["gemm"] / cm.device_breakdown(b)["gemm"]
    assert ratio == pytest.approx(3500 / 3000, rel=0.02)


@settings(max_examples=80, deadline=None)
@given(b=batches, factor=st.floats(1.1, 10))
def test_more_host_time_per_request_raises_sync_step_time(b, factor):
    base = load_cost_model("llama-3.1-8b", "h200")
    c = base.coefs
    slower = CostModel(base.model, base.hw, base.tp, dataclasses.replace(
        c, sched_req_s=c.sched_req_s * factor, prep_req_s=c.prep_req_s * factor, update_req_s=c.update_req_s * factor))
    sync = dataclasses.replace(b, async_scheduling=False)
    assert slower.step_cost(sync).step_s > base.step_cost(sync).step_s
    assert slower.step_cost(b).step_s >= base.step_cost(b).step_s


def test_async_overlaps_host_with_device_sync_adds_them():
    cm = load_cost_model("llama-3.1-8b", "h200")
    sync = cm.step_cost(decode(32, ctx=600, async_=False))
    asy = cm.step_cost(decode(32, ctx=600, async_=True))
    assert sync.step_s == pytest.approx(sync.device_s + sync.host_s)
    assert asy.step_s == pytest.approx(max(asy.device_s, asy.host_s) + cm.coefs.async_serial_s)
    assert asy.step_s < sync.step_s
    assert asy.host_frac < sync.host_frac
    # a host-bound async step: device shorter than the overlappable host work
    slow_host = CostModel(cm.model, cm.hw, cm.tp, cm.coefs, host_speed=0.05)
    hb = slow_host.step_cost(decode(32, ctx=600, async_=True))
    assert hb.step_s > hb.device_s and hb.host_frac > 0.5


def test_drafting_cannot_overlap_under_async():
    cm = load_cost_model("llama-3.1-8b", "h200")
    plain = cm.step_cost(decode(32, k=4, ctx=600, async_=True))
    drafted = cm.step_cost(decode(32, k=4, ctx=600, async_=True, drafter="suffix"))
    draft = cm.host_time(decode(32, k=4, ctx=600, async_=True, drafter="suffix")).draft
    assert draft == pytest.approx(cm.coefs.suffix_step_s + 32 * cm.coefs.suffix_req_s)
    assert drafted.step_s == pytest.approx(plain.step_s + draft)


def test_every_drafter_with_host_terms_is_registered_and_its_terms_are_coefficients():
    """DRAFTER_COEFS names drafters by the registry's names and coefficients by field name; the
    fast path and the term-by-term host time read the same three terms for each."""
    from simkit.costmodel.coefficients import DRAFTER_COEFS
    from simkit.drafters.base import drafter_names

    fields = {f.name for f in dataclasses.fields(Coefficients)}
    cm = load_cost_model("llama-3.1-8b", "h200")
    for drafter, names in DRAFTER_COEFS.items():
        assert drafter in drafter_names() and set(names) <= fields
        b = dataclasses.replace(decode(8, k=4, ctx=600, async_=True, drafter=drafter),
                                num_accepted_tokens=20)
        step, req, acc = (getattr(cm.coefs, n) for n in names)
        assert step + 8 * req + 20 * acc > 0
        assert cm.host_time(b).draft == pytest.approx(step + 8 * req + 20 * acc)
        assert cm.step_cost(b).step_s == pytest.approx(
            cm.step_cost(dataclasses.replace(b, num_drafting_reqs=0)).step_s + cm.host_time(b).draft)


def test_host_speed_scales_host_time_only():
    cm = load_cost_model("llama-3.1-8b", "h200")
    fast_cpu = CostModel(cm.model, cm.hw, cm.tp, cm.coefs, host_speed=2.0)
    b = decode(32, k=4, drafter="suffix")
    assert fast_cpu.host_time(b).total == pytest.approx(cm.host_time(b).total / 2)
    assert fast_cpu.device_time(b) == cm.device_time(b)


def test_frontend_bounds_the_step_from_below():
    cm = load_cost_model("llama-3.1-8b", "h200")
    slow_front = CostModel(cm.model, cm.hw, cm.tp, dataclasses.replace(cm.coefs, frontend_req_s=1e-3))
    b = decode(64, ctx=100, async_=True)
    assert slow_front.step_cost(b).step_s == pytest.approx(64 * 1e-3)


def test_gpu_recipe_sanity_check_not_fitted():
    """docs/gpu-recipe.md measured Llama-3.1-8B on one H200 (dummy weights, 32 prompts x 512
    tokens, max_tokens 256, max_num_seqs 32): vanilla 5,576 tok/s (async, FULL decode graphs),
    suffix K=4 with every draft accepted 12,270 tok/s (synchronous V1). The analytic coefficients
    were set before this comparison and not tuned to it; the band only catches gross errors."""
    cm = load_cost_model("llama-3.1-8b", "h200", tp=1, calibration="analytic", max_num_batched_tokens=16384,
                         max_num_seqs=32)

    def tok_s(k, async_, drafter):
        R, P, T = 32, 512, 256
        nd = R if drafter != "none" else 0
        total = cm.step_cost(BatchDescriptor(R, R * P, R * P, R * P, R, 0, 0, 0, nd, R * P, GraphMode.NONE,
                                             async_, drafter)).step_s
        done, ctx = 1, P + 1
        while done < T:
            total += cm.step_cost(decode(R, k, ctx + k, GraphMode.FULL, async_, drafter)).step_s
            done, ctx = done + 1 + k, ctx + 1 + k
        return R * T / total

    vanilla, suffix = tok_s(0, True, "none"), tok_s(4, False, "suffix")
    assert 0.7 < vanilla / 5576 < 1.3, vanilla
    assert 0.7 < suffix / 12270 < 1.3, suffix
    assert 1.5 < suffix / vanilla < 3.0


def test_calibrations_load_with_calibrated_label(tmp_path):
    coefs = dataclasses.replace(Coefficients(), gemm_scale=1.2, sched_req_s=9e-6)
    doc = {"kind": CALIBRATION_KIND, "version": 1, "name": "h200-test", "hardware": "h200",
           "coefficients": coefs.to_dict(), "default_for": [], "vllm_version": "0.33"}
    path = write_calibration(doc, tmp_path / "h200-test.json")
    cm = load_cost_model("llama-3.1-8b", "h200", calibration=str(path))
    assert cm.label == "calibrated h200-test"
    assert cm.coefs == coefs
    moved = load_cost_model("llama-3.1-8b", "b200", calibration=str(path))
    assert moved.label == "calibrated h200-test (fitted on h200, transferred to b200)"
    analytic = load_cost_model("llama-3.1-8b", "h200", calibration="analytic")
    assert cm.step_cost(decode(8)).device_s > analytic.step_cost(decode(8)).device_s


def test_bad_calibrations_are_clear_errors(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown calibration"):
        load_cost_model("llama-3.1-8b", calibration="no-such-profile")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": CALIBRATION_KIND, "name": "x", "hardware": "h200",
                               "coefficients": {"gemm_scale": -1}}))
    with pytest.raises(InputError, match="coefficients.gemm_scale"):
        load_cost_model("llama-3.1-8b", calibration=str(bad))
    bad.write_text(json.dumps({"kind": CALIBRATION_KIND, "name": "x", "hardware": "h200",
                               "coefficients": {"gemm_speed": 1}}))
    with pytest.raises(InputError, match="unknown coefficient"):
        load_cost_model("llama-3.1-8b", calibration=str(bad))
    bad.write_text("{\n\n  nope")
    with pytest.raises(InputError, match="line 3"):
        load_cost_model("llama-3.1-8b", calibration=str(bad))
    bad.write_text(json.dumps({"kind": "something-else", "name": "x", "hardware": "h200",
                               "coefficients": {}}))
    with pytest.raises(InputError, match="not a calibration"):
        load_cost_model("llama-3.1-8b", calibration=str(bad))


def test_a_calibration_file_is_blamed_for_its_own_faults(tmp_path):
    """A missing .json is named as a missing file, and a file's unknown vLLM version is the
    file's field, not the --vllm-version the user never gave."""
    missing = tmp_path / "gone.json"
    with pytest.raises(InputError, match="no such calibration file") as exc:
        load_cost_model("llama-3.1-8b", calibration=str(missing))
    assert str(missing) in str(exc.value)
    bad = tmp_path / "ver.json"
    bad.write_text(json.dumps({"kind": CALIBRATION_KIND, "name": "x", "hardware": "h200",
                               "vllm_version": "0.99", "coefficients": {}}))
    with pytest.raises(InputError) as exc:
        load_cost_model("llama-3.1-8b", calibration=str(bad))
    assert str(bad) in str(exc.value) and "'vllm_version'" in str(exc.value)
    assert "--vllm-version" not in str(exc.value)


def test_calibrations_written_before_the_rename_still_load():
    """A file of the old kind (cost-model "profile", tests/data/h200-vllm026-410e447.json) is
    read as a calibration; new files carry the new kind."""
    from pathlib import Path

    from simkit.costmodel.calibrations import LEGACY_KINDS, read_calibration

    old = Path(__file__).resolve().parents[1] / "data" / "h200-vllm026-410e447.json"
    assert json.loads(old.read_text())["kind"] in LEGACY_KINDS
    assert load_cost_model("llama-3.1-8b", "h200", calibration=str(old),
                           vllm_version="0.26").label == \
        "calibrated h200-vllm026"
    assert read_calibration("h200-vllm026")["kind"] == CALIBRATION_KIND


def test_default_is_analytic_until_a_calibration_is_marked_default():
    from simkit.costmodel.calibrations import default_calibration

    for hw in ("h200", "b200", "h100"):
        name = default_calibration(hw)
        cm = load_cost_model("llama-3.1-8b", hw)
        assert cm.label == ("analytic" if name is None else f"calibrated {name}")


def test_determinism_same_inputs_same_floats():
    b = decode(17, k=3, ctx=1234, mode=GraphMode.PIECEWISE, drafter="suffix")
    a = load_cost_model("k-exaone-236b", "b200").step_cost(b)
    c = load_cost_model("k-exaone-236b", "b200").step_cost(b)
    assert a == c and get_hardware("b200").host_speed == 1.0


def test_cost_model_pickles_for_worker_processes():
    import pickle

    cm = load_cost_model("deepseek-r1", "h200")
    back = pickle.loads(pickle.dumps(cm))
    b = decode(24, k=4, ctx=3000, mode=GraphMode.PIECEWISE, drafter="suffix")
    assert back.step_cost(b) == cm.step_cost(b) and back.label == cm.label and back.tp == cm.tp


def test_host_time_grows_by_the_fitted_per_accepted_token_terms(cms):
    """A step that accepts more drafts costs more host time, by exactly the shipped profile's
    per-accepted-token coefficients (scheduler, input preparation, drafter, output update); the
    device part does not move. Measured on the hot calibration runs: docs/costmodel.md."""
    from dataclasses import replace

    cm = cms["llama-3.1-8b"]
    base = decode(32, k=8, drafter="suffix", mode=GraphMode.PIECEWISE)
    more = replace(base, num_accepted_tokens=200)
    c = cm.coefs
    per_token = (c.sched_accept_s + c.prep_accept_s + c.suffix_accept_s + c.update_accept_s)
    assert per_token > 0
    a, b = cm.step_cost(base), cm.step_cost(more)
    assert b.device_s == a.device_s
    assert b.host_s - a.host_s == pytest.approx(200 * per_token / cm.host_speed, rel=1e-9)
    assert b.step_s - a.step_s == pytest.approx(200 * per_token / cm.host_speed, rel=1e-9)
    parts = cm.host_time(more)
    assert parts.total == pytest.approx(b.host_s, rel=1e-9)


def test_calibration_of_another_vllm_version_says_so(tmp_path):
    """A calibration fitted on one vLLM version and used for another is labelled so; a file
    written before calibrations named their version was fitted on 0.26 runs."""
    doc = {"kind": CALIBRATION_KIND, "version": 1, "name": "old", "hardware": "h200",
           "coefficients": Coefficients().to_dict(), "default_for": []}
    path = write_calibration(doc, tmp_path / "old.json")
    assert load_cost_model("llama-3.1-8b", "h200", calibration=str(path),
                           vllm_version="0.26").label == "calibrated old"
    newer = load_cost_model("llama-3.1-8b", "h200", calibration=str(path), vllm_version="0.33")
    assert newer.label == "calibrated old (fitted on vLLM 0.26 runs, used for 0.33)"
    assert newer.vllm_version == "0.33"


def test_default_calibration_follows_the_vllm_version():
    assert load_cost_model("llama-3.1-8b", "h200", vllm_version="0.26").label == \
        "calibrated h200-vllm026"
    assert load_cost_model("llama-3.1-8b", "h200", vllm_version="0.33").label == \
        "calibrated h200-vllm033"
    assert load_cost_model("llama-3.1-8b", "h200").label == "calibrated h200-vllm033"


def test_step_records_rows_are_what_to_dict_gives():
    """records() (the fit's fast row reader) gives to_dict("records")'s values and types, NaN
    and missing values included, on every column kind a record frame holds."""
    import math

    import pandas as pd

    from simkit.costmodel.step_records import records

    X = pd.DataFrame({"run_id": pd.array(["a", None, "c"], dtype="string"),
                      "num_reqs": [1, 2, 3], "t_step_s": [0.5, float("nan"), 1.5],
                      "async_scheduling": [True, False, True],
                      "k": pd.array([4, None, 8], dtype="Int64"), "config": ["x", "y", None],
                      "t_force_s": pd.array([None, 0.1, 0.2], dtype="Float64"),
                      "force_copy": pd.array([True, None, False], dtype="boolean")},
                     index=[10, 3, 7])
    want, got = X.to_dict("records"), records(X)
    assert len(got) == len(want) == 3
    for w, g in zip(want, got):
        assert list(g) == list(w)
        for key in w:
            a, b = w[key], g[key]
            assert type(a) is type(b), (key, a, b)
            assert a is b or a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_async_runner_coefficients_are_built_once_and_replace_the_shared_ones():
    c = Coefficients(async_runner=(("sched_step_s", 1e-3),))
    a = c.for_async_runner()
    assert a is c.for_async_runner() and a.sched_step_s == 1e-3 and a.async_runner == ()
    assert a == dataclasses.replace(c, async_runner=(), sched_step_s=1e-3)
    assert Coefficients().for_async_runner() == Coefficients()


@settings(max_examples=200, deadline=None)
@given(b=batches, acc=st.integers(0, 512), version=st.sampled_from(["0.26", "0.33"]),
       speed=st.sampled_from([1.0, 0.7]))
def test_thread_parts_are_host_times_parts_float_for_float(b, acc, version, speed):
    """thread_parts, which a run priced in one engine thread reads every step, gives exactly
    host_time's frontend, draft and dispatch (the calibrations with the async runner's own
    coefficients and the dispatch terms included, and on another host speed)."""
    from simkit.costmodel.calibrations import default_calibration
    from simkit.costmodel.host_factor import at_host_speed

    cm = load_cost_model("llama-3.1-8b", "h200", calibration=default_calibration("h200", version))
    cm = cm if speed == 1.0 else at_host_speed(cm, speed)
    b = dataclasses.replace(b, num_accepted_tokens=min(acc, b.num_spec_tokens))
    host = cm.host_time(b)
    assert cm.thread_parts(b) == (host.frontend, host.draft, host.dispatch)
