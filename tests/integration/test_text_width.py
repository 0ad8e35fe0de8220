"""Every command's default text output fits 100 columns on the shipped data, and `--wide` still
shows every column of a table that leaves some out at 100.

The one exemption, stated as a rule: a line that is a shell command to paste (its text, indent
stripped, starts with `simkit `, as `calibrate plan` prints each `simkit calibrate run` line) is
never wrapped, since a wrapped command no longer pastes. Every other line is at most 100
characters. predict, the what-ifs, fleet, validate and sweep are checked on their goldens
(test_report) and in test_text_fit; this test covers the catalogue, profile, trace, acceptance
and calibration commands. `traces list` and `traces show` count the raw traces, so they run
only where those are present.
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
    ("profiles", "list"),
    ("acceptance", "--model", "llama-3.1-8b", "--corpus", "mix", "--source", "shipped", "--k",
     "1,4,8,12,16"),
    ("acceptance", "--model", "deepseek-r1", "--corpus", "code", "--source", "shipped",
     "--drafter", "ngram"),
]
RAW = [("traces", "list"), ("traces", "list", "--model", "ds-r1-distill-qwen-32b"),
       ("traces", "show", "mix"), ("traces", "show", "mix", "--model", "deepseek-r1")]


def pasted_command(line: str) -> bool:
    """The exemption: a shell command meant to be pasted whole."""
    return line.lstrip().startswith("simkit ")


def _need_raw_traces() -> None:
    from simkit.paths import traces_src_dir

    if traces_src_dir() is None:
        pytest.skip("traces list/show count the raw traces (../shared/traces-src)")


def _out(argv) -> str:
    result = CliRunner().invoke(app, list(argv))
    assert result.exit_code == 0, (argv, result.output)
    return result.stdout


@pytest.mark.parametrize("argv", COMMANDS + RAW, ids=" ".join)
def test_text_output_fits_100_columns(argv):
    if argv in RAW:
        _need_raw_traces()
    lines = _out(argv).splitlines()
    assert lines
    over = [ln for ln in lines if len(ln) > WIDTH and not pasted_command(ln)]
    assert not over, (argv, [len(ln) for ln in over], over[:3])


def _last_table(text: str) -> tuple[list[str], list[list[str]], list[str]]:
    """The column names, the rows (cells stripped) and the lines after the last table in `text`
    (header lines joined column by column)."""
    lines = text.splitlines()
    rule = max(i for i, ln in enumerate(lines) if ln.startswith("━"))
    start = rule
    while start > 0 and "┃" in lines[start - 1]:
        start -= 1
    blocks = [[p.strip() for p in ln.split("┃")] for ln in lines[start:rule]]
    end = rule + 1
    while end < len(lines) and "│" in lines[end]:
        end += 1
    rows = [[c.strip() for c in ln.split("│")] for ln in lines[rule + 1:end]]
    return [" ".join(w for w in col if w) for col in zip(*blocks)], rows, lines[end:]


TABLES = {("models", "list"): ["model", "params", "active", "attn", "MoE k/E+shared", "dtype",
                               "KV B/token", "TP h200", "TP b200", "tokenizer"],
          ("hardware", "list"): ["name", "HBM GiB", "HBM TB/s", "bf16 TF", "fp8 TF", "fp4 TF",
                                 "NVLink GB/s", "host speed", "values", "default cost model"],
          ("traces", "show", "chat"): ["source", "producer", "requests", "prompt tok",
                                       "output tok", "greedy", "capped"]}


@pytest.mark.parametrize("argv", list(TABLES), ids=" ".join)
def test_a_left_out_column_is_named_and_wide_shows_every_column(argv):
    if argv[0] == "traces":
        _need_raw_traces()
    every = TABLES[argv]
    shown, rows, after = _last_table(_out(argv))
    missing = [c for c in every if c not in shown]
    assert [c for c in every if c in shown] == shown
    if missing:
        n = 1
        while n < len(after) and after[n].startswith("  "):       # the note's wrapped lines
            n += 1
        note = " ".join(ln.strip() for ln in after[:n])
        assert note.startswith(f"--wide shows {len(missing)} more column")
        assert note.split(": ", 1)[1].split(" (--format")[0].split(", ") == missing
    else:
        assert not after or not after[0].startswith("--wide shows")
    wide_shown, wide_rows, wide_after = _last_table(_out((*argv, "--wide")))
    assert wide_shown == every and not (wide_after and wide_after[0].startswith("--wide"))
    assert [[row[every.index(c)] for c in shown] for row in wide_rows] == rows
