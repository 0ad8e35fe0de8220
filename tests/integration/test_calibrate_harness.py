"""The GPU harness's pure parts (calibrate/runner.py, calibrate/recorder.py), without vLLM or a
GPU: run specs, vLLM speculative configs, run ids, the per-run row and its steady window, and the
recorder's step rows, held against the committed records in calibrate/data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from calibrate.forcing import FORCE_COPY
from calibrate.kpad import PLACEHOLDER
from calibrate.passes import history_suffix
from calibrate.recorder import StepRecorder, _Step, accepted_in_output, batch_stats
from calibrate.records import Window, step_summary, window_throughput
from calibrate.runner import (DEFAULT_CAP, RunSpec, requests_for, run_row, run_tag,
                              speculative_config, table_file_name)
from simkit.record_schema import RUN_COLUMNS, STEP_COLUMNS
from simkit.errors import InputError
from simkit.history import parse_history

DATA = Path(__file__).resolve().parents[2] / "calibrate" / "data"


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return pd.read_parquet(DATA / "runs.parquet")


@pytest.fixture(scope="module")
def steps() -> pd.DataFrame:
    return pd.read_parquet(DATA / "steps.parquet")


def _recorded(runs, steps):
    """(run row, its step rows) for every committed run."""
    by_run = dict(tuple(steps.groupby("run_id", sort=False)))
    for run in runs.to_dict("records"):
        yield run, by_run[run["run_id"]]


# -- calibrate.runner -------------------------------------------------------------------------
def test_run_spec_parses_defaults_purpose_and_history():
    assert RunSpec.parse("chat:32:64") == RunSpec("chat", 32, 64, "calibration", "cold")
    assert RunSpec.parse("math:32:128:validation:hot") == \
        RunSpec("math", 32, 128, "validation", "hot")
    assert RunSpec.parse("code:32:128:validation:repeat:0.5").history == "repeat:0.5"


@pytest.mark.parametrize("text, says", [("chat:32", "is not corpus:concurrency"),
                                        ("chat:x:64", "must be integers"),
                                        ("chat:0:64", "must be >= 1"),
                                        ("chat:32:64:validation:lukewarm", "run spec")])
def test_bad_run_specs_name_the_option(text, says):
    with pytest.raises(InputError, match=says) as exc:
        RunSpec.parse(text)
    assert exc.value.field == "runs"


def test_speculative_config_is_what_vllm_is_given():
    assert speculative_config("vanilla", 0) is None
    assert speculative_config("suffix", 0) == {"method": "suffix"}        # vLLM's default K
    assert speculative_config("suffix", 8) == {"method": "suffix", "num_speculative_tokens": 8}
    assert speculative_config("kpad", 4) == {"method": "suffix", "num_speculative_tokens": 4}
    with pytest.raises(InputError, match="needs --k >= 1"):
        speculative_config("dynamic", 0)
    with pytest.raises(InputError, match="unknown config"):
        speculative_config("eagle", 4)


def test_run_tag_and_file_names():
    assert run_tag("llama-3.1-8b", "vanilla", 0) == "llama-3.1-8b_vanilla"
    assert run_tag("llama-3.1-70b", "kpad", 4, tp=2) == "llama-3.1-70b_kpad4-tp2"
    assert run_tag("llama-3.1-8b", "vanilla", 0, force=False, extra="r2") == \
        "llama-3.1-8b_vanilla-unforced-r2"
    assert table_file_name("qwen2.5-7b", "code", 32, 128) == "qwen2.5-7b__code__c32_n128.json"


def test_every_recorded_run_id_is_built_from_its_settings(runs):
    for run in runs.to_dict("records"):
        tag = run_tag(run["model"], run["config"], int(run["k"]), int(run["tp"]),
                      bool(run["forced"]))
        rid = run["run_id"]
        assert rid.startswith(tag), (rid, tag)
        cap = int(run["max_tokens_cap"])
        cell = (f"_{run['corpus']}_c{run['concurrency']}_n{run['num_requests']}"
                + (f"_cap{cap}" if cap != DEFAULT_CAP else ""))
        suffix = history_suffix(parse_history(run["history"]))
        # -againN: a second run of one id on one engine (calibrate.runner.unique_id)
        assert re.sub(r"-again\d+$", "", rid).endswith(cell + (f"_{suffix}" if suffix else "")), rid


def test_requests_for_names_what_is_missing(tmp_path):
    one = tmp_path / "one.jsonl"
    assert requests_for("llama-3.1-8b", ["chat"], None, one) == {"chat": one}
    with pytest.raises(InputError, match="serves one corpus"):
        requests_for("llama-3.1-8b", ["chat", "math"], None, one)
    with pytest.raises(InputError, match="--requests FILE or --requests-dir"):
        requests_for("llama-3.1-8b", ["chat"], None, None)
    with pytest.raises(InputError, match="request file not found"):
        requests_for("llama-3.1-8b", ["chat"], tmp_path, None)
    (tmp_path / "llama-3.1-8b__chat.jsonl").write_text("")
    assert requests_for("Llama-3.1-8B-Instruct", ["chat"], tmp_path, None) == \
        {"chat": tmp_path / "llama-3.1-8b__chat.jsonl"}


def test_recorded_throughput_and_totals_follow_from_the_recorded_steps(runs, steps):
    """Every run's output_tokens / output_tok_s are its steps' emitted tokens inside its recorded
    window, and its draft/accept totals are the step sums (window_throughput, step_summary)."""
    for run, s in _recorded(runs, steps):
        w = json.loads(run["window"])
        window = Window(w["t0"], w["t1"], bool(run["steady_state"]), w["rule"])
        tokens, rate = window_throughput(s["t_end_s"].to_numpy(),
                                         s["num_emitted_tokens"].to_numpy(), window)
        assert tokens == run["output_tokens"], run["run_id"]
        assert rate == pytest.approx(run["output_tok_s"], rel=1e-6), run["run_id"]
        summary = step_summary(s.to_dict("records"))
        assert summary == {k: run[k] for k in summary}, run["run_id"]


def test_run_row_rebuilds_a_recorded_run(runs, steps):
    """run_row on a recorded run's steps, with completions and last admission that give its
    recorded window, reproduces the row's measured figures and has every run column but the
    three the runner adds afterwards (history, k_counts) and the settings it copies."""
    settings_keys = ("k", "tp", "vllm_version", "runner", "async_scheduling", "cudagraph_mode",
                     "capture_sizes", "drafter_params", "gpu", "driver", "max_num_seqs",
                     "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization",
                     "prefix_caching", "scheduler_cls", "engine_start_s")
    checked = 0
    for run, s in _recorded(runs, steps):
        if not run["steady_state"] or run["force_copy"] == "none":
            continue
        w = json.loads(run["window"])
        res = {"rows": s.to_dict("records"), "completions": [w["t0"], w["t1"] + 1.0],
               "last_admission": w["t1"], "end": run["total_duration_s"], "mismatched": [],
               "output_tokens": run["total_output_tokens"], "force_error": ""}
        settings = {k: run.get(k) for k in settings_keys}
        spec = RunSpec(run["corpus"], int(run["concurrency"]), int(run["num_requests"]),
                       run["purpose"])
        row = run_row(run["run_id"], spec, settings, res, run["model"], run["config"],
                      int(run["max_tokens_cap"]), json.loads(run["requests_skipped"]), True,
                      run["started_utc"])
        for key in ("output_tokens", "num_steps", "num_drafts", "num_draft_tokens",
                    "num_pad_tokens", "num_accepted_tokens", "steady_state", "max_tokens_cap",
                    "outputs_match_trace", "requests_skipped"):
            assert row[key] == run[key], (run["run_id"], key)
        assert row["output_tok_s"] == pytest.approx(run["output_tok_s"], rel=1e-5)
        assert row["force_copy"] == FORCE_COPY            # the harness's current forcing path
        assert set(RUN_COLUMNS) - set(row) <= {"history", "k_counts"}
        checked += 1
    assert checked >= 100


def test_run_row_says_when_forcing_was_lost_or_outputs_differ():
    rows = [{"t_end_s": t, "num_emitted_tokens": 2, "num_drafting_reqs": 0, "num_spec_tokens": 0,
             "num_pad_drafts": 0, "num_accepted": 0} for t in (0.1, 0.2, 0.3, 0.4)]
    res = {"rows": rows, "completions": [0.15], "last_admission": 0.35, "end": 0.4,
           "mismatched": ["r1"], "output_tokens": 8, "force_error": "RuntimeError: boom"}
    settings = dict.fromkeys(("k", "tp", "vllm_version", "runner", "async_scheduling",
                              "cudagraph_mode", "capture_sizes", "drafter_params", "gpu",
                              "driver", "max_num_seqs", "max_num_batched_tokens",
                              "max_model_len", "gpu_memory_utilization", "prefix_caching",
                              "scheduler_cls", "engine_start_s"))
    row = run_row("x", RunSpec("chat", 2, 4), settings, res, "m", "vanilla", 1024, {}, True, "")
    assert row["forced"] is False and row["force_copy"] == "none"
    assert not row["outputs_match_trace"]
    assert row["notes"] == "forcing disabled: RuntimeError: boom; 1 requests differ from the trace"
    assert row["output_tokens"] == 4 and row["steady_state"]          # steps at 0.2 and 0.3
    assert row["duration_s"] == pytest.approx(0.2)


# -- calibrate.recorder -----------------------------------------------------------------------
def test_batch_stats_counts_a_mixed_batch():
    """a: the last 5 prompt tokens (prefill); b: a decode with one real draft and one -1
    placeholder; c: a decode padded with placeholders only (no real draft)."""
    out = SimpleNamespace(num_scheduled_tokens={"a": 5, "b": 3, "c": 3},
                          scheduled_spec_decode_tokens={"b": [7, PLACEHOLDER],
                                                        "c": [PLACEHOLDER, PLACEHOLDER]},
                          total_num_scheduled_tokens=11)
    reqs = {"a": SimpleNamespace(num_computed_tokens=10, num_prompt_tokens=10),
            "b": SimpleNamespace(num_computed_tokens=23, num_prompt_tokens=12),
            "c": SimpleNamespace(num_computed_tokens=33, num_prompt_tokens=30)}
    assert batch_stats(out, reqs) == {
        "num_reqs": 3, "num_tokens": 11, "num_prefill_tokens": 5, "num_prefill_reqs": 1,
        "num_decode_reqs": 2, "num_spec_tokens": 4, "num_pad_drafts": 3,
        "num_drafting_reqs": 1, "context_tokens": 10 + 23 + 33}


def test_accepted_in_output_counts_tokens_beyond_the_first_of_drafted_requests():
    sched = SimpleNamespace(scheduled_spec_decode_tokens={"a": [1, 2, 3], "b": [], "c": [4]})
    out = SimpleNamespace(sampled_token_ids=[[9, 9, 9], [9], [9]],
                          req_id_to_index={"a": 0, "b": 1, "c": 2})
    assert accepted_in_output(sched, out) == 2
    assert accepted_in_output(sched, SimpleNamespace(sampled_token_ids=None)) == 0


def test_recorder_rows_have_exactly_the_recorded_step_columns(steps):
    rec = StepRecorder()
    rec.start_run("r")
    stats = batch_stats(SimpleNamespace(num_scheduled_tokens={"a": 1},
                                        scheduled_spec_decode_tokens={},
                                        total_num_scheduled_tokens=1),
                        {"a": SimpleNamespace(num_computed_tokens=11, num_prompt_tokens=10)})
    rec._cur = _Step(t_start=rec.t0 + 1.0, t_schedule=0.001, stats=stats, num_emitted=1,
                     graph_mode="FULL", num_padded_tokens=2)
    rec._finish(rec.t0 + 1.5)
    rec._cur = _Step(t_start=rec.t0 + 1.5)                 # idle: nothing scheduled or emitted
    rec._finish(rec.t0 + 1.6)
    rec._cur = _Step(t_start=rec.t0 + 1.6, num_emitted=3)  # async drain: last batch's output
    rec._finish(rec.t0 + 1.7)
    rows = rec.stop_run()
    assert len(rows) == 2
    assert set(rows[0]) == set(STEP_COLUMNS) == set(steps.columns)
    first, drain = rows
    assert first["step"] == 0 and first["t_step_s"] == pytest.approx(0.5)
    assert first["num_padded_tokens"] == 2 and first["graph_mode"] == "FULL"
    assert np.isnan(first["t_forward_s"])                  # no CUDA events without a GPU
    assert drain["num_reqs"] == 0 and drain["num_emitted_tokens"] == 3
    assert drain["num_padded_tokens"] == 0
