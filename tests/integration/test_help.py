"""Every option of every command says what it does, its default and its choices (issue 17).

Walks the whole typer command tree, so a new option without a description fails here."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from simkit.cli import app
from simkit.engine.cudagraph import CudagraphMode
from simkit.profiles.corpus_profile import SOURCES, TREES

# options whose value is one of a fixed set: the help must name every choice
CHOICES = {"--cudagraph-mode": [m.value for m in CudagraphMode], "--source": list(SOURCES),
           "--tree": list(TREES), "--executor": ["local", "ray"], "--format": ["table", "json"],
           "--purpose": ["validation", "calibration", "all"]}
CHOICES_OF = {("traces import", "--format"): ["openai", "sharegpt", "vllm-custom", "tokens"],
              ("calibrate run", "--purpose"): ["calibration", "validation"],
              ("predict", "--format"): ["table", "json", "csv"]}


def _commands(cmd=None, path=()):
    """(path, click command) for every leaf command of the app."""
    cmd = cmd or typer.main.get_command(app)
    if hasattr(cmd, "list_commands"):
        ctx = cmd.make_context(path[-1] if path else "simkit", [], resilient_parsing=True)
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), (*path, name))
    else:
        yield path, cmd


COMMANDS = list(_commands())


def test_the_walk_sees_every_command_group():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"predict", "sweep", "validate", "whatif capacity", "whatif reference",
            "traces import", "calibrate fit"} <= names
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_has_a_description_a_default_and_its_choices(path, cmd):
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no summary"
    ctx = cmd.make_context(path[-1], [], resilient_parsing=True)
    problems = []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        opts, text = record
        own = (param.help or "").strip()
        if not own:
            problems.append(f"{opts}: no description")
            continue
        if param.param_type_name == "option" and not param.required \
                and not getattr(param, "is_flag", False) \
                and "[default:" not in text and "default" not in own:
            problems.append(f"{opts}: default not shown")
        for flag, choices in CHOICES.items():
            if flag in opts.replace(",", " ").split():
                choices = CHOICES_OF.get((" ".join(path), flag), choices)
                missing = [c for c in choices if c not in own]
                if missing:
                    problems.append(f"{opts}: choices {missing} not listed")
    assert not problems, f"simkit {' '.join(path)}: " + "; ".join(problems)


def test_predict_help_shows_the_new_report_options():
    result = CliRunner().invoke(app, ["predict", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in ("--no-legend", "--html", "FULL_AND_PIECEWISE, PIECEWISE, FULL or NONE"):
        assert text in result.output
