"""The error figures docs/validation.md and the 0.33 calibration ship are the records' own:
python -m simkit.validation.refresh writes them; these fail when a figure is stale."""
import json

from simkit.costmodel.step_records import select_version
from simkit.validation.floor import repeat_floor
from simkit.validation.measured import load_records
from simkit.validation.refresh import BEGIN, CAL026, CAL033, DOC, END, figures_markdown
from simkit.validation.summary import floor_figures

STALE = "stale: run python -m simkit.validation.refresh after the records change"


def test_the_stored_033_floor_is_the_records_floor():
    _, runs = load_records()
    stored = json.loads(CAL033.read_text())["validation"]["repeat_floor"]
    assert stored == floor_figures(repeat_floor(select_version(runs, "0.33"))), STALE


def test_the_docs_figures_are_the_ones_refresh_writes():
    _, runs = load_records()
    want = figures_markdown(json.loads(CAL033.read_text())["validation"],
                            json.loads(CAL026.read_text())["validation"],
                            repeat_floor(select_version(runs, "0.26")))
    text = DOC.read_text()
    got = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n")
    assert got == want, STALE


def test_the_goal_column_says_not_met_where_the_figure_misses():
    val = json.loads(CAL033.read_text())["validation"]
    _, runs = load_records()
    md = figures_markdown(val, json.loads(CAL026.read_text())["validation"],
                          repeat_floor(select_version(runs, "0.26")))
    row = next(ln for ln in md.splitlines() if ln.startswith("| held-out MAPE"))
    assert row.endswith("**not met** |") == (val["held_out_mape_pct"] > 5.0)
    worse = {**val, "held_out_mape_pct": 4.9}
    assert "| met |" in next(ln for ln in figures_markdown(
        worse, json.loads(CAL026.read_text())["validation"],
        repeat_floor(select_version(runs, "0.26"))).splitlines() if ln.startswith("| held-out MAPE"))
