"""Issue 41, the silently-wrong class: no figure printed that the tool cannot stand behind.

Each test here failed before its fix; where the issue names a property, it is a property test
over the shipped catalogue or inputs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import one_line_error, run
from cli_helpers import own_cache as _own_cache  # noqa: F401 (autouse)
from user_records import record_folder

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=15, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "code-edit", "--configs",
           "vanilla,suffix", "--seeds", "1", "--num-requests", "96", "--source", "shipped",
           "--workers", "1")


def _entry_doc(hw: str) -> dict:
    return json.loads((ROOT / "simkit" / "data" / "hardware" / f"{hw}.json").read_text())


# -- 1. a hardware file equal to a catalogue entry is that entry; a borrowed name is not ------

@FAST
@given(data=st.data())
def test_a_hardware_file_equal_to_an_entry_prices_and_labels_as_the_entry(tmp_path_factory, data):
    from simkit.catalog.hardware import canonical_hardware, list_hardware
    from simkit.costmodel import load_cost_model

    hw = data.draw(st.sampled_from(list_hardware()))
    doc = _entry_doc(hw)
    keys = data.draw(st.permutations(sorted(doc)))
    stem = data.draw(st.sampled_from([hw, "my-gpu", hw.upper()]))
    path = tmp_path_factory.mktemp("hw") / f"{stem}.json"
    path.write_text(json.dumps({k: doc[k] for k in keys}, indent=data.draw(st.sampled_from([None, 2]))))
    assert canonical_hardware(str(path)) == hw
    for version in ("0.26", "0.33"):
        a = load_cost_model("llama-3.1-8b", hw, vllm_version=version)
        b = load_cost_model("llama-3.1-8b", canonical_hardware(str(path)), vllm_version=version)
        assert a.label == b.label and a.coefs == b.coefs and a.tp == b.tp


def test_a_copy_of_h200_json_prints_the_h200_prediction(capsys, tmp_path):
    """It got h200's calibrated figures labelled 'analytic ... error never measured'."""
    path = tmp_path / "copy.json"
    path.write_text((ROOT / "simkit" / "data" / "hardware" / "h200.json").read_text())
    code, entry, _ = run(capsys, *PREDICT, "--hardware", "h200")
    assert code == 0
    code, copy, _ = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 0 and copy == entry
    assert "90 % interval for a rerun" in copy


_FIGURES = ("hbm_gib", "hbm_tbps", "bf16_tflops", "fp8_tflops", "nvlink_gbps", "host_speed")


@FAST
@given(field=st.sampled_from(_FIGURES), factor=st.sampled_from([0.5, 1.25, 2.0]))
def test_a_file_borrowing_a_name_is_never_priced_with_that_entrys_fit(tmp_path_factory, field,
                                                                       factor):
    from simkit.costmodel import load_cost_model

    doc = _entry_doc("h200")
    doc[field] = doc[field] * factor
    path = tmp_path_factory.mktemp("hw") / "h200.json"
    path.write_text(json.dumps(doc))
    cost = load_cost_model("llama-3.1-8b", str(path), tp=1, max_model_len=4096)
    assert cost.label.startswith("analytic: ") and field in cost.label
    assert cost.coefs == load_cost_model("llama-3.1-8b", "h200", calibration="analytic").coefs
    asked = load_cost_model("llama-3.1-8b", str(path), tp=1, max_model_len=4096,
                            calibration="h200-vllm033")
    assert "transferred to the hardware file named h200" in asked.label


def test_a_faster_copy_named_h200_says_which_calibration_it_used(capsys, tmp_path):
    doc = _entry_doc("h200")
    doc["hbm_tbps"] = 6.0
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(doc))
    code, out, _ = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 0
    text = " ".join(out.split())
    assert "analytic coefficients (no calibrated profile): error never measured; the hardware " \
           "file is named h200 but its figures (hbm_tbps) differ" in text
    assert "--calibration h200-vllm033 transfers it" in text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "-1"])
@pytest.mark.parametrize("field", ["hbm_tbps", "fp4_tflops", "host_speed"])
def test_non_finite_or_negative_hardware_figures_are_one_error(capsys, tmp_path, field, value):
    text = json.dumps(_entry_doc("h200"), indent=2)
    text = text.replace(f'"{field}": {json.dumps(_entry_doc("h200")[field])}',
                        f'"{field}": {value}')
    assert value in text
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, _, err = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 2
    one_line_error(err, str(path), field)


# -- 2. no request is ever dropped without a count in the output ------------------------------

def _mix_workload():
    from simkit.app.cells import load_workload

    return load_workload("llama-3.1-8b", "mix", "shipped", None, "keep", 8192)


@FAST
@given(levels=st.lists(st.integers(0, 16000), min_size=1, max_size=4, unique=True),
       max_model_len=st.sampled_from([8192, 16384, 32768]),
       max_tokens=st.sampled_from([512, 8192]))
def test_every_preamble_row_replays_the_same_requests(levels, max_model_len, max_tokens):
    from simkit.engine.config import EngineConfig
    from simkit.engine.sim import request_order
    from simkit.errors import InputError
    from simkit.whatif.prefix import own_skips, same_requests

    base = _mix_workload()
    levels = sorted(levels)
    try:
        kept, left = same_requests(base, levels[-1], max_model_len, max_tokens)
    except InputError:
        whole = base.prompt_len + levels[-1] + np.minimum(base.output_len, max_tokens)
        assert (whole[base.output_len > 0] > max_model_len).all()
        return
    cfg = EngineConfig(max_model_len=max_model_len, max_tokens=max_tokens,
                       kv_capacity_tokens=10**9)
    used = []
    for n in levels:
        w = dataclasses.replace(kept, prompt_len=kept.prompt_len + np.int32(n), _columns={})
        order, skipped = request_order(w, cfg, None, 0, shuffle=False)
        used.append(order)
        own = own_skips(skipped, kept.prompt_len, left, n, max_model_len)
        assert all(v >= 0 for v in own.values())
        # every request is run, stated as left out, or counted by the engine's own rules
        assert len(order) + int(left.sum()) + sum(own.values()) == base.num_requests
        # no kept request is cut short by the preamble: the rows compare the same outputs
        eff = np.minimum(w.output_len, max_tokens)[order]
        assert (w.prompt_len[order] + eff <= max_model_len).all()
    assert all(u == used[0] for u in used)


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_whatif_prefix_counts_the_requests_the_longest_preamble_leaves_out(capsys):
    """The 16k row was another request set (1,131 tok/s above the 4k row's 962), silently."""
    from simkit.whatif.prefix import same_requests

    _, left = same_requests(_mix_workload(), 16000, 16384, 8192)
    assert left.sum() > 0
    code, out, _ = run(capsys, "whatif", "prefix", "--preamble", "0,4000,8000,16000",
                       "--configs", "vanilla", "--num-requests", "64", "--seeds", "1",
                       "--workers", "1")
    assert code == 0
    text = " ".join(out.split())
    assert (f"{int(left.sum())} of {left.size} sampled requests do not fit whole (prompt and "
            "output) in max_model_len 16,384 behind the 16,000-token preamble, so every row "
            "runs without them") in text
    tok = [float(line.split("│")[2].replace(",", "")) for line in out.splitlines()
           if "│ vanilla" in line]
    assert len(tok) == 4 and tok == sorted(tok, reverse=True)   # same requests: longer is slower


@pytest.mark.parametrize("whatif", ["host", "concurrency"])
def test_a_whatif_names_the_requests_the_engine_skipped(whatif):
    """What-ifs ran without the engine's skipped requests and never said so (predict did)."""
    from engine_doubles import make_table
    from simkit.app.options import RunOptions
    from simkit.engine.workload import Workload
    from simkit.whatif.concurrency import concurrency
    from simkit.whatif.host import host

    plen, olen = [100, 20000, 120, 140, 90, 20000], [30, 40, 25, 35, 20, 30]
    tab = make_table(plen, olen, lambda r, t, k: 1, lambda r, t, k: k, kmax=4)
    w = Workload.from_table(tab, name="t/t")
    run_ = RunOptions(model="llama-3.1-8b", hardware="h200", seeds=1, workers=1,
                      num_requests=16)
    res = (host(run_, factors="1", configs="vanilla", workload=w) if whatif == "host" else
           concurrency(run_, levels="2", configs="vanilla", workload=w, min_requests=16))
    label = "every row" if whatif == "host" else "every level"   # host: factors 1 and 2
    assert f"skipped profile requests (never run): {label}: prompt_over_max_model_len 2" \
        in res.notes



def test_sweep_and_reference_name_the_requests_a_cell_skipped(capsys, monkeypatch, tmp_path):
    """Shipped profiles skip nothing under the defaults, so a cell's skip counts are injected
    where the engine reports them; sweep printed nothing of them, the reference study neither."""
    import simkit.app.predict as app_predict
    import simkit.reference.reproduce as rep
    from simkit.app.options import RunOptions

    real, real_model = app_predict.predict, rep.predict_model
    monkeypatch.setattr(app_predict, "predict", lambda *a, **kw: dataclasses.replace(
        real(*a, **kw), skipped={"prompt_over_max_model_len": 3, "empty_output": 0}))
    code, out, _ = run(capsys, "sweep", "--model", "llama-3.1-8b", "--corpus", "code-edit",
                       "--configs", "vanilla", "--num-requests", "64", "--seeds", "1",
                       "--workers", "1", "--out", str(tmp_path / "sw"))
    assert code == 0
    assert "skipped profile requests in llama-3.1-8b/code-edit: prompt_over_max_model_len 3" \
        in out.splitlines()
    monkeypatch.setattr(rep, "predict_model", lambda *a, **kw: {
        **real_model(*a, **kw), "skipped": {"exceeds_kv_capacity": 2}})
    res = rep.reproduce(RunOptions(seeds=1, num_requests=64, workers=1),
                        models=["llama-3.1-8b"])
    assert "skipped profile requests (never run): llama-3.1-8b: exceeds_kv_capacity 2" \
        in res.notes


# -- 3. a fit's step count equals the distinct steps --------------------------------------------

@settings(max_examples=5, deadline=None)
@given(copies=st.integers(1, 3), seed=st.integers(0, 100))
def test_a_fit_counts_each_step_once(tmp_path_factory, copies, seed):
    from simkit.costmodel.fit import fit_calibration
    from simkit.errors import InputError

    root = tmp_path_factory.mktemp("rec")
    distinct = record_folder(root, copies, seed)
    try:
        doc = fit_calibration(root, "t", "h200", n_splits=3)
    except InputError as exc:
        assert copies > 1 and "run_id" in str(exc)
        return
    assert copies == 1 and doc["n_steps"] == distinct


def test_calibrate_fit_refuses_a_folder_holding_the_same_runs_twice(capsys, tmp_path):
    """It fitted on doubled steps with no warning; validate refuses the same folder."""
    record_folder(tmp_path / "rec", 2)
    code, _, err = run(capsys, "calibrate", "fit", "--records", str(tmp_path / "rec"),
                       "--out", str(tmp_path / "fit.json"))
    assert code == 2
    one_line_error(err, "run_id c0", "set1", "runs.parquet", "also in", "set0")
    assert not (tmp_path / "fit.json").exists()


def test_calibrate_fit_refuses_steps_recorded_twice(tmp_path):
    import pandas as pd

    from simkit.costmodel.fit import fit_calibration
    from simkit.errors import InputError

    record_folder(tmp_path / "rec", 1)
    steps = pd.read_parquet(tmp_path / "rec" / "set0" / "steps.parquet")
    steps.to_parquet(tmp_path / "rec" / "set0" / "steps-again.parquet")
    with pytest.raises(InputError, match="also in"):
        fit_calibration(tmp_path / "rec", "t", "h200", n_splits=3)


# -- 4. calibrate plan writes only commands `calibrate run` accepts ----------------------------

def test_calibrate_plan_refuses_a_model_calibrate_run_cannot_serve(capsys, tmp_path):
    """It planned '1 engine, 12.6 of 15 GPU-minutes' and wrote a run command that then failed."""
    code, _, err = run(capsys, "calibrate", "plan", "--model", "llama-3.1-405b-fp8", "--out",
                       str(tmp_path / "plan.sh"))
    assert code == 2
    one_line_error(err, "model", "llama-3.1-405b-fp8", "llama-3.1-8b")
    assert not (tmp_path / "plan.sh").exists()


def test_calibrate_plan_says_how_many_gpus_an_engine_holds(capsys):
    code, out, _ = run(capsys, "calibrate", "plan", "--model", "llama-3.1-70b")
    assert code == 0
    text = " ".join(out.split())
    assert "TP 2 (2 GPUs per engine" in text and " --tp 2 " in out


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-32b"])
def test_calibrate_plan_runs_each_model_at_the_tp_predict_chooses(capsys, tmp_path, model):
    from calibrate.model_configs import canonical
    from simkit.commands.calibration import run as run_command
    from simkit.costmodel import load_cost_model
    import inspect

    tp = load_cost_model(model, "h200").tp
    code, out, _ = run(capsys, "calibrate", "plan", "--model", model, "--format", "json",
                       "--budget-min", "40")
    assert code == 0
    doc = json.loads(out)
    assert doc["tp"] == tp and doc["engines"]
    assert doc["estimated_gpu_s"] == pytest.approx(doc["estimated_s"] * tp, abs=0.2)
    assert doc["estimated_gpu_s"] <= 40 * 60
    options = set(inspect.signature(run_command).parameters)
    for line in doc["commands"]:
        words = line.split()
        assert canonical(words[words.index("--model") + 1]) == model
        assert (("--tp" in words and int(words[words.index("--tp") + 1]) == tp)
                or ("--tp" not in words and tp == 1))
        flags = {w[2:].replace("-", "_") for w in words if w.startswith("--")}
        assert flags <= options | {"runs"}, flags - options


# -- 5. an open loop past saturation is reported as overloaded, never as steady ----------------

def _saturating_cell():
    from engine_doubles import LinearCost, make_table
    from simkit.engine.config import EngineConfig
    from simkit.engine.workload import Workload

    tab = make_table([64, 80, 48, 96] * 4, [40, 30, 50, 20] * 4, lambda r, t, k: 1,
                     lambda r, t, k: k, kmax=4)
    return Workload.from_table(tab, name="t/t"), LinearCost(), EngineConfig(max_num_seqs=16)


@settings(max_examples=12, deadline=None)
@given(factor=st.sampled_from([0.25, 0.4, 2.0, 4.0, 20.0]), seed=st.integers(0, 50),
       spec=st.sampled_from(["vanilla", "kpad"]))
def test_an_open_loop_past_saturation_is_overloaded_not_steady(factor, seed, spec):
    from simkit.engine.config import kpad, vanilla
    from simkit.engine.sim import ClosedLoop, OpenLoop, simulate

    w, cost, cfg = _saturating_cell()
    s = vanilla() if spec == "vanilla" else kpad(2)
    # the rate the server sustains: every slot busy, closed loop at max_num_seqs
    cap = simulate(w, cost, cfg, s, load=ClosedLoop(16), seed=seed,
                   num_requests=400).metrics.request_throughput
    m = simulate(w, cost, cfg, s, load=OpenLoop(rate=factor * cap), seed=seed,
                 num_requests=400).metrics
    assert m.window_kind == ("overloaded" if factor > 1 else "steady"), (factor, cap)


def test_an_overloaded_open_loop_ranks_no_config(capsys):
    """--request-rate 1000 read as a steady 1,004 tok/s and 'run suffix: +38.9 %'."""
    code, out, _ = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--configs", "vanilla,suffix", "--seeds", "1", "--num-requests", "512",
                       "--request-rate", "1000", "--workers", "1", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["recommendation"]["config"] is None and doc["best_config"] is None
    assert doc["recommendation"]["line"].startswith("none: vanilla, suffix are overloaded at "
                                                    "1000 req/s")
    assert doc["steady_window"] is False and doc["suggested_num_requests"] is None
    assert doc["assumptions"]["steady_window"]["text"].startswith("OVERLOADED at 1000 req/s")
    assert "run suffix" not in out


# -- 6. delivered throughput, never offered load, in every per-GPU and cost figure ------------

@pytest.mark.parametrize("rate,replicas", [(200, 1), (5, 2)])
@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_fleet_per_gpu_and_cost_figures_are_of_delivered_tokens(capsys, rate, replicas):
    """--replicas 1 --rate 200 printed 81,091 tok/s per GPU while the replica served 9,970,
    and priced the tokens from the offered load (about 8x too cheap)."""
    code, out, _ = run(capsys, "fleet", "plan", "--replicas", str(replicas), "--rate", str(rate),
                       "--duration", "10", "--policies", "round-robin", "--configs", "vanilla",
                       "--gpu-hour-price", "3", "--workers", "1", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    offered = doc["fleet"]["offered_out_tok_s"]
    for r in doc["rows"]:
        delivered = sum(p["out_tok_s"] for p in r["per_replica"])
        assert r["tok_s_per_gpu"] == pytest.approx(delivered / r["gpus"], rel=1e-5)
        assert r["usd_per_m_tok"] == pytest.approx(3 * r["gpus"] / (delivered * 3600) * 1e6,
                                                   rel=1e-5)
        behind = delivered < 0.9 * offered
        assert ("falls behind its traffic" in r["note"]) == behind
    if rate == 200:
        assert all("falls behind" in r["note"] for r in doc["rows"])


# -- 7. vLLM's context limit; drafts cut to the step's token budget, and mean K says so -------

def test_models_show_refuses_a_context_the_model_does_not_have(capsys):
    """It planned TP for max_model_len 200,000 on a 131,072-token model (vLLM refuses it)."""
    code, _, err = run(capsys, "models", "show", "llama-3.1-8b", "--max-model-len", "200000")
    assert code == 2
    one_line_error(err, "max-model-len", "200,000", "max_position_embeddings=131,072")


@FAST
@given(data=st.data())
def test_every_catalogue_model_refuses_only_contexts_past_its_own(data):
    from simkit.catalog.models import get_model, list_models
    from simkit.errors import InputError
    from simkit.serving_checks import check_context

    spec = get_model(data.draw(st.sampled_from(list_models())))
    top = spec.max_position_embeddings
    if not top:
        return
    check_context(spec, data.draw(st.integers(1, top)))
    with pytest.raises(InputError, match="derived max_model_len"):
        check_context(spec, data.draw(st.integers(top + 1, 4 * top)))


@settings(max_examples=15, deadline=None)
@given(budget=st.integers(2, 40), k=st.integers(1, 24), pad=st.booleans(),
       seed=st.integers(0, 20))
def test_no_step_schedules_more_drafts_than_its_token_budget(budget, k, pad, seed):
    from engine_doubles import LinearCost, make_table
    from simkit.engine.config import EngineConfig, SpecConfig, kpad
    from simkit.engine.sim import ClosedLoop, simulate
    from simkit.engine.workload import Workload

    tab = make_table([20, 40, 30, 25], [60, 50, 70, 40], lambda r, t, kk: kk // 2,
                     lambda r, t, kk: kk, kmax=24)
    w = Workload.from_table(tab, name="t/t")
    cfg = EngineConfig(max_num_batched_tokens=budget, max_num_seqs=min(budget, 4))
    spec = kpad(k) if pad else SpecConfig(name="suffix", drafter="suffix", k=k)
    res = simulate(w, LinearCost(), cfg, spec, load=ClosedLoop(4), seed=seed, num_requests=12,
                   keep_steps=True)
    for desc, _ in res.step_log:
        assert desc.num_tokens <= budget
        assert desc.num_spec_tokens <= desc.num_tokens - desc.num_decode_reqs
    assert res.metrics.mean_k <= min(k, budget - 1) + 1e-9


def test_predict_mean_k_reports_the_drafts_the_budget_allowed(capsys):
    """--max-num-batched-tokens 16 --configs suffix reported mean K 24 where 15 fit a step."""
    code, out, _ = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--max-num-batched-tokens", "16", "--max-num-seqs", "16", "--configs",
                       "vanilla,suffix", "--seeds", "1", "--num-requests", "64", "--workers", "1",
                       "--format", "json")
    assert code == 0
    suffix = next(r for r in json.loads(out)["results"] if r["config"] == "suffix")
    assert suffix["k"] == 24 and suffix["mean_k"] == pytest.approx(15.0)

