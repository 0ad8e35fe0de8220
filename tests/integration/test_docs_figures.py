"""The figures the docs quote beside their commands are what those commands print.

The paragraphs right before and right after every fenced block of docs/*.md that shows a
`simkit` command (and that block's comments), and in the docs of INLINE every paragraph that
names a `simkit` command inline, are read for figures. Each figure there sits in
one QUOTED phrase, compared here with what the command prints (its golden output under
tests/golden/, byte-checked against the command by tests/slow/test_golden.py; the shipped
calibration whose block predict prints; the records the command reads), or matches NOT_OUTPUT
(names, versions, dates, list numbers, a benchmark's timings named as such, an example said to
be measured on a given date). A new figure there that nobody checks fails
test_every_figure_beside_a_doc_command_is_checked, as the README's do in test_readme.py.
Tables are outside the guard (their figures are data, not a command's printed lines).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.integration.test_docs_commands import DOCS, doc_commands

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"

# docs whose paragraphs naming a `simkit ...` command inline are guarded too
INLINE = ("report",)

# (doc, phrase): the figures quoted beside a command; the test named in the comment checks them
QUOTED = {
    # test_docs_commands.test_calibration_doc_engine_starts_are_the_plans_estimates
    ("calibration", "engine_starts"): (r"Engine starts take about (\d+) s on vLLM (\d+\.\d+) and "
                                       r"(\d+) s on (\d+\.\d+)"),
    # test_fleet_plan_comment_is_its_defaults
    ("fleet", "plan_defaults"): r"# llama-3\.1-8b, mix, (\d+) req/s x (\d+) s",
    # test_fleet_validate_comment_names_the_records_version
    ("fleet", "records"): r"# the vLLM (\d+\.\d+) fleet records",
    # test_guide_sample_sizes_are_predicts
    ("guide", "sample"): (r"every run then simulates ([\d,]+) requests per seed drawn by weight "
                          r"\(the old (\d+)-request sample under-predicted speculation on mixed "
                          r"traffic by up to (\d+) %"),
    # test_guide_history_defaults_are_predicts
    ("guide", "fifo"): r"FIFO past ([\d,]+) requests",
    ("guide", "old_even"): r"With the old evenly spaced (\d+)-request sample",
    # test_guide_hot_error_is_the_shipped_calibrations
    ("guide", "hot_error"): (r"the measured hot runs are predicted within ([\d.]+) % on average, "
                             r"but the worst speculative ones are over-predicted by up to "
                             r"([\d.]+) %"),
    # test_report_widths_are_what_the_commands_print
    ("report", "table_width"): r"The table format fits (\d+) columns",
    ("report", "validate_width"): r"wraps its prose at (\d+) and never cuts a run id",
    ("report", "other_width"): r"The other commands fit (\d+) columns too",
    ("report", "models_width"): r"leaves the tokenizer column out at (\d+) and names it",
    # test_report_tie_rule_is_predicts
    ("report", "tie"): r"when within the seed spread or (\d+) %",
    # test_validation_fit_runs_are_the_first_sittings
    ("validation", "fit_runs"): r"saw the (\d+) calibration and check runs",
}

# figures beside a command that are not a command's output
NOT_OUTPUT = (
    r"\b[A-Za-z][\w.]*(?:-[\w.]*\d[\w.]*)+",        # names with digits: Llama-3.1-8B, kpad-12
    r"\b[A-Z][A-Za-z]*\d[\w.]*",                    # Qwen2.5, H200
    r"\b\d+B\b",                                    # a model size: the 70B model
    r"\bAlpacaEval \d+\.\d+",                       # a benchmark's own version
    r"\b(?:vLLM )?0\.(?:26|33|34)(?:\.0)?\b",       # vLLM releases simkit knows
    r"\b\d{4}-\d\d-\d\d(?:T\d\d:\d\d)?",           # dates
    r"\(1 \+ accepted drafts\)",                   # tokens per step, a definition
    r"BENCHMARK measured .*?\.(?= [A-Z]|$)",        # a benchmark script's figures, named so
    r"[Mm]easured on \d{4}-\d\d-\d\d.*?\.(?= [A-Z]|$)",  # an example dated as measured
)


def beside_commands(text: str, inline: bool = False) -> list[str]:
    """The prose paragraphs right before and after each fenced block that shows a simkit
    command, and the comments of those blocks, in order (tables left out); `inline`: also every
    paragraph naming a `simkit ...` command in inline code."""
    parts = re.split(r"(```[a-z]*\n.*?```)", text, flags=re.S)
    out: list[str] = []
    for i, part in enumerate(parts):
        if part.startswith("```"):
            if doc_commands(part):
                out += ["# " + ln.split("#", 1)[1].strip()
                        for ln in part.splitlines()[1:-1] if "#" in ln
                        and not ln.split("#", 1)[1].strip().startswith("simkit ")]
            continue
        paras = [p for p in re.split(r"\n\s*\n", part) if p.strip()]
        for k, para in enumerate(paras):
            after = k == 0 and i > 0 and doc_commands(parts[i - 1])
            before = k == len(paras) - 1 and i + 1 < len(parts) and doc_commands(parts[i + 1])
            named = inline and re.search(r"`simkit [a-z]", para)
            if (after or before or named) and not para.lstrip().startswith("|"):
                out.append(para)
    return out


def figure_text(para: str) -> str:
    """A paragraph with what holds no quoted figure blanked: a list item's number, inline code
    (a benchmark script's name kept as BENCHMARK), link targets, file names; one line."""
    para = re.sub(r"^\s*\d+\.\s", "", para)
    para = re.sub(r"`tests/benchmarks/[^`]*`", "BENCHMARK", para)
    para = re.sub(r"`[^`]*`", "", para)
    para = re.sub(r"\]\([^)]*\)", "]", para)
    para = re.sub(r"[\w./-]+\.(md|png|sh|py|json|jsonl|parquet)\b", "", para)
    return re.sub(r"\s+", " ", para).strip()


def unchecked(doc: str, text: str) -> list[str]:
    """The figures beside `doc`'s commands outside every QUOTED phrase and NOT_OUTPUT span."""
    patterns = [p for (d, _), p in QUOTED.items() if d == doc] + list(NOT_OUTPUT)
    found = []
    for para in beside_commands(text, doc in INLINE):
        plain = figure_text(para)
        spans = [m.span() for p in patterns for m in re.finditer(p, plain)]
        found += [plain[max(0, m.start() - 30):m.end() + 10]
                  for m in re.finditer(r"(?<![\w.])\d+(?:[.,]\d+)*", plain)
                  if not any(a <= m.start() < b for a, b in spans)]
    return found


def doc_text(doc: str) -> str:
    return (ROOT / "docs" / f"{doc}.md").read_text()


def quoted(doc: str, name: str) -> tuple[str, ...]:
    """The figures of one QUOTED phrase, which must be beside a command of the doc once."""
    text = "\n".join(figure_text(p) for p in beside_commands(doc_text(doc), doc in INLINE))
    found = re.findall(QUOTED[(doc, name)], text)
    assert len(found) == 1, (doc, name, found)
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def test_every_figure_beside_a_doc_command_is_checked():
    left = {doc: unchecked(doc, doc_text(doc)) for doc in DOCS}
    assert {d: f for d, f in left.items() if f} == {}, f"doc figures with no check in {__file__}"


def test_the_guard_sees_an_unchecked_figure():
    text = ("Intro.\n\n```bash\nsimkit predict --model llama-3.1-8b   # 12 seeds\n```\n\n"
            "On Llama-3.1-8B suffix gains 9.8 % (vLLM 0.33, `--seeds 3`, docs/x-2.md).\n\n"
            "Far from any command: 7 %.\n")
    found = unchecked("guide", text)
    assert len(found) == 2, found
    assert found[0].startswith("# 12 seeds") and "gains 9.8 % (vLLM" in found[1]


def test_a_quoted_phrase_covers_its_figures():
    text = "```\nsimkit fleet plan   # llama-3.1-8b, mix, 40 req/s x 60 s\n```\n"
    assert unchecked("fleet", text) == [] and unchecked("guide", text) != []


def test_every_quoted_phrase_is_beside_a_command():
    for doc, name in QUOTED:
        assert quoted(doc, name)


def _golden_assumption(name: str) -> dict:
    """One assumption's value of the README's prediction (golden predict-json: the default
    sample, 3 seeds, on mix)."""
    return json.loads((GOLDEN / "predict-json.out").read_text())["assumptions"][name]["value"]


def test_guide_sample_sizes_are_predicts():
    """The requests a run simulates and the profile's own sample are what predict states; the
    old sample's error is the one docs/acceptance.md measured at that run size."""
    run, old, error = quoted("guide", "sample")
    load = _golden_assumption("load")
    assert int(run.replace(",", "")) == load["requests"]
    assert int(old) == _golden_assumption("workload")["sample_requests"]
    acceptance = re.sub(r"\s+", " ", doc_text("acceptance"))
    assert f"({error} % at {run} requests per run)" in acceptance


def test_guide_history_defaults_are_predicts():
    """The suffix tree's FIFO and the profile's sample size beside the history commands are
    the ones predict states in its assumptions."""
    (fifo,) = quoted("guide", "fifo")
    (sample,) = quoted("guide", "old_even")
    assert int(fifo.replace(",", "")) == _golden_assumption("drafter")["max_cached_requests"]
    assert int(sample) == _golden_assumption("workload")["sample_requests"]


def test_guide_hot_error_is_the_shipped_calibrations():
    """The hot-history error the guide quotes is the 0.26 calibration's held-out block (the
    history figures beside it are 0.26 ones), which predict prints among its assumptions."""
    from simkit.costmodel.calibrations import read_calibration

    mean, worst = quoted("guide", "hot_error")
    block = read_calibration("h200-vllm026")["validation"]
    assert mean == f"{block['held_out_mape_by_history_pct']['hot']:.1f}"
    assert worst == f"{block['worst_held_out_pct']:.1f}"
    run = block["worst_held_out_run"]
    assert run.endswith("_hot") and "vanilla" not in run


def test_fleet_plan_comment_is_its_defaults():
    import typer

    from simkit.cli import app

    rate, duration = quoted("fleet", "plan_defaults")
    plan = typer.main.get_command(app).commands["fleet"].commands["plan"]
    defaults = {p.name: p.default for p in plan.params}
    assert (defaults["rate"], defaults["duration"]) == (float(rate), float(duration))
    assert (defaults["model"], defaults["corpus"]) == ("llama-3.1-8b", "mix")


def test_fleet_validate_comment_names_the_records_version():
    from simkit.fleet.validate import fleet_records

    (version,) = quoted("fleet", "records")
    _, runs = fleet_records()
    assert len(runs) and {v.rsplit(".", 1)[0] for v in runs["vllm_version"]} == {version}


def test_validation_fit_runs_are_the_first_sittings():
    """docs/validation.md's purpose table and fit count are the two 2026-11-30 sittings'."""
    import pandas as pd

    (count,) = quoted("validation", "fit_runs")
    runs = pd.read_parquet(ROOT / "calibrate" / "data" / "runs.parquet",
                           columns=["purpose", "started_utc"])
    first = runs[runs["started_utc"].astype(str).str.startswith("2026-11-30")]
    purposes = first["purpose"].astype(str).value_counts().to_dict()
    assert purposes["calibration"] + purposes["check"] == int(count)
    table = re.findall(r"^\| (validation|calibration|check) \| (\d+) \|", doc_text("validation"),
                       re.M)
    assert {p: int(n) for p, n in table} == purposes


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_report_widths_are_what_the_commands_print():
    """The text outputs' width: predict's and the what-ifs' tables and validate's prose in
    their goldens (run with COLUMNS=200: the width is simkit's, not the terminal's), and
    `models list`, which names the column it leaves out."""
    from typer.testing import CliRunner

    from simkit.cli import app
    from tests.golden.cases import CASES

    (table,) = quoted("report", "table_width")
    (prose,) = quoted("report", "validate_width")
    (other,) = quoted("report", "other_width")
    (models,) = quoted("report", "models_width")
    text_cases = [c.name for c in CASES if c.argv[0] in ("predict", "whatif", "validate")
                  and "--format" not in c.argv]
    assert "predict" in text_cases and "validate" in text_cases
    widths = {name: _widest((GOLDEN / f"{name}.out").read_text()) for name in text_cases}
    assert max(widths.values()) <= int(table) == int(prose), widths
    assert widths["validate"] == int(prose)
    out = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": "200"}).output
    assert _widest(out) <= int(other) == int(models)
    assert "--wide shows 1 more column: tokenizer" in out
    wide = CliRunner().invoke(app, ["models", "list", "--wide"], env={"COLUMNS": "200"}).output
    assert _widest(wide) > int(models)


def test_report_tie_rule_is_predicts():
    """The tie rule report.md states is the one predict's recommendation prints."""
    (pct,) = quoted("report", "tie")
    text = re.sub(r"\s+", " ", (GOLDEN / "predict.out").read_text())
    assert f"ties = within the seed spread or {pct}%" in text
