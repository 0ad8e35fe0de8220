"""Plain-text rendering of the `simkit validate` document."""

from __future__ import annotations

from typing import Any

from simkit.validation.floor import floor_line


def _f(v: Any, fmt: str) -> str:
    """`v` formatted, or "-" right-aligned in the same width, so that columns stay aligned."""
    if v is None:
        width = int("".join(ch for ch in fmt.split(".")[0] if ch.isdigit()) or 0)
        return "-".rjust(width)
    return format(v, fmt)


WIDTH = 100      # prose lines wrap here (a table row is never wrapped)


def render(doc: dict[str, Any], wide: bool = False) -> str:
    """Cells table, then MAPE, best-K agreement, acceptance replay and the dynamic-K line; every
    line but a table row wrapped at WIDTH. The table fits WIDTH unless `wide` (or a run id alone
    is too long): the step-time columns, then the stock-async one, go first, and a line names
    them."""
    lines = _lines(doc, wide)
    top = 1 if doc.get("vllm_versions") else 0          # the header, rule and rows follow it
    rows = range(top, top + 2 + len(doc["cells"]))
    return "\n".join(ln for i, line in enumerate(lines)
                     for ln in ([line] if i in rows else _wrap(line)))


def _wrap(line: str) -> list[str]:
    """One prose line at most WIDTH wide, continuation lines indented two more spaces."""
    import textwrap

    lead = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.wrap(line, WIDTH, initial_indent="", subsequent_indent=lead + "  ",
                         break_on_hyphens=False, break_long_words=False) or [line]


def _columns(doc: dict[str, Any], w: int, wide: bool) -> tuple[list[str], list[str]]:
    """(the optional columns shown, those left for --wide): stock (only where some run has the
    figure: a column of '-' says nothing), stepM and stepP, dropped in the order stepM/stepP,
    stock while a row is wider than WIDTH."""
    shown = (["stock"] if any(c.get("predicted_tok_s_stock_async") is not None
                              for c in doc["cells"]) else []) + ["stepM", "stepP"]
    width = {"stock": 8, "stepM": 7, "stepP": 7}
    left: list[str] = []
    for drop in (["stepM", "stepP"], ["stock"]):
        if wide or w + 37 + sum(width[c] for c in shown) <= WIDTH:
            break
        left += [c for c in drop if c in shown]
        shown = [c for c in shown if c not in drop]
    return shown, left


def _lines(doc: dict[str, Any], wide: bool = False) -> list[str]:
    """The report's lines, unwrapped: the table's (title, header, rule, rows) first."""
    versions = doc.get("vllm_versions") or []
    w = max([len("run"), *(len(c["run_id"]) for c in doc["cells"])])   # never cut a run id
    shown, left = _columns(doc, w, wide)
    stock, steps = "stock" in shown, "stepM" in shown
    head = (f"{'run':{w}} {'meas':>7} {'pred':>7} {'err%':>6}" + (f" {'stock':>7}" if stock else "")
            + f" {'accM':>6} {'accP':>6}" + (f" {'stepM':>6} {'stepP':>6}" if steps else ""))
    lines = ([f"vLLM {', '.join(versions)}: runs measured with it, each predicted with its "
              "engine rules and calibration"] if versions else []) + [head, "-" * len(head)]
    for c in doc["cells"]:
        err = None if c["error"] is None else 100 * c["error"]
        lines.append(
            f"{c['run_id']:{w}} {_f(c['measured_tok_s'], '7.0f')} "
            f"{_f(c['predicted_tok_s'], '7.0f')} {_f(err, '+6.1f')} "
            + (f"{_f(c.get('predicted_tok_s_stock_async'), '7.0f')} " if stock else "")
            + f"{_f(c['measured_accepted_per_step'], '6.3f')} "
            f"{_f(c['predicted_accepted_per_step'], '6.3f')}"
            + (f" {_f(c['measured_step_ms'], '6.2f')} {_f(c['predicted_step_ms'], '6.2f')}"
               if steps else ""))
    lines.append("meas/pred: steady output tok/s; "
                 + ("stock: vanilla predicted with async overlap (runs were synchronised by the "
                    "forcing; predicted synchronous); " if stock else "")
                 + "acc: accepted drafts per decode request-step"
                 + ("; step: mean step+gap ms in the window" if steps else ""))
    if left:
        lines.append(f"--wide shows {len(left)} more column(s): {', '.join(left)} ("
                     + ", ".join(({"stock": "vanilla predicted with async overlap",
                                   "stepM": "mean step+gap ms measured",
                                   "stepP": "predicted"})[c] for c in left)
                     + "; --format json: every figure)")
    for key, name in (("mape", "held-out (validation)"), ("mape_calibration", "calibration")):
        if doc[key] is not None:
            lines.append(f"MAPE {name}: {doc[key]:.1f} %")
    vs_mean = doc.get("mape_vs_setting_mean") or {}
    if vs_mean.get("mape_pct") is not None:
        lines.append(f"MAPE held-out vs each setting's mean run (settings run >= 2 times): "
                     f"{vs_mean['mape_pct']:.1f} % ({vs_mean['settings']} settings, "
                     f"{vs_mean['runs']} runs)")
    floor = floor_line(doc.get("repeat_floor") or {})
    if floor:
        lines.append(floor)
    by = {f: v for f, v in doc.get("mape_by_forcing", {}).items() if v is not None}
    if by:
        lines.append("MAPE held-out by forcing regime: " + ", ".join(
            f"{f} {v:.1f} %" for f, v in by.items()))
    rep = doc.get("repeatability", {})
    if rep.get("groups"):
        lines.append(f"repeated runs: measured tok/s spread mean {100 * rep['mean_spread']:.1f} %, "
                     f"max {100 * rep['max_spread']:.1f} % over {len(rep['groups'])} settings")
        for g in rep["groups"]:
            lines.append(f"  {_setting(g)} {g['config']} "
                         f"({g['forcing']}, {g.get('history', 'cold')}): "
                         + ", ".join(f"{v:.0f}" for v in g["measured_tok_s"])
                         + f" tok/s, spread {100 * g['spread']:.1f} %")
    for key in ("best_k_agreement", "best_k_agreement_calibration"):
        b = doc[key]
        if b["total"]:
            lines.append(f"best K ({key.replace('best_k_agreement', 'validation').replace('validation_', '')}): "
                         f"{b['matched']}/{b['total']} groups")
            for g in b["cells"]:
                lines.append(f"  {_setting(g)} ({g['forcing']}, "
                             f"{g.get('history', 'cold')}) Ks {g['ks']}: "
                             f"measured K={g['measured_best_k']}, predicted K={g['predicted_best_k']}"
                             f", measured tok/s lost {100 * g['lost_tok_s_frac']:.1f} %")
    b = doc.get("best_config_agreement") or {}
    if b.get("total"):
        hot = [g for g in b["cells"] if g.get("history", "cold") != "cold"]
        lines.append(f"best configuration (validation, every configuration measured in a "
                     f"setting): {b['matched']}/{b['total']} groups"
                     + (f", {sum(g['match'] for g in hot)}/{len(hot)} under a hot or repeat "
                        "history" if hot else ""))
        if b.get("within_repeat_spread") is not None:
            lines.append(f"best configuration within the repeat spread (the measured best leads "
                         f"the predicted best by <= {100 * b['repeat_tie_frac']:.1f} %, how far two "
                         f"runs of one setting come apart 90 % of the time): "
                         f"{b['within_repeat_spread']}/{b['total']} groups")
        for g in b["cells"]:
            tie = g.get("within_repeat_spread")
            lines.append(f"  {_setting(g)} ({g['forcing']}, {g.get('history', 'cold')}) "
                         f"{len(g['configs'])} configs: measured {g['measured_best']}, predicted "
                         f"{g['predicted_best']}, measured tok/s lost "
                         f"{100 * g['lost_tok_s_frac']:.1f} %"
                         + ("" if tie is None or g["match"] else
                            f" ({'within' if tie else 'beyond'} the repeat spread)"))
    for name, a in doc["acceptance_replay"].items():
        lines.append(f"acceptance replay ({name} table ordering"
                     f"{' = ' + doc['table_ordering'] if name == 'used' else ''}): mean |rel err| "
                     f"{100 * a['mean_abs_rel_error']:.2f} % over {a['cells']} runs")
    band = doc.get("interval") or {}
    cov = band.get("coverage_validation") or {}
    if cov.get("cells"):
        lines.append(_interval_line(band, cov))
    hist = {h: v for h, v in (doc.get("mape_by_history") or {}).items() if v is not None}
    if hist:
        lines.append("MAPE held-out by request history: " + ", ".join(
            f"{h} {v:.1f} %" for h, v in hist.items()))
    for h, accs in (doc.get("acceptance_replay_by_history") or {}).items():
        a = accs.get("used")
        if a:
            lines.append(f"  acceptance replay, history {h}: mean |rel err| "
                         f"{100 * a['mean_abs_rel_error']:.2f} % over {a['cells']} runs")
    fleet = doc.get("fleet")
    if fleet:
        acc = fleet.get("accepted_mean_abs_error")
        lines.append(f"fleet runs (one replica's routed stream each; simkit fleet validate): "
                     f"{fleet['runs']} runs, accepted/step within 2 % in "
                     f"{fleet['accepted_within_goal']} of {fleet['spec_runs']} speculative runs"
                     + (f" (mean |rel err| {100 * acc:.1f} %)" if acc is not None else "")
                     + f", policy ranking {'right' if fleet['ranking_agrees'] else 'wrong'}, "
                     f"tok/s mean |rel err| {100 * (fleet['tok_s_mean_abs_error'] or 0):.1f} %")
    lines += _day_lines(doc)
    dyn = doc["dynamic_k"]
    if dyn["status"] != "measured":
        lines.append(f"dynamic-K vs best-K: {dyn['status']} ({dyn['why']})")
    else:
        lines.append(f"dynamic-K vs best fixed K (measured in the same setting): sign agrees "
                     f"{dyn['sign_agreement']}, mean |gain error| "
                     f"{100 * dyn['mean_abs_gain_error']:.1f} points")
        for c in dyn["cells"]:
            lines.append(f"  {_setting(c)} {c['history']} "
                         f"{c['policy']} vs {c['best_fixed']}: measured "
                         f"{100 * c['measured_gain']:+.1f} %, predicted "
                         f"{100 * c['predicted_gain']:+.1f} % ({'agrees' if c['sign_agrees'] else 'differs'}"
                         f"; K steps {c['k_counts']})")
    return lines


def _interval_line(band: dict[str, Any], cov: dict[str, Any]) -> str:
    """The held-out coverage of the 90 % interval, said as the interval was made: the drift of
    repeated calibration runs alone, or a calibration's drift and fit residuals (with its width)."""
    sources = band.get("sigma_sources") or []
    if all(s.startswith("drift") for s in sources):
        return (f"90 % drift interval (from repeated calibration runs): measured inside it in "
                f"{cov['inside']} of {cov['cells']} held-out runs")
    per = band.get("coverage_validation_by_runner") or {}
    widths = {r: p.get("median_half_width") for r, p in per.items() if p.get("cells")}
    if len(widths) == 2 and None not in widths.values() and len(set(widths.values())) == 2:
        return ("90 % interval (run-to-run drift per runner class and fit residuals of the "
                "calibration's own runs): measured inside it in "
                f"{cov['inside']} of {cov['cells']} held-out runs; " + ", ".join(
                    f"{r} runner +-{100 * widths[r]:.1f} %, {per[r]['inside']} of "
                    f"{per[r]['cells']}" for r in sorted(widths, reverse=True)))
    width = cov.get("median_half_width")
    return (f"90 % interval (run-to-run drift and fit residuals of the calibration's own runs"
            + (f", +-{100 * width:.1f} %" if width is not None else "") + "): measured inside it "
            f"in {cov['inside']} of {cov['cells']} held-out runs")


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.1f} %"


def _day_lines(doc: dict[str, Any]) -> list[str]:
    """The error per UTC day of the runs and on a day the fit never saw."""
    lines = []
    days = doc.get("by_day") or {}
    if days:
        lines.append("MAPE by UTC day of the run: " + "; ".join(
            f"{day} " + ", ".join(f"{p.replace('validation', 'held-out')} {_pct(f['mape'])} "
                                  f"({f['runs']} runs)" for p, f in parts.items())
            for day, parts in days.items()))
    unseen = doc.get("unseen_day")
    if unseen and unseen["status"] != "measured":
        lines.append(f"unseen-day error: {unseen['status']} ({unseen['why']})")
    elif unseen:
        for d in unseen["days"]:
            lines.append(f"unseen day {d['day']} (fitted on the {d['fitted_runs']} calibration runs of "
                         f"{', '.join(d['fitted_on_days'])} only): MAPE {_pct(d['mape'])} over all "
                         f"{d['runs']} runs of the day, held-out {_pct(d['mape_held_out'])} "
                         f"({d['held_out_runs']}), hot/repeat {_pct(d['mape_hot_repeat'])} "
                         f"({d['hot_repeat_runs']})"
                         + (f", inside the 90 % interval {d['interval_inside']} of "
                            f"{d['interval_cells']}" if d.get("interval_cells") else ""))
    return lines


def _setting(g: dict) -> str:
    """'model corpus cN nR[ capM]': the cap only where it is not the 1,024 of most runs."""
    cap = g.get("max_tokens_cap") or 0
    return (f"{g['model']} {g['corpus']} c{g['concurrency']} n{g['num_requests']}"
            + (f" cap{cap}" if cap and cap != 1024 else ""))
