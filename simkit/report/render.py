"""`simkit predict` as text table, JSON document and CSV: assumptions first, the ladder, the
legend, and the recommendation last. Same Prediction in, byte-identical text out."""

from __future__ import annotations

import csv
import io
import textwrap
from typing import TYPE_CHECKING, Any

from simkit.report.assumptions import build_assumptions
from simkit.report.legend import columns, key_meanings, legend_lines
from simkit.report.recommend import recommendation

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction
    from simkit.engine.summary import Row

WRAP = 110          # header and legend lines wrap here, at word boundaries
TABLE_WIDTH = 190   # the ladder table is never wrapped


def title(pred: Prediction) -> str:
    """The report's first line."""
    hist = f", history {pred.history}" if pred.history else ""
    ver = f", vLLM {pred.vllm_version}" if pred.vllm_version else ""
    return (f"simkit predict: {pred.model}, corpus {pred.corpus}{hist}, {pred.hardware} TP "
            f"{pred.tp}{ver} (a prediction, not a validated forecast)")


def model_error_pct(assumptions: dict[str, Any]) -> float | None:
    """The cost model's held-out MAPE (%), when the profile records it."""
    val = (assumptions.get("cost_model", {}).get("value") or {}).get("validation") or {}
    return val.get("held_out_mape_pct")


def _block(label: str, text: str, width: int) -> list[str]:
    pad = " " * (width + 4)
    return textwrap.wrap(text, WRAP, initial_indent=f"  {label:<{width}}  ",
                         subsequent_indent=pad, break_on_hyphens=False) or [f"  {label}"]


def assumption_lines(assumptions: dict[str, Any]) -> list[str]:
    """'Assumptions' then one wrapped, aligned entry per assumption."""
    width = max(len(k) for k in assumptions)
    out = ["Assumptions"]
    for key, entry in assumptions.items():
        out.extend(_block(key, entry["text"], width))
    return out


def cell(row: Row, key: str) -> str:
    """One table cell as printed (units and rounding of the column)."""
    d = row.result_dict()
    v = d.get(key)
    if key == "k":
        return row.ks or str(row.k)
    if key == "config":
        return row.config + ("" if row.steady_window else " *")
    if key == "prefix_hit_rate":
        return "n/a" if v is None else f"{v:.1%}"
    if v is None:
        return "-"
    fmt = {"output_tok_s": "{:,.0f}", "output_tok_s_std": "{:,.0f}", "speedup_vs_vanilla": "{:.2f}x",
           "mean_accepted": "{:.2f}", "tokens_per_step": "{:.2f}", "mean_k": "{:.2f}",
           "tpot_ms_p50": "{:.2f} ms", "ttft_ms_p50": "{:.0f} ms", "itl_ms_p99": "{:.1f} ms",
           "preemptions": "{:.0f}"}.get(key)
    if fmt:
        return fmt.format(v)
    if key.endswith("_frac") or key == "padded_token_waste":
        return f"{v:.0%}"
    return str(v)


def verdict_lines(pred: Prediction, rec: dict[str, Any]) -> list[str]:
    """Unavailable configs, skipped requests, then the recommendation and its reasons."""
    out = [f"{name}: unavailable - {reason}" for name, reason in pred.unavailable.items()]
    skipped = {k: v for k, v in pred.skipped.items() if v}
    if skipped:
        out.append("skipped profile requests: " +
                   ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())))
    out.extend(textwrap.wrap(f"recommendation: {rec['line']}", WRAP, subsequent_indent="  ",
                             break_on_hyphens=False))
    for reason in rec["reasons"]:
        out.extend(textwrap.wrap(f"because {reason}", WRAP, initial_indent="  ",
                                 subsequent_indent="    ", break_on_hyphens=False))
    return out


def render_table(pred: Prediction, legend: bool = True) -> str:
    """The text report: title, assumptions, ladder table, legend (optional), recommendation."""
    from rich.console import Console
    from rich.table import Table

    assumptions = build_assumptions(pred)
    rec = recommendation(pred, model_error_pct(assumptions))
    buf = io.StringIO()
    lines = [*textwrap.wrap(title(pred), WRAP), *assumption_lines(assumptions), ""]
    buf.write("\n".join(lines) + "\n")
    console = Console(file=buf, width=TABLE_WIDTH, color_system=None, force_terminal=False,
                      highlight=False)
    table = Table(show_edge=False, pad_edge=False)
    cols = columns(_prefix_on(pred))
    for col in cols:
        table.add_column(col.header, justify="left" if col.key == "config" else "right")
    for r in pred.rows:
        table.add_row(*(cell(r, c.key) for c in cols))
    console.print(table)
    tail = []
    if legend:
        tail += ["", "Legend"] + [ln for text in legend_lines(_prefix_on(pred))
                                  for ln in textwrap.wrap(text, WRAP, initial_indent="  ",
                                                          subsequent_indent=" " * 12,
                                                          break_on_hyphens=False)]
    tail += [""] + verdict_lines(pred, rec)
    buf.write("\n".join(tail) + "\n")
    return buf.getvalue()


def document(pred: Prediction) -> dict[str, Any]:
    """The JSON document: identity, assumptions, column meanings, rows, verdict."""
    assumptions = build_assumptions(pred)
    rec = recommendation(pred, model_error_pct(assumptions))
    return {"model": pred.model, "corpus": pred.corpus, "hardware": pred.hardware, "tp": pred.tp,
            "vllm_version": pred.vllm_version or None,
            "history": pred.history or None, "assumptions": assumptions,
            "columns": key_meanings(_prefix_on(pred)),
            "results": [r.result_dict() for r in pred.rows],
            "unavailable": dict(pred.unavailable),
            "skipped": {k: v for k, v in sorted(pred.skipped.items()) if v},
            "best_config": pred.best_config, "best_k": pred.best_k,
            "steady_window": pred.steady_window,
            "suggested_num_requests": pred.suggested_num_requests,
            "recommendation": rec}


def render_csv(pred: Prediction) -> str:
    """CSV of every row and column, after '# ' comment lines with the assumptions and the
    recommendation (read with pandas.read_csv(path, comment='#'))."""
    from simkit.engine.summary import DETAIL_KEYS, PREFIX_KEY, RESULT_KEYS

    assumptions = build_assumptions(pred)
    rec = recommendation(pred, model_error_pct(assumptions))
    buf = io.StringIO()
    buf.write(f"# {title(pred)}\n")
    for key, entry in assumptions.items():
        buf.write(f"# assumption {key}: {entry['text']}\n")
    buf.write(f"# recommendation: {rec['line']}\n")
    for reason in rec["reasons"]:
        buf.write(f"# because {reason}\n")
    writer = csv.writer(buf, lineterminator="\n")
    keys = [*RESULT_KEYS, *DETAIL_KEYS]
    if _prefix_on(pred):
        keys.append(PREFIX_KEY)
    writer.writerow(["model", "corpus", "hardware", "tp", *keys])
    for r in pred.rows:
        d = r.result_dict()
        writer.writerow([pred.model, pred.corpus, pred.hardware, pred.tp,
                         *("" if d[k] is None else d[k] for k in keys)])
    return buf.getvalue()


def _prefix_on(pred: Prediction) -> bool:
    """Prefix caching was on for this prediction (its column and legend entry are printed)."""
    return bool(getattr(pred, "prefix_caching", False))


__all__ = ["assumption_lines", "cell", "document", "model_error_pct", "render_csv",
           "render_table", "title", "verdict_lines"]
