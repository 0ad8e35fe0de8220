"""`simkit predict` / `sweep` on the real shipped profiles and the real cost model; config parsing
and the best-K verdict."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from simkit.engine.config import parse_configs
from simkit.app.predict import verdict
from simkit.engine.summary import DETAIL_KEYS, PREFIX_KEY, RESULT_KEYS, Row
from simkit.errors import InputError, UnknownNameError


def test_config_strings_expand_to_the_ladder():
    names = [c.name for c in parse_configs("vanilla,suffix,kpad:4,6,8,12,ngram,dynamic")]
    assert names == ["vanilla", "suffix", "kpad-4", "kpad-6", "kpad-8", "kpad-12", "ngram",
                     "dynamic-table", "dynamic-feedback", "dynamic-goodput"]
    suffix = parse_configs("suffix")[0]
    assert suffix.k == 24 and not suffix.pad and suffix.drafter == "suffix"
    k8 = parse_configs("kpad:8")[0]
    assert k8.k == 8 and k8.pad and k8.k_values == (8,)
    dyn = parse_configs("dynamic-goodput:4,8")[0]
    assert dyn.ks == (4, 8) and dyn.pad and dyn.k == 8
    assert parse_configs("vanilla")[0].async_scheduling
    assert not suffix.async_scheduling


@pytest.mark.parametrize("text, err", [("bogus", UnknownNameError), ("4,kpad", InputError),
                                       ("kpad:x", InputError), ("kpad:0", InputError),
                                       ("dynamic-magic", UnknownNameError), ("", InputError)])
def test_bad_config_strings_are_user_errors(text, err):
    with pytest.raises(err):
        parse_configs(text)


def test_ngram_without_a_table_is_reported_unavailable_not_faked():
    from engine_doubles import make_table
    from simkit.engine.workload import DrafterUnavailable, Workload

    w = Workload.from_table(make_table([5], [4], lambda r, t, k: 0, lambda r, t, k: 1, kmax=4))
    assert w.has_drafter("suffix") and not w.has_drafter("ngram")
    with pytest.raises(DrafterUnavailable, match="only suffix"):
        w.table("ngram")


def _row(name, k, tput, std=1.0, full=0.9, host=0.3):
    return Row(name, k, tput, std, None, full, 2.0, host, 5.0, 50.0, tokens_per_step=3.0)


def test_verdict_names_best_k_and_compares_dynamic():
    rows = [_row("vanilla", 0, 100), _row("kpad-4", 4, 300), _row("kpad-12", 12, 350),
            _row("dynamic-goodput", 12, 340)]
    best, best_k, line, why = verdict(rows)
    assert best == "kpad-12" and best_k == 12
    assert "does not beat best K=12" in line
    assert why.startswith("kpad-12: 90% FULL steps, 3.00 tokens/step, host 30%")
    rows[-1] = _row("dynamic-goodput", 12, 349.5)
    assert "ties" in verdict(rows)[2]


# -- real profiles + real cost model ---------------------------------------------------------
@pytest.fixture
def real_profiles():
    """The shipped/raw profiles (load_profile); a real import, so a broken one fails."""
    import simkit.profiles.corpus_profile

    return simkit.profiles.corpus_profile


def _predict_json(args):
    from simkit.cli import app

    result = CliRunner().invoke(app, ["predict", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return result.output


SMALL = ["--model", "llama-3.1-8b", "--corpus", "mix", "--seeds", "2", "--num-requests", "96",
         "--configs", "vanilla,suffix,kpad:4,12,dynamic-goodput"]


def test_predict_json_keys_and_ladder_on_real_profile(real_profiles):
    doc = json.loads(_predict_json(SMALL + ["--workers", "2"]))
    assert list(doc) == ["model", "corpus", "hardware", "tp", "vllm_version", "history",
                         "assumptions", "columns",
                         "results", "unavailable", "skipped", "best_config", "best_k",
                         "steady_window", "suggested_num_requests", "recommendation"]
    assert doc["steady_window"] is True and doc["suggested_num_requests"] is None   # 96 > 2 x 32
    assert doc["model"] == "llama-3.1-8b" and doc["hardware"] == "h200" and doc["tp"] >= 1
    assert [r["config"] for r in doc["results"]] == ["vanilla", "suffix", "kpad-4", "kpad-12",
                                                     "dynamic-goodput"]
    for r in doc["results"]:
        assert list(r) == [*RESULT_KEYS, *DETAIL_KEYS, PREFIX_KEY]   # prefix caching on
        assert set(r) <= set(doc["columns"])           # every key is explained
        assert r["output_tok_s"] > 0 and r["output_tok_s_std"] >= 0 and r["steady_window"]
    van = doc["results"][0]
    assert van["speedup_vs_vanilla"] == 1.0 and van["mean_accepted"] == 0.0
    kpad4 = doc["results"][2]
    assert kpad4["mean_accepted"] > 0 and kpad4["full_graph_frac"] > 0.5
    assert doc["results"][1]["full_graph_frac"] < kpad4["full_graph_frac"]   # variable drafts
    assert doc["best_k"] in (4, 12)


def test_predict_is_byte_identical_across_runs_and_worker_counts(real_profiles):
    assert _predict_json(SMALL + ["--workers", "1"]) == _predict_json(SMALL + ["--workers", "2"])


# its raw build replays llama-3.1-8b/mix whole (the sample's statistics, once per run in the run's
# cache): on the worker of test_profile_histories.py's raw builds of it, in turn, not at once
@pytest.mark.xdist_group("raw-llama-3.1-8b-mix")
def test_shipped_profile_predicts_what_the_raw_traces_predict(real_profiles):
    """A fresh machine (shipped profiles) gets the figures the raw traces give."""
    from simkit.paths import traces_src_dir

    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) absent")
    args = SMALL + ["--seeds", "1", "--configs", "vanilla,suffix,kpad:8"]
    shipped = json.loads(_predict_json(args + ["--source", "shipped"]))
    raw = json.loads(_predict_json(args + ["--source", "raw"]))
    # the report names where the workload came from; everything else must be identical
    assert shipped["assumptions"]["workload"]["value"].pop("origin") == "shipped"
    assert raw["assumptions"]["workload"]["value"].pop("origin") == "raw-traces"
    for doc in (shipped, raw):
        doc["assumptions"]["workload"].pop("text")
    assert shipped == raw


def test_predict_table_prints_header_and_verdict(real_profiles):
    from simkit.cli import app

    result = CliRunner().invoke(app, ["predict", *SMALL, "--seeds", "1", "--configs",
                                      "vanilla,kpad:4,ngram,dynamic-table"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "llama-3.1-8b" in out and "TP " in out and "calibrated h200-vllm033" in out
    assert "vLLM 0.33" in out.splitlines()[0]
    assert "corpus mix" in out and "best fixed K = 4 (kpad-4" in out
    assert out.index("recommendation: run ") < out.index("vanilla ") < out.index("Legend") \
        < out.index("Assumptions")
    # vLLM 0.33 drafts n-grams on the GPU (Model Runner V2): refused with the reason, not run
    assert not [line for line in out.splitlines() if line.startswith("ngram ")]
    assert "Model Runner V2" in out and "--vllm-version 0.26" in out
    old = CliRunner().invoke(app, ["predict", *SMALL, "--seeds", "1", "--configs",
                                   "vanilla,ngram", "--vllm-version", "0.26"])
    assert old.exit_code == 0, old.output
    ngram_lines = [line for line in old.output.splitlines() if line.startswith("ngram ")]
    assert ngram_lines and "unavailable" not in ngram_lines[0]   # profiles carry n-gram tables


def test_unknown_config_is_one_line_error_exit_2():
    proc = subprocess.run([sys.executable, "-m", "simkit", "predict", "--model", "llama-3.1-8b",
                           "--corpus", "mix", "--configs", "vanilla,warp"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown config 'warp'" in proc.stderr and "Traceback" not in proc.stderr


def test_sweep_writes_table_and_plot(real_profiles, tmp_path):
    import pandas as pd

    from simkit.cli import app

    result = CliRunner().invoke(app, ["sweep", "--model", "llama-3.1-8b,qwen2.5-7b",
                                      "--corpus", "chat,code", "--configs", "vanilla,kpad:4,8",
                                      "--num-requests", "64", "--source", "shipped",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(tmp_path / "sweep.parquet")
    csv = pd.read_csv(tmp_path / "sweep.csv")
    assert len(frame) == len(csv)
    assert (tmp_path / "speedup_per_k.png").stat().st_size > 1000
    done = frame.groupby(["model", "corpus"]).size()
    assert (done == 3).all()
    assert set(frame["config"]) == {"vanilla", "kpad-4", "kpad-8"}
    assert (frame[frame["config"] == "vanilla"]["speedup_vs_vanilla"] == 1.0).all()


def test_suffix_k24_reads_a_column_equal_to_every_column_from_12(real_profiles):
    """K=24 (vLLM's default cap) reads the table's kmax column; under depth 24 and spec factor 1
    a draft never exceeds 12 tokens, so columns 12..kmax must be identical on real tables."""
    from simkit.engine.workload import Workload

    for corpus in ("code", "chat"):
        tab = real_profiles.load_profile("llama-3.1-8b", corpus).table
        assert tab.kmax >= 12 and int(tab.drafted.max()) <= 12
        for k in range(12, tab.kmax + 1):
            assert (tab.drafted[:, k - 1] == tab.drafted[:, 11]).all()
            assert (tab.accepted[:, k - 1] == tab.accepted[:, 11]).all()
        assert Workload.from_table(tab).effective_k("suffix", 24) == tab.kmax
