"""The calibration harness on vLLM 0.34 (issue 39), its pure parts: version detection and the
nearest-version fallback, the adapters' engine and request arguments, output indexing by
req_ids, the 0.34 runner flags, runner detection, the run row and the optional run columns."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from calibrate.harness import HARNESS_BY_VERSION, get_adapter
from calibrate.harness.flags import RunnerFlags, k_table_text, parse_k_table
from calibrate.harness.versions import choose, choose_installed
from calibrate.model_output import accepted_tokens, sampled_by_request
from calibrate.recorder import accepted_in_output, runner_kind
from calibrate.runner import (ADAPTIVE_SLOTS, NO_REAL_DRAFTS, RunSpec, check_config, graph_sizes, run_row,
                              speculative_config)
from simkit.catalog.nearest_version import release_key, resolve_vllm_version
from simkit.catalog.vllm_versions import VERSIONS
from simkit.errors import InputError, SimkitError, UnknownNameError

NEWEST = max(VERSIONS, key=lambda k: tuple(map(int, k.split("."))))


# -- versions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, key", [("0.34.0", "0.34"), ("v0.35.1", "0.35"),
                                       ("0.34.0+cu130", "0.34"), ("0.33", "0.33"),
                                       ("", ""), ("latest", ""), (None, "")])
def test_release_key(text, key):
    assert release_key(text) == key


def test_a_known_version_resolves_to_itself_without_a_warning():
    r = resolve_vllm_version("0.33.0")
    assert r.key == "0.33" and r.rules.key == "0.33" and r.exact and r.warning == ""


def test_a_newer_version_gets_the_newest_rules_with_a_warning_naming_both():
    r = resolve_vllm_version("0.99.0")
    assert r.key == "0.99" and r.rules.key == NEWEST and not r.exact
    assert "0.99" in r.warning and VERSIONS[NEWEST].label in r.warning


@pytest.mark.parametrize("text", ["0.30.0", "0.10", "nightly"])
def test_an_older_in_between_or_unreadable_version_is_refused(text):
    with pytest.raises(UnknownNameError, match="vLLM version"):
        resolve_vllm_version(text)


def test_a_release_the_harness_knows_resolves_to_the_rules_at_or_below_it():
    """0.34 is known to the harness; until the catalogue has its rules it runs on 0.33's, said."""
    r = resolve_vllm_version("0.34.0", tuple(HARNESS_BY_VERSION))
    assert r.key == "0.34"
    if "0.34" in VERSIONS:
        assert r.exact and r.rules.key == "0.34"
    else:
        assert r.rules.key == "0.33" and "0.34" in r.warning and "vLLM 0.33.0" in r.warning


@pytest.mark.parametrize("release, adapter", [("0.26.0", "forcing"), ("0.33.0", "forcing"),
                                              ("0.34.0", "trace_replay")])
def test_each_release_gets_its_harness_adapter(release, adapter):
    assert choose(release).adapter == adapter


def test_a_newer_release_than_the_harness_knows_is_driven_as_the_newest_and_says_so():
    c = choose("0.35.2")
    assert c.adapter == "trace_replay" and c.key == "0.35"
    assert "vLLM 0.35 is driven as 0.34 is (trace_replay)" in c.warning


def test_the_harness_a_release_gets_is_the_catalogues():
    """The adapter comes from VllmVersion.harness_adapter (one place); a newer release is driven
    as the nearest known one is, with a warning saying so."""
    from simkit.catalog.vllm_versions import VERSIONS

    for key, v in VERSIONS.items():
        assert choose(v.release).adapter == v.harness_adapter and not choose(v.release).warning
    newest = max(VERSIONS.values(), key=lambda v: tuple(map(int, v.key.split("."))))
    later = choose("9.1.0")
    assert later.adapter == newest.harness_adapter and f"driven as {newest.key}" in later.warning


def test_no_installed_vllm_is_one_clear_error(monkeypatch):
    import calibrate.harness.versions as hv

    monkeypatch.setattr(hv, "installed_vllm_release", lambda: None)
    with pytest.raises(SimkitError, match="vLLM is not installed here"):
        choose_installed()
    monkeypatch.setattr(hv, "installed_vllm_release", lambda: "0.34.0")
    assert choose_installed().adapter == "trace_replay"


def test_the_installed_release_is_read_without_importing_vllm(monkeypatch):
    """The metadata lookup names the distribution; vLLM itself is never imported."""
    import sys
    from importlib import metadata

    import calibrate.harness.versions as hv

    asked = []
    monkeypatch.setattr(metadata, "version", lambda name: asked.append(name) or "0.34.0")
    assert hv.installed_vllm_release() == "0.34.0" and asked == ["vllm"]
    assert "vllm" not in sys.modules


# -- adapters ---------------------------------------------------------------------------------
def test_trace_replay_puts_the_trace_on_every_request_and_turns_replay_on():
    a = get_adapter("trace_replay")
    kw = a.sampling_kwargs(np.array([5, 0, 7], dtype=np.int64))
    assert kw == {"trace_decode_token_ids": [5, 0, 7]}
    assert all(type(t) is int for t in kw["trace_decode_token_ids"])   # vLLM checks isinstance int
    assert a.engine_kwargs() == {"enable_trace_replay": True}
    assert a.scheduler_cls("kpad") is None and a.scheduler_cls("dynamic") is None
    assert not a.forces_logits and a.draft_count == "slots"


def test_forcing_keeps_the_plugins_and_adds_nothing_to_requests():
    a = get_adapter("forcing")
    assert a.sampling_kwargs([1, 2]) == {} and a.engine_kwargs() == {}
    assert a.scheduler_cls("kpad") == "calibrate.kpad.KPadScheduler"
    assert a.forces_logits and a.draft_count == "drafts"


def test_unknown_adapter_names_the_known_ones():
    with pytest.raises(ValueError, match="forcing, trace_replay"):
        get_adapter("synthetic")


def test_on_034_kpad_is_suffix_at_k_and_dynamic_k_is_the_engines_table():
    a = get_adapter("trace_replay")
    assert a.ran_config("kpad") == "suffix" and a.ran_config("suffix") == "suffix"
    assert speculative_config("kpad", 8, a) == {"method": "suffix", "num_speculative_tokens": 8}
    table = parse_k_table("1-8:16,9-64:8,65-1024:4")
    spec = speculative_config("dynamic", 0, a, RunnerFlags(k_table=table))
    assert spec == {"method": "suffix", "num_speculative_tokens": 16,
                    "num_speculative_tokens_per_batch_size": [[1, 8, 16], [9, 64, 8],
                                                              [65, 1024, 4]]}
    spec = speculative_config("suffix", 8, a, RunnerFlags(corpus_tokens=0, adaptive=True))
    assert spec == {"method": "suffix", "num_speculative_tokens": 8,
                    "suffix_decoding_corpus_tokens": 0, "enable_adaptive_verification": True}


@pytest.mark.parametrize("adapter, config, k, flags, field", [
    ("trace_replay", "dynamic", 0, RunnerFlags(), "k-table"),
    ("trace_replay", "vanilla", 0, RunnerFlags(adaptive=True), "config"),
    ("trace_replay", "kpad", 0, RunnerFlags(), "k"),
    ("forcing", "suffix", 8, RunnerFlags(adaptive=True), "adaptive"),
    ("forcing", "suffix", 8, RunnerFlags(corpus_tokens=0), "corpus-tokens"),
    ("forcing", "dynamic", 0, RunnerFlags(), "k"),
    ("forcing", "eagle", 4, RunnerFlags(), "config"),
])
def test_what_a_version_cannot_run_is_refused_before_an_engine(adapter, config, k, flags, field):
    with pytest.raises(InputError) as exc:
        check_config(config, k, get_adapter(adapter), flags)
    assert exc.value.field == field


def test_trace_replay_empties_the_gpu_corpus_between_runs():
    calls = []
    runner = SimpleNamespace(speculator=SimpleNamespace(reset_state=lambda: calls.append(1)))
    assert get_adapter("trace_replay").reset_drafter(runner, None) == [] and calls == [1]
    assert get_adapter("trace_replay").reset_drafter(SimpleNamespace(speculator=None), None) == []
    notes = get_adapter("trace_replay").reset_drafter(
        SimpleNamespace(speculator=SimpleNamespace()), None)
    assert notes and "kept between runs" in notes[0]        # said, not silently skipped


# -- runner flags -----------------------------------------------------------------------------
def test_k_table_round_trips():
    t = parse_k_table(" 1-8:16, 9-64:8 ,65-1024:4")
    assert t == ((1, 8, 16), (9, 64, 8), (65, 1024, 4))
    assert parse_k_table(k_table_text(t)) == t
    assert parse_k_table("1:8,2-4:4") == ((1, 1, 8), (2, 4, 4))


@pytest.mark.parametrize("text, says", [
    ("2-8:16", "start right after 0"), ("1-8:16,10-64:8", "start right after 8"),
    ("1-8:16,8-64:8", "start right after 8"), ("1-8", "START-END:K"), ("a-b:c", "START-END:K"),
    ("8-1:4", "START <= END"), ("1-8:-1", "K must be >= 0"), ("", "at least one")])
def test_bad_k_tables_are_refused_naming_the_option(text, says):
    with pytest.raises(InputError, match=says) as exc:
        parse_k_table(text)
    assert exc.value.field == "k-table"


def test_flags_name_the_run_and_check_the_corpus_size():
    assert RunnerFlags().tag() == "" and not RunnerFlags().any
    assert RunnerFlags(corpus_tokens=0, k_table=((1, 4, 8),), adaptive=True).tag() == "kt-av-ct0"
    with pytest.raises(InputError) as exc:
        RunnerFlags(corpus_tokens=2 ** 31)
    assert exc.value.field == "corpus-tokens"


# -- output indexing --------------------------------------------------------------------------
def test_034_outputs_are_indexed_by_req_ids():
    """0.34's ModelRunnerOutput has req_ids and no req_id_to_index: the accepted tokens are
    counted from req_ids (before the fix this output counted 0)."""
    sched = SimpleNamespace(scheduled_spec_decode_tokens={"a": [-1] * 4, "b": [-1] * 4, "c": []})
    out = SimpleNamespace(req_ids=["c", "b", "a"], sampled_token_ids=[[1], [2, 3, 4], [5, 6]])
    assert sampled_by_request(out) == {"c": [1], "b": [2, 3, 4], "a": [5, 6]}
    assert accepted_in_output(sched, out) == 2 + 1


def test_033_outputs_keep_their_index_and_an_output_with_neither_is_an_error():
    out = SimpleNamespace(req_ids=["x", "y"], req_id_to_index={"x": 1, "y": 0},
                          sampled_token_ids=[[1, 2], [3]])
    assert sampled_by_request(out) == {"x": [3], "y": [1, 2]}
    assert accepted_tokens({"y": [7]}, out) == 1
    with pytest.raises(AttributeError, match="neither req_id_to_index nor req_ids"):
        sampled_by_request(SimpleNamespace(sampled_token_ids=[[1]]))
    assert sampled_by_request(SimpleNamespace(sampled_token_ids=None)) == {}


# -- runner detection -------------------------------------------------------------------------
def _runner_of(module: str):
    cls = type("GPUModelRunner", (), {"__module__": module})
    return cls()


def test_runner_kind_reads_the_runner_class_not_its_methods():
    v2 = _runner_of("vllm.v1.worker.gpu.model_runner")
    v2._model_forward = lambda: None            # a V1-looking method does not make it V1
    assert runner_kind(v2) == "v2"
    assert runner_kind(_runner_of("vllm.v1.worker.gpu_model_runner")) == "v1"
    sub = type("PlatformRunner", (type(v2),), {"__module__": "vllm_plugin.runner"})
    assert runner_kind(sub()) == "v2"
    with pytest.raises(RuntimeError, match="unknown vLLM model runner"):
        runner_kind(_runner_of("vllm.v2.runner"))


# -- run rows ---------------------------------------------------------------------------------
def test_graph_sizes_are_recorded_where_the_vllm_has_them():
    cc = SimpleNamespace(prefill_cudagraph_capture_token_sizes=[512, 8, 16],
                         decode_cudagraph_capture_request_sizes=[4, 1, 2])
    assert json.loads(graph_sizes(cc)) == {"prefill_tokens": [8, 16, 512],
                                           "decode_requests": [1, 2, 4]}
    assert graph_sizes(SimpleNamespace(cudagraph_capture_sizes=[1, 2])) == ""


def test_a_trace_replay_run_row_says_what_its_draft_columns_count():
    rows = [{"t_end_s": t, "num_emitted_tokens": 3, "num_drafting_reqs": 0, "num_spec_tokens": 8,
             "num_pad_drafts": 8, "num_accepted": 1} for t in (0.1, 0.2, 0.3, 0.4)]
    res = {"rows": rows, "completions": [0.15], "last_admission": 0.35, "end": 0.4,
           "mismatched": [], "output_tokens": 12, "force_error": ""}
    settings = dict.fromkeys(("k", "tp", "vllm_version", "runner", "async_scheduling",
                              "cudagraph_mode", "capture_sizes", "drafter_params", "gpu",
                              "driver", "max_num_seqs", "max_num_batched_tokens",
                              "max_model_len", "gpu_memory_utilization", "prefix_caching",
                              "scheduler_cls", "engine_start_s"))
    settings.update(harness="trace_replay", draft_count="slots", graph_sizes="{}")
    row = run_row("x", RunSpec("chat", 2, 4), settings, res, "m", "suffix", 1024, {}, True, "",
                  "trace-replay")
    assert row["force_copy"] == "trace-replay" and row["forced"] and row["outputs_match_trace"]
    assert (row["harness"], row["draft_count"], row["graph_sizes"]) == ("trace_replay", "slots",
                                                                        "{}")
    assert row["notes"] == NO_REAL_DRAFTS
    assert row["num_draft_tokens"] == 32 and row["num_drafts"] == 0
    vanilla = run_row("x", RunSpec("chat", 2, 4), settings, res, "m", "vanilla", 1024, {}, True,
                      "", "trace-replay")
    assert vanilla["notes"] == ""
    settings["drafter_params"] = json.dumps({"enable_adaptive_verification": True})
    adaptive = run_row("x", RunSpec("chat", 2, 4), settings, res, "m", "suffix", 1024, {}, True,
                       "", "trace-replay")
    assert adaptive["notes"] == f"{NO_REAL_DRAFTS}; {ADAPTIVE_SLOTS}"


def test_merge_writes_the_034_columns_only_when_a_run_has_them(tmp_path):
    """Older records merged alone keep exactly RUN_COLUMNS; merged with a 0.34 run they read ""
    in the three new columns (written, never a guess)."""
    import pandas as pd

    from calibrate.merge import merge
    from calibrate.records import write_steps
    from simkit.record_schema import OPTIONAL_RUN_COLUMNS, RUN_COLUMNS, STEP_COLUMNS

    root = Path(__file__).resolve().parents[2]
    base = pd.read_parquet(root / "calibrate/data/vllm-0.33/runs.parquet").head(2).to_dict("records")
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, rows in ((old, base[:1]), (new, base[1:])):
        folder.mkdir()
        if folder is new:
            rows = [{**rows[0], "harness": "trace_replay", "graph_sizes": "{}",
                     "draft_count": "slots"}]
        (folder / "runs.jsonl").write_text("".join(json.dumps(r, default=str) + "\n"
                                                   for r in rows))
        step = {c: 0 for c in STEP_COLUMNS}
        step.update(run_id=rows[0]["run_id"], graph_mode="FULL")
        write_steps(folder / f"steps_{rows[0]['run_id']}.parquet", [step])
    merge([old], tmp_path / "a")
    assert list(pd.read_parquet(tmp_path / "a" / "runs.parquet").columns) == list(RUN_COLUMNS)
    merge([old, new], tmp_path / "b")
    got = pd.read_parquet(tmp_path / "b" / "runs.parquet")
    assert list(got.columns) == [*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS]
    by_id = got.set_index("run_id")
    assert by_id.loc[base[0]["run_id"], "draft_count"] == ""
    assert by_id.loc[base[1]["run_id"], "draft_count"] == "slots"


def test_the_recorder_times_034_drafting_at_the_speculators_propose(monkeypatch):
    """On Model Runner V2 with a speculator (0.34 suffix) the host time of speculator.propose
    lands in t_draft; no forcing proxy is installed when the harness does not force (trace
    replay). vLLM's runner module is stood in for by the two names the recorder patches there."""
    import sys
    import time
    import types

    from calibrate.recorder import StepRecorder, _Step

    mr = types.ModuleType("vllm.v1.worker.gpu.model_runner")
    mr.set_forward_context = lambda *a, **k: None
    mr.dispatch_cg_and_sync_dp = lambda *a, **k: (SimpleNamespace(cg_mode="FULL", num_tokens=1),
                                                   None)
    for name in ("vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, mr.__name__, mr)

    def propose(*a, **k):
        time.sleep(0.01)
        return "drafts"

    runner = _runner_of("vllm.v1.worker.gpu.model_runner")
    runner.execute_model = runner.sample_tokens = runner.sample = lambda *a, **k: None
    runner.model = SimpleNamespace(compute_logits=lambda *a, **k: None)
    runner.sampler = object()
    runner.speculator = SimpleNamespace(propose=propose)
    rec = StepRecorder(forced=None)
    rec._install_v2(runner)
    assert runner.sampler.__class__ is object               # not wrapped: nothing to force
    rec.active, rec._cur = True, _Step(t_start=0.0)
    assert runner.speculator.propose() == "drafts"
    assert rec._cur.t_draft >= 0.01
    rec.active = False                                         # outside a run: not counted
    before = rec._cur.t_draft
    runner.speculator.propose()
    assert rec._cur.t_draft == before


@pytest.mark.parametrize("flags", [[], ["--adaptive", "--k-table", "1-8:8,9-1024:4",
                                        "--corpus-tokens", "4096"]])
def test_the_runner_module_parses_its_flags_and_stops_at_the_missing_vllm(flags, tmp_path, capsys,
                                                                          monkeypatch):
    """`python -m calibrate.runner` (what session.sh starts on the GPU host) reads every flag it
    declares and refuses in one line, before any engine, where no vLLM is installed (a flag read
    under another name than it was declared under stopped every run with an AttributeError)."""
    import calibrate.harness.versions as versions
    from calibrate import runner

    monkeypatch.setattr(versions, "installed_vllm_release", lambda: None)
    code = runner.main(["--model", "llama-3.1-8b", "--config", "suffix", "--k", "8",
                        "--runs", "chat:8:8:calibration", "--out", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: vLLM is not installed here"), err


def test_the_dynamic_k_table_tuner_imports():
    """calibrate.dynk_tables (run before a dynamic-K sitting) imports: it named a constant that
    moved to calibrate.forcing."""
    import importlib

    assert importlib.import_module("calibrate.dynk_tables").FORCE_COPY
