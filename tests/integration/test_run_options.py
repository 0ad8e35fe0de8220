"""Every run command (predict, sweep, fleet plan, the what-ifs) takes the same shared run
options with the same help and the same defaults (simkit.commands.options, RunOptions), less the
few a command's question varies itself, each named below with its reason; and an option a
what-if newly takes really changes what it simulates."""

from __future__ import annotations

import json

import pytest
import typer

from simkit.app.options import RunOptions
from simkit.cli import app
from simkit.commands.options import NEGATED, OWN_DEFAULT, SHARED

# what each run command leaves out of the shared set, and why (a new gap fails the test)
WITHOUT = {
    ("predict",): {},
    ("sweep",): {},
    ("fleet", "plan"): {"seeds": "one traffic stream (--seed)",
                        "num_requests": "arrivals: --rate x --duration",
                        "concurrency": "open loop: --rate sets the load",
                        "source": "replays the raw traces' own token ids",
                        "history": "each replica's own: the stream routed to it",
                        "capped_outputs": "replays the outputs' own token ids"},
    ("whatif", "capacity"): {"concurrency": "open loop: the request rate sets the load",
                             "num_requests": "the rate sets it (--min/--max-requests)"},
    ("whatif", "concurrency"): {"concurrency": "varied: --levels",
                                "num_requests": "4 x the level (--min-requests)"},
    ("whatif", "hardware"): {"hardware": "varied: --targets", "tp": "varied: --tps"},
    ("whatif", "host"): {},
    ("whatif", "quantization"): {},
    ("whatif", "prefix"): {"prefix_caching": "varied: on and off"},
    ("whatif", "history"): {"history": "varied: --shares, --no-warm"},
    ("whatif", "ktable"): {"concurrency": "varied: --levels",
                           "configs": "the K set: --ks (each suffix:K, 0 = vanilla)",
                           "vllm_version": "vLLM 0.34's setting: no other version has it"},
    ("whatif", "vllm-version"): {"vllm_version": "varied: --from and --to",
                                 "calibration": "each version's own default calibration",
                                 "cost_profile": "each version's own default calibration"},
    ("whatif", "reference"): {n: "the study's own conditions" for n in
                              ("corpus", "tp", "configs", "concurrency", "max_tokens",
                               "capped_outputs", "prefix_caching", "max_num_seqs",
                               "max_num_batched_tokens", "cudagraph_mode")},
}

# a shared option a command defines its own way, and why
OWN_WAY = {("sweep",): {"model": "a grid: several", "corpus": "a grid: several"},
           ("whatif", "reference"): {"model": "the study's models: several",
                                     "history": "one column set per history: several"}}


def _params(path: tuple[str, ...]) -> dict:
    """{parameter name: click parameter} of one command."""
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("simkit", [], resilient_parsing=True)
    for word in path:
        cmd = cmd.get_command(ctx, word)
        ctx = cmd.make_context(word, [], resilient_parsing=True)
    return {p.name: p for p in cmd.get_params(ctx)}


def _shared_info(name: str):
    """The OptionInfo of a shared option's one definition."""
    return SHARED[name].__metadata__[0]


@pytest.mark.parametrize("path", sorted(WITHOUT), ids=" ".join)
def test_every_run_command_takes_the_shared_options(path):
    params = _params(path)
    have = {n for n in SHARED if n in params}
    assert set(SHARED) - have == set(WITHOUT[path]), path
    for name in have - set(OWN_WAY.get(path, {})):
        info = _shared_info(name)
        assert params[name].help == info.help, (path, name)     # the one shared definition
        decls = [d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str)]
        flags = decls[0].split("/")
        assert params[name].opts == [flags[0]], (path, name)
        if name in NEGATED:                      # a negative flag: not given = the setting on
            assert params[name].default is (not getattr(RunOptions, name)), (path, name)
        elif name not in OWN_DEFAULT and name != "cost_profile":
            assert params[name].default == getattr(RunOptions, name), (path, name)


def test_the_shared_defaults_are_those_of_run_options():
    """One default per setting: predict's seeds and requests per run are every command's."""
    assert RunOptions.seeds == 3 and RunOptions.num_requests is None
    for path in WITHOUT:
        params = _params(path)
        if "seeds" in params:
            assert params["seeds"].default == 3, path
        if "num_requests" in params:
            assert params["num_requests"].default is None, path


def _whatif_json(capsys, *argv) -> dict:
    from simkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["whatif", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert exc.value.code in (0, None), err
    return json.loads(out)


HOST = ("host", "--factors", "1", "--configs", "vanilla", "--num-requests", "48", "--seeds", "1",
        "--source", "shipped")


def test_the_new_whatif_options_change_what_is_simulated(capsys):
    """--max-tokens and --no-prefix-caching reach the host what-if's engine; the default
    --max-tokens (8,192) is the old fixed cap, so leaving it out changes nothing."""
    base = _whatif_json(capsys, *HOST)
    assert _whatif_json(capsys, *HOST, "--max-tokens", "8192") == base
    short = _whatif_json(capsys, *HOST, "--max-tokens", "64")
    assert short["rows"][0]["output_tok_s"] != base["rows"][0]["output_tok_s"]
    off = _whatif_json(capsys, *HOST, "--no-prefix-caching")
    assert off["rows"][0]["output_tok_s"] != base["rows"][0]["output_tok_s"]


def test_the_server_limits_reach_every_what_ifs_engine(capsys):
    """--max-num-seqs and --cudagraph-mode, once predict's alone, change what a what-if simulates:
    8 sequences a step at most hold back the default 32 in flight, and eager steps (NONE) are
    slower than captured graphs; their defaults are the old fixed settings (same figures)."""
    base = _whatif_json(capsys, *HOST)
    assert _whatif_json(capsys, *HOST, "--max-num-seqs", "1024",
                        "--cudagraph-mode", "FULL_AND_PIECEWISE") == base
    few = _whatif_json(capsys, *HOST, "--max-num-seqs", "8")
    assert few["rows"][0]["output_tok_s"] < base["rows"][0]["output_tok_s"]
    eager = _whatif_json(capsys, *HOST, "--cudagraph-mode", "none")
    assert eager["rows"][0]["output_tok_s"] < base["rows"][0]["output_tok_s"]


def test_a_misspelt_cudagraph_mode_is_one_error_before_any_work(capsys):
    from cli_helpers import one_line_error, run

    for argv in (("whatif", "host"), ("predict", "--model", "llama-3.1-8b", "--corpus", "mix")):
        code, out, err = run(capsys, *argv, "--cudagraph-mode", "FULLEST")
        assert code == 2 and out == ""
        one_line_error(err, "FULLEST", "PIECEWISE")


def test_a_bad_source_is_one_error_line_before_any_work(capsys):
    from cli_helpers import one_line_error, run

    for argv in (("whatif", "host"), ("predict", "--model", "llama-3.1-8b", "--corpus", "mix")):
        code, out, err = run(capsys, *argv, "--source", "nowhere")
        assert code == 2 and out == ""
        one_line_error(err, "'--source'", "'auto', 'raw', 'shipped'")   # the choices of ProfileSource


def test_list_options_take_a_comma_list_or_a_repeated_option(capsys):
    """One list syntax: every list option of a run command may be repeated, and its values are
    comma lists; `--configs vanilla --configs kpad:4` is `--configs vanilla,kpad:4`."""
    from simkit.commands.options import LIST_NOTE

    for path in WITHOUT:
        for name, param in _params(path).items():
            if (param.help or "").endswith(LIST_NOTE) or name == "configs":
                assert param.multiple, (path, name)
    one = _whatif_json(capsys, *HOST[:3], "--configs", "vanilla,kpad:4", *HOST[5:])
    two = _whatif_json(capsys, *HOST[:3], "--configs", "vanilla", "--configs", "kpad:4",
                       *HOST[5:])
    assert one == two and {r["config"] for r in one["rows"]} == {"vanilla", "kpad-4"}


def test_sweeps_old_list_flags_are_deprecated_aliases(capsys, tmp_path):
    from cli_helpers import run

    out = str(tmp_path / "sw")
    code, _, err = run(capsys, "sweep", "--out", out, "--models", "nope")
    assert code == 2 and "--models is deprecated" in err and "unknown model 'nope'" in err
    code, _, err = run(capsys, "sweep", "--out", out, "--model", "a", "--models", "b")
    assert code == 2 and "give --model only" in err


def test_sweep_and_fleet_plan_share_the_executor_options(capsys, tmp_path):
    """--executor and --ray-address: one definition for both commands; sweep's old --address is
    a deprecated alias."""
    from cli_helpers import run

    sweep, fleet = _params(("sweep",)), _params(("fleet", "plan"))
    for name in ("executor", "ray_address"):
        assert sweep[name].opts == fleet[name].opts and sweep[name].help == fleet[name].help
        assert sweep[name].default == fleet[name].default
    out = str(tmp_path / "sw")
    code, _, err = run(capsys, "sweep", "--out", out, "--address", "ray://x:1", "--model", "nope")
    assert code == 2 and "--address is deprecated" in err and "unknown model 'nope'" in err
    code, _, err = run(capsys, "sweep", "--out", out, "--address", "a", "--ray-address", "b")
    assert code == 2 and "give --ray-address only" in err
