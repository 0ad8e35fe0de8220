"""calibrate.runner's engine glue per harness adapter, against a stand-in for vLLM (no GPU here).

The stand-in takes the same calls the runner makes (EngineArgs, LLMEngine.from_engine_args,
add_request with SamplingParams, step, reset_prefix_cache, the runner's speculator) and emits a
request's trace only when the request carried it (as vLLM 0.34's trace replay does); the step
recorder's hooks and the resolved-settings read-out, which need a real engine, are replaced. What
is checked: the engine and request arguments each adapter gives vLLM, the GPU corpus reset before
every run spec, the configuration and run ids recorded, and the run rows' 0.34 columns.
"""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import pytest

from calibrate.harness.flags import RunnerFlags
from calibrate.run_specs import RunSpec


class _Engine:
    """The calls calibrate.runner.Engine makes of an in-process vLLM LLMEngine."""

    def __init__(self, args: dict, log: dict) -> None:
        self.args, self.log, self.queue = args, log, []
        log["engine_args"] = args
        spec = SimpleNamespace(reset_state=lambda: log["resets"].append(len(log["requests"])))
        runner = SimpleNamespace(speculator=spec if args.get("speculative_config") else None)
        worker = SimpleNamespace(worker=SimpleNamespace(model_runner=runner))
        self.engine_core = SimpleNamespace(engine_core=SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=worker), scheduler=SimpleNamespace()))
        self.vllm_config = SimpleNamespace(speculative_config=None)

    def add_request(self, rid, prompt, sp) -> None:
        self.log["requests"].append((rid, sp))
        self.queue.append((rid, sp))

    def has_unfinished_requests(self) -> bool:
        return bool(self.queue)

    def step(self):
        rid, sp = self.queue.pop(0)
        tokens = list(getattr(sp, "trace_decode_token_ids", None) or [])   # replayed, or nothing
        return [SimpleNamespace(finished=True, request_id=rid,
                                outputs=[SimpleNamespace(token_ids=tokens)])]

    def reset_prefix_cache(self) -> bool:
        return True


@pytest.fixture
def fake_vllm(monkeypatch):
    """Stand-in vllm modules; returns the log of what the runner asked of them."""
    log: dict = {"requests": [], "resets": []}

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    vllm = types.ModuleType("vllm")
    vllm.EngineArgs = lambda **kw: kw
    vllm.SamplingParams = SamplingParams
    llm_engine = types.ModuleType("vllm.v1.engine.llm_engine")
    llm_engine.LLMEngine = SimpleNamespace(from_engine_args=lambda args: _Engine(args, log))
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda **kw: kw
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = SimpleNamespace(FINAL_ONLY="final")
    for name, mod in (("vllm", vllm), ("vllm.v1", types.ModuleType("vllm.v1")),
                      ("vllm.v1.engine", types.ModuleType("vllm.v1.engine")),
                      ("vllm.v1.engine.llm_engine", llm_engine), ("vllm.inputs", inputs),
                      ("vllm.sampling_params", sampling)):
        monkeypatch.setitem(sys.modules, name, mod)

    import calibrate.recorder as recorder
    import calibrate.runner as runner

    def install(self, engine):
        sched = engine.args.get("scheduler_cls") or "vllm AsyncScheduler"
        return {"runner": "v2", "scheduler_cls": sched.rsplit(".", 1)[-1], "step_fn": "step"}

    def resolved(engine, config, info):
        spec = engine.args.get("speculative_config") or {}
        return {"k": int(spec.get("num_speculative_tokens", 0)), "tp": 1,
                "vllm_version": "0.34.0", "runner": info["runner"], "async_scheduling": True,
                "cudagraph_mode": "FULL_AND_PIECEWISE", "capture_sizes": "[]",
                "graph_sizes": '{"decode_requests":[1,2],"prefill_tokens":[8]}',
                "drafter_params": json.dumps({k: v for k, v in spec.items() if k != "method"}),
                "gpu": "NVIDIA H200", "driver": "x", "max_num_seqs": 1024,
                "max_num_batched_tokens": 8192, "max_model_len": 16384,
                "gpu_memory_utilization": 0.85, "prefix_caching": True,
                "scheduler_cls": info["scheduler_cls"]}

    monkeypatch.setattr(recorder.StepRecorder, "install", install)
    monkeypatch.setattr(runner, "_resolved", resolved)
    return log


@pytest.fixture
def requests_file(tmp_path):
    p = tmp_path / "llama-3.1-8b__chat.jsonl"
    p.write_text("".join(json.dumps({"id": f"q{i}", "prompt_ids": [1, 2, 3 + i],
                                     "output_ids": [10 + i, 20 + i, 30 + i]}) + "\n"
                         for i in range(12)))
    return p


def test_a_034_engine_replays_the_trace_and_empties_the_corpus_before_each_run(
        fake_vllm, requests_file, tmp_path):
    from calibrate.runner import NO_REAL_DRAFTS, run_engine

    table = ((1, 4, 8), (5, 1024, 4))
    rows = run_engine("llama-3.1-8b", "dynamic", 0,
                      [RunSpec.parse("chat:2:6:validation:hot"), RunSpec.parse("chat:3:5:calibration")],
                      tmp_path / "out", {"chat": requests_file}, harness="trace_replay",
                      flags=RunnerFlags(k_table=table))
    args = fake_vllm["engine_args"]
    assert args["enable_trace_replay"] is True and args["scheduler_cls"] is None
    assert args["speculative_config"] == {"method": "suffix", "num_speculative_tokens": 8,
                                          "num_speculative_tokens_per_batch_size":
                                          [[1, 4, 8], [5, 1024, 4]]}
    # every request, warm-up included, carries its own trace and nothing is forced in logits
    by_id = {json.loads(x)["id"]: json.loads(x)["output_ids"]
             for x in requests_file.read_text().splitlines()}
    for rid, sp in fake_vllm["requests"]:
        assert sp.trace_decode_token_ids == by_id[rid.lstrip("h")]
    # the corpus is emptied before each run spec (after the 4 warm-up requests), not between
    # the passes of a hot run, whose first pass feeds the second
    assert fake_vllm["resets"] == [4, 4 + 6 + 6]
    assert [r["run_id"] for r in rows] == ["llama-3.1-8b_dynamic8-kt_chat_c2_n6",
                                           "llama-3.1-8b_dynamic8-kt_chat_c2_n6_hot",
                                           "llama-3.1-8b_dynamic8-kt_chat_c3_n5"]
    for r in rows:
        assert r["config"] == "dynamic" and r["harness"] == "trace_replay"
        assert r["draft_count"] == "slots" and r["force_copy"] == "trace-replay"
        assert r["outputs_match_trace"] and NO_REAL_DRAFTS in r["notes"]
        assert json.loads(r["drafter_params"])["num_speculative_tokens_per_batch_size"] == \
            [[1, 4, 8], [5, 1024, 4]]
    assert [r["history"] for r in rows] == ["cold", "hot", "cold"]
    assert [r["purpose"] for r in rows] == ["validation", "validation", "calibration"]
    logged = [json.loads(x) for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert [x["run_id"] for x in logged] == [r["run_id"] for r in rows]
    # the work folder merges into records with the 0.34 columns
    import pandas as pd

    from calibrate.merge import merge
    from simkit.record_schema import OPTIONAL_RUN_COLUMNS, RUN_COLUMNS

    assert merge([tmp_path / "out"], tmp_path / "merged") == (3, 0)
    merged = pd.read_parquet(tmp_path / "merged" / "runs.parquet")
    assert list(merged.columns) == [*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS]
    assert set(merged["draft_count"]) == {"slots"} and set(merged["harness"]) == {"trace_replay"}


def test_kpad_on_034_is_recorded_as_suffix_at_k(fake_vllm, requests_file, tmp_path):
    from calibrate.runner import run_engine

    rows = run_engine("llama-3.1-8b", "kpad", 4, [RunSpec.parse("chat:2:3:calibration")],
                      tmp_path / "out", {"chat": requests_file}, harness="trace_replay",
                      flags=RunnerFlags(adaptive=True))
    assert fake_vllm["engine_args"]["scheduler_cls"] is None
    assert fake_vllm["engine_args"]["speculative_config"] == {
        "method": "suffix", "num_speculative_tokens": 4, "enable_adaptive_verification": True}
    assert [(r["run_id"], r["config"]) for r in rows] == [
        ("llama-3.1-8b_suffix4-av_chat_c2_n3", "suffix")]


def test_the_forcing_adapter_keeps_the_plugin_and_puts_no_trace_on_requests(
        fake_vllm, requests_file, tmp_path):
    """0.26/0.33: the K-pad plugin and forced logits; the stand-in does not force logits, so
    its outputs differ from the trace and the run row says so instead of claiming a match."""
    from calibrate.runner import run_engine

    rows = run_engine("llama-3.1-8b", "kpad", 4, [RunSpec.parse("chat:2:3:calibration")],
                      tmp_path / "out", {"chat": requests_file}, harness="forcing")
    args = fake_vllm["engine_args"]
    assert args["scheduler_cls"] == "calibrate.kpad.KPadScheduler"
    assert "enable_trace_replay" not in args
    assert all(not hasattr(sp, "trace_decode_token_ids") for _, sp in fake_vllm["requests"])
    assert fake_vllm["resets"] == []                  # no GPU speculator: arctic's tree reset
    (row,) = rows
    assert row["config"] == "kpad" and row["harness"] == "forcing"
    assert row["draft_count"] == "drafts" and not row["outputs_match_trace"]
    assert "3 requests differ from the trace" in row["notes"]
