"""Renderings of the fleet document (simkit.fleet.run.fleet): a text table, JSON and a plot.

Every format is built from the same document; nothing here simulates, and no output carries a
clock, so the same inputs give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simkit.choices import FleetOrdering
from simkit.whatif.common import clean

COLUMNS = ["policy", "config", "replicas", "gpus", "ttft_ms_p99", "tpot_ms_p99", "tok_s_per_gpu",
           "usd_per_m_tok", "effective_repeat_share", "prefix_hit_rate", "accepted_per_step",
           "tree_evictions", "binding"]
REPLICA_COLUMNS = ["policy", "config", "replica", "requests", "effective_repeat_share",
                   "prefix_hit_rate", "accepted_per_step", "tree_evictions", "out_tok_s",
                   "ttft_ms_p99", "tpot_ms_p99"]
SHARES = ("effective_repeat_share", "prefix_hit_rate")
# kept first when the table does not fit 100 columns: the answer (replicas, why, what it costs)
ANSWER_FIRST = ("policy", "config", "replicas", "gpus", "binding", "tok_s_per_gpu",
                "usd_per_m_tok", "accepted_per_step")


def _fmt(v: Any, col: str) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if col in SHARES:
        return f"{v:.1%}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        a = abs(v)
        return f"{v:,.0f}" if a >= 100 else (f"{v:.2f}" if a >= 1 else f"{v:.3f}")
    return str(v)


def _table(columns: list[str], rows: list[dict], wide: bool = False,
           first: tuple[str, ...] = ANSWER_FIRST) -> list[str]:
    """A table's lines: the columns that fit 100 characters and a line naming the others
    (`wide`: every column; simkit.report.fit)."""
    from simkit.report.fit import keyed_table

    return keyed_table(columns, [[_fmt(r.get(c), c) for c in columns] for r in rows],
                       ("policy", "config", "binding"), wide, first)


def _wrap(text: str, indent: str = "") -> list[str]:
    import textwrap

    from simkit.report.fit import WIDTH

    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]


def notes(doc: dict) -> list[str]:
    """The assumptions every rendering states."""
    f, reuse = doc["fleet"], doc["reuse"]
    g = f["goals"]
    out = [f"traffic: {f['traffic_label']}; {reuse['arrivals']:,} arrivals, "
           f"{reuse['distinct_requests']:,} distinct requests; repeats {reuse['repeat_share']:.1%}"
           f" of arrivals, reuse distance p50/p90/p99 {_fmt(reuse['reuse_arrivals_p50'], '')} / "
           f"{_fmt(reuse['reuse_arrivals_p90'], '')} / {_fmt(reuse['reuse_arrivals_p99'], '')} "
           f"arrivals ({_fmt(reuse['reuse_s_p50'], '')} / {_fmt(reuse['reuse_s_p90'], '')} / "
           f"{_fmt(reuse['reuse_s_p99'], '')} s)",
           f"pool: {f['pool_requests']:,} requests of {f['model']}/{f['corpus']}"
           + (f" (left out: {f['pool_skipped']})" if f["pool_skipped"] else "")
           + (f"; {f['proxy_note']}" if f["proxy_note"] else ""),
           f["cost_model"],
           f"goals: fleet-wide p99 TTFT <= {g['ttft_ms_p99']:g} ms and p99 TPOT <= "
           f"{g['tpot_ms_p99']:g} ms over every replica's steady-window requests; "
           + (f"replicas fixed at {f['fixed_replicas']}" if f["fixed_replicas"] else
              f"fewest replicas by doubling from 1 then bisection, up to {f['max_replicas']}"),
           ("history per replica: its own suffix tree (the drafter drafting on the replica's "
            "simulated steps, as vLLM's proposer does, over its own stream" if f["ordering"] ==
            FleetOrdering.IN_LOOP else
            "history per replica: its own suffix tree (the drafter replayed over its own stream, "
            "in arrival order, " + (f"concurrent at {f['concurrency']} in flight"
                                    if f["ordering"] == FleetOrdering.CONCURRENT else "sequential"))
           + ") and prefix cache; effective repeat share = requests whose earlier response was "
           "in that replica's tree; accepted/step = accepted drafts per decode request-step",
           "tok/s per GPU and cost: the output tokens the replicas delivered in their steady "
           f"windows (out tok/s) over the GPUs; the traffic offers "
           f"{f['offered_out_tok_s']:,.0f} tok/s" + (f", at ${f['gpu_hour_price']:g} per GPU-hour"
                                     if f["gpu_hour_price"] is not None else
                                     " (no --gpu-hour-price: no cost)")]
    for r in doc["rows"]:
        if r.get("note"):
            out.append(f"{r['policy']}/{r['config']}: {r['note']}")
    return out


def render(doc: dict, wide: bool = False) -> str:
    """The answer table, the per-replica history table and the notes, in 100 columns (`wide`:
    the tables with every column)."""
    f = doc["fleet"]
    per = [{"policy": r["policy"], "config": r["config"], **p}
           for r in doc["rows"] for p in r["per_replica"]]
    lines = [*_wrap(f"fleet: {f['model']}/{f['corpus']} on {f['hardware']} TP{f['tp']}, "
                    f"{f['traffic']['rate']:g} req/s"),
             *_table(COLUMNS, doc["rows"], wide),
             "history per replica (at each row's replica count):",
             *_table(REPLICA_COLUMNS, per, wide)]
    for n in notes(doc):
        lines.extend(_wrap(f"- {n}", "  "))
    return "\n".join(lines).rstrip() + "\n"


def document(doc: dict) -> str:
    """JSON: the document with NaN/inf as null and floats at 6 significant digits."""
    return json.dumps(clean({**doc, "notes": notes(doc)}), indent=1, sort_keys=True) + "\n"


def plot(doc: dict, path: str | Path) -> None:
    """Grouped bars: replicas needed per router policy, one bar per configuration."""
    from simkit.plotting import plt_agg, save_png

    plt = plt_agg()
    rows = doc["rows"]
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    cfgs = list(dict.fromkeys(r["config"] for r in rows))
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / max(1, len(cfgs))
    for j, c in enumerate(cfgs):
        xs, ys = [], []
        for i, p in enumerate(pols):
            r = next(x for x in rows if x["policy"] == p and x["config"] == c)
            xs.append(i + j * width)
            ys.append(r["replicas"] or 0)
        bars = ax.bar(xs, ys, width, label=c)
        for b, y in zip(bars, ys):
            ax.annotate(str(y) if y else "none", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks([i + width * (len(cfgs) - 1) / 2 for i in range(len(pols))], pols, fontsize=8)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("replicas needed")
    f = doc["fleet"]
    ax.set_title(f"{f['model']}/{f['corpus']}, {f['traffic']['rate']:g} req/s: replicas meeting "
                 f"p99 TTFT {f['goals']['ttft_ms_p99']:g} ms, TPOT {f['goals']['tpot_ms_p99']:g} ms",
                 fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)


def render_validation(rows: list[dict], summ: dict, wide: bool = False) -> str:
    """Text table of simkit.fleet.validate's rows and summary, in 100 columns (`wide`: every
    column)."""
    from simkit.report.fit import keyed_table

    cols = ["run_id", "policy", "replica", "config", "requests", "requests_match_records",
            "measured_accepted_per_step", "predicted_accepted_per_step", "accepted_error",
            "table_accepted_per_step", "table_accepted_error", "measured_tok_s",
            "predicted_tok_s", "tok_s_error"]
    heads = [c.replace("_accepted_per_step", "_acc/step").replace("measured", "meas")
             .replace("predicted", "pred") for c in cols]
    cells = [[(f"{r[c]:+.1%}" if c.endswith("error") and r[c] is not None else _fmt(r[c], c))
              for c in cols] for r in rows]
    lines = [*_wrap("fleet validate: the vLLM fleet records, each replica's stream rebuilt and "
                    "replayed (pred: the suffix drafter drafting on the simulated steps, as vLLM's "
                    "proposer; table: the acceptance table simkit validate replays; tok/s on the "
                    "calibration of each run's vLLM version)"),
             *keyed_table(heads, cells, ("run_id", "policy", "config"), wide)]
    for line in _validation_summary(summ):
        lines.extend(_wrap(f"- {line}", "  "))
    return "\n".join(lines).rstrip() + "\n"


def _validation_summary(s: dict) -> list[str]:
    """The summary of `fleet validate` in words and rounded figures (--format json: every key
    and figure as computed)."""
    from simkit.fleet.validate import ACCEPT_GOAL

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.2f} %"

    goal = f"{100 * ACCEPT_GOAL:g} %"
    yes = {True: "yes", False: "no", None: "-"}
    pols = s.get("accepted_by_policy") or {}
    return [
        f"runs: {s['runs']} ({s['spec_runs']} speculative)",
        f"accepted tokens per step against vLLM's, drafter on the simulated steps: mean |error| "
        f"{pct(s['accepted_mean_abs_error'])}, worst {pct(s['accepted_max_abs_error'])}; within "
        f"{goal} in {s['accepted_within_goal']} of {s['spec_runs']} speculative runs",
        f"the same from the acceptance table: mean |error| "
        f"{pct(s['table_accepted_mean_abs_error'])}; within {goal} in "
        f"{s['table_accepted_within_goal']} of {s['spec_runs']}",
        f"output tok/s: mean |error| {pct(s['tok_s_mean_abs_error'])}",
        "accepted tokens per step by router policy, measured / predicted: "
        + (", ".join(f"{p} {v['measured']:.3f} / {v['predicted']:.3f}" for p, v in pols.items())
           or "-") + f"; ranking agrees: {yes[s['ranking_agrees']]}",
        f"every replica's rebuilt requests match its records: {yes[s['requests_match_records']]}"]
