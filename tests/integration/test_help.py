"""Every option of every command says what it does, its default and its choices (issue 17).

Walks the whole typer command tree, so a new option without a description fails here."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from simkit.cli import app
from simkit.engine.cudagraph import CudagraphMode
from simkit.history import CHOICES as HISTORIES
from simkit.profiles.corpus_profile import ProfileSource

# options whose value is one of a fixed set: the help must name every choice
CHOICES = {"--cudagraph-mode": [m.value for m in CudagraphMode], "--source": list(ProfileSource),
           "--history": list(HISTORIES), "--tree": ["warm", "cold", "hot"],
           "--executor": ["local", "ray"], "--format": ["table", "json"],
           "--purpose": ["validation", "calibration", "all"]}
CHOICES_OF = {("traces import", "--format"): ["openai", "sharegpt", "vllm-custom", "tokens"],
              ("calibrate run", "--purpose"): ["calibration", "validation"],
              ("predict", "--format"): ["table", "json", "csv"],
              ("validate", "--history"): [h for h in HISTORIES if h != "warm"]}   # refused there


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


def _help_at_80(path) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def _description_width(text: str) -> int | None:
    """The narrowest description column of a rich help page: the room a wrapped description
    line has right of its option names (None: no wrapped line)."""
    room = []
    for line in text.splitlines():
        if line.startswith("│") and line.endswith("│"):
            inner = line[1:-1]
            lead = len(inner) - len(inner.lstrip(" "))
            if inner.strip() and lead >= 8:              # a description's continuation line
                room.append(len(inner) - lead - 1)
    return min(room) if room else None


@pytest.mark.parametrize("path", [(), *(p for p, _ in COMMANDS)],
                         ids=["simkit", *(" ".join(p) for p, _ in COMMANDS)])
def test_help_reads_at_80_columns(path):
    """Every --help at COLUMNS=80: no line over 80, nothing cut off (rich's '…'), and every
    description column at least 36 characters wide (not squeezed beside long option names)."""
    text = _help_at_80(path)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    width = _description_width(text)
    assert width is None or width >= 36, f"description column {width} characters"


def test_predict_help_is_short_and_grouped():
    text = _help_at_80(("predict",))
    lines = text.splitlines()
    assert len(lines) < 90, f"{len(lines)} lines"
    panels = [line.split("─")[1].strip() for line in lines if line.startswith("╭─")]
    assert len(panels) >= 3 and len(set(panels)) == len(panels)


@pytest.mark.parametrize("path,flag,name", [
    (("predict",), "--no-prefix-caching", "prefix_caching"),
    (("whatif", "capacity"), "--no-prefix-caching", "prefix_caching"),
    (("whatif", "history"), "--no-warm", "warm")])
def test_a_negative_flag_is_one_option_and_turns_its_setting_off(path, flag, name):
    """Settings on by default take one flag that turns them off (a --x/--no-x pair would add a
    column to --help); the command still receives the setting itself."""
    cmd = dict((" ".join(p), c) for p, c in COMMANDS)[" ".join(path)]
    base = ["--model", "llama-3.1-8b", "--corpus", "mix"]
    param = next(p for p in cmd.params if p.name == name)
    assert param.opts == [flag] and not param.secondary_opts
    assert cmd.make_context(path[-1], list(base)).params[name] is True
    assert cmd.make_context(path[-1], [*base, flag]).params[name] is False
