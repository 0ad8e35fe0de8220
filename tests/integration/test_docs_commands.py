"""The commands the docs show still exist as written, and the figures checked here are what the
commands print.

Every `simkit ...` line of a fenced block in docs/*.md (also written `python -m simkit ...`, with
`[--option value]` for an optional part and `a|b` for alternatives) is parsed by the real
command line: the command and each option exist and each value has the option's type and
choices (click's own parsing and conversion, the command's body replaced by a no-op: nothing is
simulated). A doc that renames an option the CLI no longer has fails here. Figures the guide
quotes from the README's prediction are compared with the README's pasted output, which
tests/integration/test_report.py compares line for line with what the command prints.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from simkit.cli import _USAGE_ERRORS      # click's usage errors (Typer vendors its own click)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("guide", "whatif", "fleet", "calibration", "validation", "report", "engine", "costmodel",
        "acceptance")
_INVOKE = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:python3? -m )?simkit (.*)$")


def doc_commands(text: str) -> list[str]:
    """Every simkit command line of the fenced blocks, less its prompt, environment assignments
    and trailing comment, in order."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():   # continued lines joined
            m = _INVOKE.match(line.strip())
            if m:
                out.append("simkit " + " ".join(shlex.split(m.group(1), comments=True)))
    return out


def argv_of(cmd: str) -> list[str]:
    """The argument list a user types for a doc line: optional `[...]` parts taken, the first of
    `a|b` alternatives, and a `...` placeholder dropped with the option it stands after."""
    words = shlex.split(cmd)[1:]
    out: list[str] = []
    for w in words:
        w = w.strip("[]")
        if w == "...":
            if out and out[-1].startswith("--"):
                out.pop()
            continue
        out.append(w.split("|")[0] if "|" in w and not w.startswith("-") else w)
    return out


def _no_op_tree(command) -> None:
    """Replace every command's body with a no-op (its parameters still parse and convert; a
    group still hands on to its subcommand)."""
    command.callback = lambda **kwargs: None
    for sub in (getattr(command, "commands", None) or {}).values():
        _no_op_tree(sub)


def parse(argv: list[str]) -> None:
    """Parse argv as `simkit ARGV` would, running nothing; a usage error when it does not."""
    from simkit.cli import app

    root = typer.main.get_command(app)
    _no_op_tree(root)
    root.main(argv, prog_name="simkit", standalone_mode=False)


def _cases() -> list:
    return [pytest.param(doc, cmd, id=f"{doc}:{i}") for doc in DOCS
            for i, cmd in enumerate(doc_commands((ROOT / "docs" / f"{doc}.md").read_text()))]


@pytest.mark.parametrize("doc,cmd", _cases())
def test_every_fenced_command_of_the_docs_parses(doc, cmd):
    try:
        parse(argv_of(cmd))
    except _USAGE_ERRORS as exc:
        pytest.fail(f"docs/{doc}.md: `{cmd}`: {exc.format_message()}")


def test_the_parse_check_refuses_a_stale_option():
    with pytest.raises(_USAGE_ERRORS, match="--no-such-option"):
        parse(argv_of("simkit predict --model llama-3.1-8b --no-such-option 3"))
    with pytest.raises(_USAGE_ERRORS):
        parse(argv_of("simkit validate --purpose [calibration|bogus] --seeds x"))


def test_doc_lines_become_argument_lists():
    text = ("```\nPYTHONPATH=$PWD python -m simkit fleet plan   # 40 req/s\n"
            "$ simkit traces list [--model llama-3.1-8b] [--format table|json]\n"
            "simkit validate --run-id a_b --run-id ...   # a subset\nnot simkit here\n```\n")
    cmds = doc_commands(text)
    assert cmds == ["simkit fleet plan", "simkit traces list [--model llama-3.1-8b] "
                    "[--format table|json]", "simkit validate --run-id a_b --run-id ..."]
    assert argv_of(cmds[1]) == ["traces", "list", "--model", "llama-3.1-8b", "--format", "table"]
    assert argv_of(cmds[2]) == ["validate", "--run-id", "a_b"]


def test_every_doc_with_commands_is_covered():
    """Each doc that shows a simkit command in a fenced block is in DOCS."""
    for path in sorted((ROOT / "docs").glob("*.md")):
        if doc_commands(path.read_text()) and path.stem not in DOCS:
            assert path.stem in ("architecture", "reference-study-reproduction",
                                 "validation-history"), path.name


def _readme_rows() -> dict[str, list[str]]:
    """The README's pasted prediction table: config -> its cells."""
    text = (ROOT / "README.md").read_text()
    block = text.split("$ simkit predict --model llama-3.1-8b --corpus mix", 1)[1].split("```")[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 5:
            rows[cells[0]] = cells
    return rows


def test_guide_prediction_figures_are_the_readmes():
    """docs/guide.md quoted the vLLM 0.26 figures (+9.8 %) beside 'the README shows what it
    prints' (+4.2 %, vLLM 0.33): its figures are the README's prediction's."""
    guide = re.sub(r"\s+", " ", (ROOT / "docs" / "guide.md").read_text())
    m = re.search(r"([\d.]+)-([\d.]+) drafts accepted per step\. At that acceptance suffix "
                  r"decoding \(K=24\) gains ([\d.]+) % over vanilla .*?\(host (\d+)% of step "
                  r"time against (\d+)% under vanilla's async scheduling\)", guide)
    assert m, "the guide's prediction paragraph"
    rows = _readme_rows()
    head = ["config", "K", "tok/s", "std", "speedup", "acc", "meanK", "host"]
    table = {name: dict(zip(head, cells)) for name, cells in rows.items()}
    accs = [float(r["acc"]) for name, r in table.items() if name != "vanilla"]
    assert (float(m[1]), float(m[2])) == (min(accs), max(accs))
    tok = {name: float(r["tok/s"].replace(",", "")) for name, r in table.items()}
    readme = (ROOT / "README.md").read_text()
    gain = re.search(r"run suffix: \+([\d.]+) % over vanilla", readme)[1]
    assert m[3] == gain and abs(100 * (tok["suffix"] / tok["vanilla"] - 1) - float(gain)) < 0.06
    assert (m[4] + "%", m[5] + "%") == (table["suffix"]["host"], table["vanilla"]["host"])


TOOLING = (".carry", "carry=", "give_back", "device call", "lent", "/work/", "session.sh",
           "budget_left")


def test_calibration_doc_speaks_of_a_users_gpu_host():
    """docs/calibration.md spoke of the tools this project reaches its GPU with; a user has a
    GPU host, ssh and pip."""
    text = (ROOT / "docs" / "calibration.md").read_text()
    assert [w for w in TOOLING if w in text] == []
    for needed in ("ssh gpu-host", "scp", "pip install vllm==", "--find-links", "bash plan.sh",
                   "## vLLM 0.34"):
        assert needed in text, needed


def test_calibration_doc_engine_starts_are_the_plans_estimates():
    """docs/calibration.md's engine-start figures are what calibrate plan counts per engine."""
    import json

    from typer.testing import CliRunner

    from simkit.cli import app

    text = re.sub(r"\s+", " ", (ROOT / "docs" / "calibration.md").read_text())
    m = re.search(r"Engine starts take about (\d+) s on vLLM (\d+\.\d+) and (\d+) s on (\d+\.\d+)",
                  text)
    assert m, "the engine-start sentence"
    for seconds, version in ((m[1], m[2]), (m[3], m[4])):
        res = CliRunner().invoke(app, ["calibrate", "plan", "--vllm-version", version,
                                       "--format", "json"])
        assert res.exit_code == 0, res.output
        plan = json.loads(res.stdout)
        assert {e["overhead_s"] for e in plan["engines"]} == {float(seconds)}, version
