"""`simkit predict --html PATH`: one self-contained page (recommendation, ladder table, plot as
an embedded base64 PNG, assumptions, legend) that a planner can mail to a colleague.

Rendered with jinja2 (autoescaping: proxy notes and file names go into HTML safely). No
timestamp: identical inputs give identical bytes.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import TYPE_CHECKING

from simkit.report.assumptions import build_assumptions
from simkit.report.legend import columns
from simkit.report.render import cell, full_recommendation, note_lines, title
from simkit.report.settings import settings_lines

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction


def plot_png(pred: Prediction) -> bytes:
    """The predict bar chart as PNG bytes (same figure as --plot)."""
    from simkit.report.chart import plot_prediction

    buf = io.BytesIO()
    plot_prediction(pred, buf)
    return buf.getvalue()


def render_html(pred: Prediction) -> str:
    """The report page as a string."""
    import jinja2

    from simkit import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("simkit.report", "templates"),
                             autoescape=True, keep_trailing_newline=True)
    assumptions = build_assumptions(pred)
    rec = full_recommendation(pred, assumptions)
    cols = columns(bool(getattr(pred, "prefix_caching", False)))
    rows = [{"cells": [cell(r, c.key) for c in cols], "best": r.config == rec["config"]}
            for r in pred.rows]
    notes = note_lines(pred)
    return env.get_template("predict.html.j2").render(
        title=title(pred), rec=rec, settings=settings_lines(rec.get("settings")), columns=cols, rows=rows, notes=notes,
        assumptions=assumptions, plot_b64=base64.b64encode(plot_png(pred)).decode("ascii"),
        version=__version__)


def write_html(pred: Prediction, path: str | Path) -> Path:
    """Write the page; returns its path."""
    from simkit.outfiles import write_atomic

    page = render_html(pred)
    return write_atomic(Path(path), lambda tmp: tmp.write_text(page, encoding="utf-8"))


__all__ = ["plot_png", "render_html", "write_html"]
