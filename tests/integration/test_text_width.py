"""Every command's default text output fits 100 columns on the shipped data, and `--wide` still
shows every column of a table that leaves some out at 100.

The one exemption, stated as a rule: a line that is a shell command to paste (its text, indent
stripped, starts with `simkit `, as `calibrate plan` prints each `simkit calibrate run` line) is
never wrapped, since a wrapped command no longer pastes. Every other line is at most 100
characters. predict, the what-ifs, fleet and validate are checked on their goldens and in
test_report / test_text_fit; this test covers the catalogue, profile, trace, acceptance and
calibration commands.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from simkit.cli import app
from simkit.report.fit import WIDTH

COMMANDS = [
    ("models", "list"),
    *[("models", "show", m) for m in ("deepseek-r1", "k-exaone-236b", "llama-3.1-405b-fp8",
                                      "qwen2.5-32b", "llama-3.1-8b")],
    ("hardware", "list"),
    *[("hardware", "show", h) for h in ("b200", "h100", "h200")],
    ("calibrate", "plan", "--model", "llama-3.1-8b", "--corpus", "chat"),
    ("calibrate", "plan", "--model", "qwen2.5-32b", "--corpus", "mix", "--budget-min", "5"),
    ("calibrate", "fit", "--folds", "2"),
]


def pasted_command(line: str) -> bool:
    """The exemption: a shell command meant to be pasted whole."""
    return line.lstrip().startswith("simkit ")


def _out(argv) -> str:
    result = CliRunner().invoke(app, list(argv))
    assert result.exit_code == 0, (argv, result.output)
    return result.stdout


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_text_output_fits_100_columns(argv):
    lines = _out(argv).splitlines()
    assert lines
    over = [ln for ln in lines if len(ln) > WIDTH and not pasted_command(ln)]
    assert not over, (argv, [len(ln) for ln in over], over[:3])


def _header(text: str) -> list[str]:
    """The column names of the one table in `text` (header lines joined column by column)."""
    lines = text.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("━"))
    start = rule
    while start > 0 and "┃" in lines[start - 1]:
        start -= 1
    blocks = [[p.strip() for p in ln.split("┃")] for ln in lines[start:rule]]
    return [" ".join(w for w in col if w) for col in zip(*blocks)]


TABLES = {("models", "list"): ["model", "params", "active", "attn", "MoE k/E+shared", "dtype",
                               "KV B/token", "TP h200", "TP b200", "tokenizer"],
          ("hardware", "list"): ["name", "HBM GiB", "HBM TB/s", "bf16 TF", "fp8 TF", "fp4 TF",
                                 "NVLink GB/s", "host speed", "values", "default cost model"]}


@pytest.mark.parametrize("argv", list(TABLES), ids=" ".join)
def test_a_left_out_column_is_named_and_wide_shows_every_column(argv):
    every = TABLES[argv]
    text = _out(argv)
    shown = _header(text)
    missing = [c for c in every if c not in shown]
    assert [c for c in every if c in shown] == shown
    lines = text.splitlines()
    last_row = max(i for i, ln in enumerate(lines) if "│" in ln)
    note = " ".join(ln.strip() for ln in lines[last_row + 1:])
    if missing:
        assert note.startswith(f"--wide shows {len(missing)} more column")
        assert note.split(": ", 1)[1].split(" (--format")[0].split(", ") == missing
    else:
        assert "--wide shows" not in text
    wide = _out((*argv, "--wide"))
    assert _header(wide) == every and "--wide shows" not in wide
    body = lambda t: [[c.strip() for c in ln.split("│")] for ln in t.splitlines() if "│" in ln]
    assert [[row[every.index(c)] for c in shown] for row in body(wide)] == body(text)
