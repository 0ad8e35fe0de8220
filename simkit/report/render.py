"""`simkit predict` as text table, JSON document and CSV. The text is for a planner: the
recommendation and the ladder first, fitting 100 columns (--wide: every column), then the legend
and every assumption. Same Prediction in, byte-identical text out."""

from __future__ import annotations

import csv
import io
import textwrap
from typing import TYPE_CHECKING, Any

from simkit.report.assumptions import build_assumptions
from simkit.report.fit import WIDE, WIDTH, fit_columns, more_columns_line, render_text_table
from simkit.report.legend import Column, columns, key_meanings, legend_lines
from simkit.report.recommend import exact_k_slots, recommendation
from simkit.report.settings import deploy_settings, settings_lines

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction
    from simkit.engine.summary import Row

WRAP = WIDTH        # title, assumption and legend lines wrap here, at word boundaries


def title(pred: Prediction) -> str:
    """The report's first line."""
    hist = f", history {pred.history.label}" if pred.history else ""
    ver = f", vLLM {pred.vllm_version}" if pred.vllm_version else ""
    return (f"simkit predict: {pred.model}, corpus {pred.corpus}{hist}, {pred.hardware} TP "
            f"{pred.tp}{ver} (a prediction, not a validated forecast)")


def model_error_pct(assumptions: dict[str, Any]) -> float | None:
    """The cost model's held-out MAPE (%), when the profile records it."""
    val = (assumptions.get("cost_model", {}).get("value") or {}).get("validation") or {}
    return val.get("held_out_mape_pct")


def interval_pct(assumptions: dict[str, Any]) -> float | None:
    """The relative half-width (%) of the 90 % interval a rerun measures, when the calibration
    states one (its "interval" block; the widest of its runner classes' where it has them)."""
    band = (assumptions.get("cost_model", {}).get("value") or {}).get("interval") or {}
    per = [v["half_width_pct"] for v in (band.get("by_runner") or {}).values()
           if v.get("half_width_pct") is not None]
    # per runner class: the wider band (the speculative configurations'), so that a lead
    # inside either configuration's band is called a tie
    return max(per) if per else band.get("half_width_pct")


def unmeasured_note(assumptions: dict[str, Any]) -> str | None:
    """Why the calibration's error is unmeasured for this vLLM (it was transferred from another
    version's runs), else None."""
    moved = (assumptions.get("cost_model", {}).get("value") or {}).get("transferred_from")
    return moved.get("note") if isinstance(moved, dict) else None


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


def note_lines(pred: Prediction) -> list[str]:
    """The configs that could not run and the profile requests skipped, one line each."""
    out = [f"{name}: unavailable - {reason}" for name, reason in pred.unavailable.items()]
    skipped = {k: v for k, v in pred.skipped.items() if v}
    if skipped:
        out.append("skipped profile requests: " +
                   ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())))
    return out


def full_recommendation(pred: Prediction, assumptions: dict[str, Any]) -> dict[str, Any]:
    """The recommendation (simkit.report.recommend) with, under 'settings', what to add to
    `vllm serve` for it and the load it holds for (simkit.report.settings)."""
    rec = recommendation(pred, model_error_pct(assumptions), interval_pct(assumptions),
                         unmeasured_note(assumptions))
    rec["settings"] = deploy_settings(pred, rec["config"])
    return rec


def verdict_lines(pred: Prediction, rec: dict[str, Any]) -> list[str]:
    """Unavailable configs, skipped requests, then the recommendation and its reasons (wrapped)."""
    out = [ln for note in note_lines(pred)
           for ln in textwrap.wrap(note, WRAP, subsequent_indent="  ", break_on_hyphens=False)]
    out.extend(textwrap.wrap(f"recommendation: {rec['line']}", WRAP, subsequent_indent="  ",
                             break_on_hyphens=False))
    for reason in rec["reasons"]:
        out.extend(textwrap.wrap(f"because {reason}", WRAP, initial_indent="  ",
                                 subsequent_indent="    ", break_on_hyphens=False))
    for line in settings_lines(rec.get("settings"), breakable=True):
        out.extend(textwrap.wrap(line, WRAP, subsequent_indent="  ", break_on_hyphens=False,
                                 break_long_words=False))
    return out


# the planner's view, most wanted first: which config, how fast, how sure, why (acceptance, K),
# what a user feels (latency), then the engine detail; --wide prints every column
PLANNER_ORDER = ("config", "output_tok_s", "speedup_vs_vanilla", "output_tok_s_std",
                 "mean_accepted", "k", "mean_k", "tpot_ms_p50", "ttft_ms_p50", "host_frac",
                 "tokens_per_step", "padded_token_waste", "prefix_hit_rate", "full_graph_frac",
                 "piecewise_steps_frac", "none_steps_frac", "itl_ms_p99", "preemptions")


def table_columns(pred: Prediction, wide: bool = False) -> tuple[list[Column], list[Column]]:
    """(the columns printed, the columns left out): every column with `wide`, else those of
    PLANNER_ORDER that fit fit.WIDTH, in table order."""
    cols = list(columns(_prefix_on(pred)))
    if wide:
        return cols, []
    cells = [[cell(r, c.key) for c in cols] for r in pred.rows]
    keys = [c.key for c in cols]
    order = [keys.index(k) for k in PLANNER_ORDER if k in keys]
    order += [i for i in range(len(cols)) if i not in order]
    kept = set(fit_columns([c.header for c in cols], cells, WIDTH, order))
    return ([c for i, c in enumerate(cols) if i in kept],
            [c for i, c in enumerate(cols) if i not in kept])


def render_table(pred: Prediction, legend: bool = True, wide: bool = False) -> str:
    """The text report, planner first: title, recommendation, ladder table (the columns that fit
    100 characters, and a line naming the others; `wide`: every column), legend of the printed
    columns (optional), then every assumption."""
    assumptions = build_assumptions(pred)
    rec = full_recommendation(pred, assumptions)
    shown, left_out = table_columns(pred, wide)
    table = render_text_table([c.header for c in shown],
                              [[cell(r, c.key) for c in shown] for r in pred.rows],
                              left=("config",), width=WIDE if wide else WIDTH)
    lines = [*textwrap.wrap(title(pred), WRAP), "", *verdict_lines(pred, rec), "",
             table.rstrip("\n"), *more_columns_line([c.header for c in left_out])]
    if legend:
        lines += ["", "Legend"] + [ln for text in legend_lines(_prefix_on(pred), shown,
                                                                  exact_k_slots(pred))
                                   for ln in textwrap.wrap(text, WRAP, initial_indent="  ",
                                                           subsequent_indent=" " * 12,
                                                           break_on_hyphens=False)]
    lines += ["", *assumption_lines(assumptions)]
    return "\n".join(lines) + "\n"


def document(pred: Prediction) -> dict[str, Any]:
    """The JSON document: identity, assumptions, column meanings, rows, verdict."""
    assumptions = build_assumptions(pred)
    rec = full_recommendation(pred, assumptions)
    return {"model": pred.model, "corpus": pred.corpus, "hardware": pred.hardware, "tp": pred.tp,
            "vllm_version": pred.vllm_version or None,
            "history": pred.history.label if pred.history else None, "assumptions": assumptions,
            "columns": key_meanings(_prefix_on(pred), exact_k_slots(pred)),
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
    rec = full_recommendation(pred, assumptions)
    buf = io.StringIO()
    buf.write(f"# {title(pred)}\n")
    for key, entry in assumptions.items():
        buf.write(f"# assumption {key}: {entry['text']}\n")
    buf.write(f"# recommendation: {rec['line']}\n")
    for reason in rec["reasons"]:
        buf.write(f"# because {reason}\n")
    for line in settings_lines(rec.get("settings")):
        buf.write(f"# {line}\n")
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


__all__ = ["PLANNER_ORDER", "assumption_lines", "cell", "document", "full_recommendation", "interval_pct", "model_error_pct",
           "unmeasured_note", "note_lines", "render_csv",
           "render_table", "table_columns", "title", "verdict_lines"]
