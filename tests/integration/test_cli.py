"""The CLI's contract, through its console entry point (simkit.cli.main): every command and
subcommand answers --help with exit 0; bad input is one `error:` line on stderr and exit 2
(README, "Failure behaviour you can rely on"); a what-if with a failed point exits 1 after
printing the rest; the JSON documents of predict and the what-ifs and the sweep's table keep
their documented keys."""

from __future__ import annotations

import json

import pytest
import typer

from simkit import __version__
from simkit.cli import app, main

SMALL = ["--seeds", "1", "--num-requests", "48"]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `simkit ARGV` through the console entry point."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else int(code)), out, err


def _paths(cmd=None, path=()):
    """Every command path of the app, groups included: (), ('whatif',), ('whatif', 'host')..."""
    cmd = cmd or typer.main.get_command(app)
    yield path
    if hasattr(cmd, "list_commands"):
        ctx = cmd.make_context(path[-1] if path else "simkit", [], resilient_parsing=True)
        for name in cmd.list_commands(ctx):
            yield from _paths(cmd.get_command(ctx, name), (*path, name))


PATHS = list(_paths())


def test_version_prints_package_version(capsys):
    code, out, _ = _run(["version"], capsys)
    assert code == 0 and out.strip() == __version__


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "simkit" for p in PATHS])
def test_every_help_exits_0(path, capsys):
    code, out, err = _run([*path, "--help"], capsys)
    assert code == 0, err
    assert "Usage" in out and out.count("Usage") == 1


def test_a_bare_group_prints_its_help_once_and_exits_2(capsys):
    code, out, _ = _run(["whatif"], capsys)
    assert code == 2 and out.count("Usage") == 1 and "capacity" in out


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv, says", [
    (["predict", "--model", "nope", "--corpus", "mix"], "unknown model 'nope'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "nope"], "unknown corpus 'nope'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--configs", "kpad:0"],
     "K must be in 1..64"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--configs", "suffix:0"],
     "K must be in 1..64"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--seeds", "abc"],
     "Invalid value for '--seeds'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--bogus"],
     "No such option: --bogus"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--format", "xml"],
     "'xml' is not one of 'table', 'json', 'csv'"),          # Typer's refusal of an Enum value
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--capped-outputs", "cut"],
     "'cut' is not one of 'keep', 'extend'"),
    (["sweep", "--out", "x", "--executor", "slurm"], "'slurm' is not one of 'local', 'ray'"),
    (["validate", "--ordering", "random"], "'random' is not one of 'sequential', 'concurrent'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--seeds", "0"], "must be >= 1"),
    (["sweep", "--out", "x", "--model", "nope"], "unknown model 'nope'"),
    (["whatif", "host", "--model", "nope"], "unknown model 'nope'"),
    (["whatif", "concurrency", "--levels", "0,4"], "concurrency levels must be >= 1"),
    (["whatif", "host", "--num-requests", "0"], "must be >= 1"),
    (["whatif", "capacity", "--format", "xml"], "'xml' is not one of 'table', 'json'"),
    (["validate", "--run-id", "no-such-run"], "unknown run id"),
    (["traces", "list", "--format", "xml"], "'xml' is not one of 'table', 'json'"),
    (["traces", "import", "log.jsonl", "--format", "csv", "--name", "mine", "--tokenizer", "qwen"],
     "'csv' is not one of 'openai', 'sharegpt', 'vllm-custom', 'tokens', 'vllm-log'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--calibration", "nope"],
     "unknown calibration 'nope'"),
    (["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--calibration", "analytic",
      "--cost-profile", "analytic"], "give --calibration only"),
    (["whatif", "host", "--calibration", "analytic", "--cost-profile", "analytic"],
     "give --calibration only"),
])
def test_bad_input_is_one_error_line_and_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(argv, capsys)
    assert code == 2, err
    assert says in _one_error_line(err)


def test_a_whatif_with_failed_points_exits_1_after_printing_them(capsys):
    """llama-3.1-70b fits on neither GPU at TP 1: both points fail, each is named."""
    code, out, err = _run(["whatif", "hardware", "--model", "llama-3.1-70b", "--targets",
                           "h100,h200", "--tps", "1", "--format", "json"], capsys)
    assert code == 1
    doc = json.loads(out)
    assert len(doc["failures"]) == 2 and doc["rows"] == []
    assert err.count("failed: ") == 2 and "error: 2 requested point(s) failed" in err


PREDICT_KEYS = ["model", "corpus", "hardware", "tp", "vllm_version", "history", "assumptions", "columns",
                "results", "unavailable", "skipped", "best_config", "best_k", "steady_window",
                "suggested_num_requests", "recommendation"]
ROW_KEYS = ["config", "k", "output_tok_s", "output_tok_s_std", "speedup_vs_vanilla",
            "full_graph_frac", "mean_accepted", "host_frac", "tpot_ms_p50", "ttft_ms_p50",
            "steady_window", "ks", "piecewise_steps_frac", "none_steps_frac", "tokens_per_step",
            "mean_k", "itl_ms_p99", "padded_token_waste", "preemptions", "tpot_ms_p99",
            "ttft_ms_p99"]


def test_predict_json_keys(capsys):
    code, out, err = _run(["predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--source",
                           "shipped", "--configs", "vanilla,kpad:4", "--format", "json", *SMALL],
                          capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == PREDICT_KEYS
    for row in doc["results"]:
        assert list(row) == ROW_KEYS + ["prefix_hit_rate"]
    assert set(doc["recommendation"]) == {"config", "line", "reasons", "settings"}
    code, out, _ = _run(["predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--source",
                         "shipped", "--configs", "vanilla", "--format", "json",
                         "--no-prefix-caching", *SMALL], capsys)
    assert list(json.loads(out)["results"][0]) == ROW_KEYS      # no prefix column when off


@pytest.mark.parametrize("cmd", [
    ["predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--source", "shipped",
     "--configs", "vanilla", "--format", "json", *SMALL],
    ["whatif", "host", "--factors", "1", "--configs", "vanilla", "--num-requests", "48",
     "--format", "json"],
])
def test_cost_profile_is_a_deprecated_alias_of_calibration(cmd, capsys):
    """--cost-profile (the old name) gives what --calibration gives, and warns on stderr only;
    it is hidden from --help, --calibration is listed."""
    code, new, err = _run([*cmd, "--calibration", "analytic"], capsys)
    assert code == 0 and "deprecated" not in err
    code, old, err = _run([*cmd, "--cost-profile", "analytic"], capsys)
    assert code == 0 and old == new
    assert "--cost-profile is deprecated" in err and "use --calibration" in err
    assert "analytic" in json.dumps(json.loads(old))            # the analytic model was used
    _, helptext, _ = _run([*cmd[:2 if cmd[0] == "whatif" else 1], "--help"], capsys)
    assert "--calibration" in helptext and "--cost-profile" not in helptext


WHATIF_KEYS = ["whatif", "question", "params", "columns", "rows", "notes", "extra", "failures"]


@pytest.mark.parametrize("argv", [
    ["host", "--factors", "1", "--configs", "vanilla,kpad:4", "--num-requests", "48"],
    ["concurrency", "--levels", "8", "--configs", "vanilla,kpad:4", "--min-requests", "32"],
])
def test_whatif_json_keys(argv, capsys):
    code, out, err = _run(["whatif", *argv, "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == WHATIF_KEYS
    assert doc["whatif"] == argv[0]
    assert all(list(row) == doc["columns"] for row in doc["rows"])


def test_sweep_writes_its_documented_columns(capsys, tmp_path):
    from simkit.app.sweep import SWEEP_COLUMNS

    out_dir = tmp_path / "sw"
    code, out, err = _run(["sweep", "--out", str(out_dir), "--model", "llama-3.1-8b",
                           "--corpus", "chat", "--source", "shipped", "--configs",
                           "vanilla,kpad:4", *SMALL], capsys)
    assert code == 0, err
    assert out.startswith("1 cells, 2 rows -> ")
    header = (out_dir / "sweep.csv").read_text().splitlines()[0].split(",")
    assert header == list(SWEEP_COLUMNS) == [
        "model", "corpus", "hardware", "tp", "cost_label", "origin", "history", "vllm_version",
        "config", "k",
        "output_tok_s", "output_tok_s_std", "speedup_vs_vanilla", "full_graph_frac",
        "mean_accepted", "tokens_per_step", "host_frac", "tpot_ms_p50", "ttft_ms_p50",
        "itl_ms_p99", "padded_token_waste", "preemptions", "is_best", "is_best_k",
        "steady_window"]
