"""Predict the reference study's figures with simkit and set them beside the published ones.

Per model (B200, mix corpus, closed loop at concurrency 32, max_tokens 8192, max_model_len 16384,
gmu 0.85): van(OFF) = the `vanilla` row (async scheduling); final = the best of K-pad at
K in {4, 6, 8, 12} and the dynamic-K policies over KS = {4, 6, 12}; ratio = final / van(OFF).
Error = predicted / published - 1. Nothing here feeds back into any coefficient.
"""

from __future__ import annotations

import math
from typing import Any

from simkit.catalog.models import list_models
from simkit.engine.config import DEFAULT_CONFIGS, parse_configs
from simkit.engine.runner import Cell, default_num_requests, engine_config, run_ladder
from simkit.app.cells import load_workload
from simkit.engine.sim import ClosedLoop
from simkit.engine.summary import Row
from simkit.app.verdict import DRIFT, best_dynamic, best_kpad, dynamic_verdict, fastest
from simkit.engine.workload import Workload
from simkit.app.options import RunOptions
from simkit.history import History
from simkit.reference.published import (CONDITIONS, FINDINGS, HELD_OUT, PUBLISHED, SOURCE,
                                        published)
from simkit.whatif.common import WhatIfResult, skip_note, skipped_of

# the study's run settings (simkit.app.options.RunOptions): its hardware and corpus, one seed
# (a quick look; `simkit whatif reference` simulates 3, as predict does); the closed loop at
# concurrency 32, max_tokens and max_model_len are fixed to the study's (predict_model)
STUDY = RunOptions(hardware=CONDITIONS["hardware"], corpus=CONDITIONS["corpus"], seeds=1)
MAIN_COLUMNS = ["model", "tp", "van_pred", "van_pub", "van_err", "final_pred", "final_lever",
                "final_pub", "final_err", "ratio_pred", "ratio_pub", "ratio_err", "best_k",
                "dynamic_verdict", "suffix_speedup", "tokens_per_step_final", "host_frac_final"]


def study_models() -> list[str]:
    """The six published models first, then the five held out (all in the catalogue)."""
    names = [r.model for r in PUBLISHED] + list(HELD_OUT)
    missing = [n for n in names if n not in list_models()]
    if missing:
        from simkit.errors import UnknownNameError

        raise UnknownNameError(f"study models missing from the catalogue: {missing}")
    return names


def _err(pred: float | None, pub: float | None) -> float | None:
    if pred is None or pub is None or not pub or pred != pred:
        return None
    return pred / pub - 1


def ladder_summary(rows: list[Row]) -> dict[str, Any]:
    """van(OFF), suffix, best K-pad, best dynamic and the final lever from a ladder's Rows."""
    by = {r.config: r for r in rows}
    van = by.get("vanilla")
    kp = [r for r in rows if r.config.startswith("kpad-")]
    best_kp, best_dyn = best_kpad(rows), best_dynamic(rows)
    final = fastest([r for r in (best_kp, best_dyn) if r is not None])
    v = van.output_tok_s if van else None
    out = {"van_pred": v,
           "final_pred": final.output_tok_s if final else None,
           "final_lever": ("bestKpad" if final is best_kp else final.config) if final else None,
           "best_k": best_kp.k if best_kp else None,
           "best_kpad_tok_s": best_kp.output_tok_s if best_kp else None,
           "best_dynamic": best_dyn.config if best_dyn else None,
           "best_dynamic_tok_s": best_dyn.output_tok_s if best_dyn else None,
           "suffix_speedup": (by["suffix"].output_tok_s / v) if "suffix" in by and v else None,
           "host_frac_final": final.host_frac if final else None,
           "tokens_per_step_final": final.tokens_per_step if final else None,
           "kpad_tok_s": {r.k: r.output_tok_s for r in kp}}
    out["ratio_pred"] = (out["final_pred"] / v) if v and out["final_pred"] else None
    out["dynamic_vs_best_k"] = (best_dyn.output_tok_s / best_kp.output_tok_s - 1
                                if best_dyn and best_kp else None)
    verdict = dynamic_verdict(best_dyn, best_kp)
    out["dynamic_verdict"] = str(verdict) if verdict else None
    return out


def predict_model(run: RunOptions = STUDY, *, host_factor: float = 1.0,
                  configs: str = DEFAULT_CONFIGS, workload: Workload | None = None
                  ) -> dict[str, Any]:
    """One model's ladder, summarised (see ladder_summary): the model, corpus, hardware, TP,
    calibration, vLLM version, profile source and history of `run`, its seeds, requests per
    run and workers; the closed loop, max_tokens and max_model_len are the study's
    (CONDITIONS), whatever `run` says. `host_factor` multiplies the host's assumed speed;
    `workload`, when given, replaces the run's (model, corpus) profile."""
    from simkit.costmodel import load_cost_model
    from simkit.whatif.host import with_host_factor

    workload = workload or load_workload(run.model, run.corpus, run.source, run.history)
    cost = load_cost_model(run.model, run.hardware, tp=run.tp, calibration=run.calibration,
                           vllm_version=run.vllm_version)
    if host_factor != 1.0:
        cost = with_host_factor(cost, host_factor)
    n = run.num_requests or default_num_requests(workload, CONDITIONS["concurrency"])
    server = engine_config(cost, max_tokens=CONDITIONS["max_tokens"],
                           max_model_len=CONDITIONS["max_model_len"])
    ladder = run_ladder(Cell(workload, cost, server), parse_configs(configs),
                        seeds=run.seeds, num_requests=n,
                        load=ClosedLoop(CONDITIONS["concurrency"]), workers=run.workers)
    rows = ladder.rows
    out = {"model": run.model, "corpus": run.corpus, "tp": cost.tp, "tp_chosen": cost.tp_chosen,
           "cost": cost.describe(), "cost_label": str(cost.label), "num_requests": n,
           "origin": workload.origin, "proxy_note": workload.proxy_note,
           "skipped": skipped_of(ladder), **ladder_summary(rows)}
    return out


def with_published(row: dict[str, Any]) -> dict[str, Any]:
    """Add the published figures and the errors (None for held-out models)."""
    pub = published(row["model"])
    row["published"] = pub is not None
    row["van_pub"] = pub.van_off if pub else None
    row["final_pub"] = pub.final if pub else None
    row["ratio_pub"] = pub.ratio if pub else None
    row["final_lever_pub"] = pub.final_lever if pub else None
    row["van_err"] = _err(row["van_pred"], row["van_pub"])
    row["final_err"] = _err(row["final_pred"], row["final_pub"])
    row["ratio_err"] = _err(row["ratio_pred"], row["ratio_pub"])
    return row


def geomean(values: list[float]) -> float:
    """Geometric mean of the positive values (NaN when there is none)."""
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def reproduce(run: RunOptions = STUDY, *, models: list[str] | None = None,
              host_factor: float = 1.0) -> WhatIfResult:
    """The side-by-side table: every study model (or `models`) predicted under `run` (its
    model replaced by each; see predict_model), published rows with errors."""
    models = models or study_models()
    hardware, corpus, history = run.hardware, run.corpus, run.history
    rows = [with_published(predict_model(run.but(model=m), host_factor=host_factor))
            for m in models]
    pub_rows = [r for r in rows if r["published"]]
    summary = {
        "mean_abs_err_van": _mean_abs([r["van_err"] for r in pub_rows]),
        "mean_abs_err_final": _mean_abs([r["final_err"] for r in pub_rows]),
        "mean_abs_err_ratio": _mean_abs([r["ratio_err"] for r in pub_rows]),
        "geomean_ratio_pred": geomean([r["ratio_pred"] for r in rows]),
        "geomean_ratio_pred_models": len(rows),
        "geomean_ratio_study_11_models": FINDINGS["geomean_ratio_11_models"],
        "ratio_range_pred": (min(r["ratio_pred"] or math.inf for r in rows),
                             max(r["ratio_pred"] or 0 for r in rows)),
        "ratio_range_study": FINDINGS["ratio_range"],
        "dynamic_beats_best_k": [r["model"] for r in rows if r["dynamic_verdict"] == "beats"],
        "dynamic_ties_best_k": [r["model"] for r in rows if r["dynamic_verdict"] == "ties"],
        "suffix_regresses": [r["model"] for r in rows if (r["suffix_speedup"] or 2) < 1],
    }
    notes = [f"published figures: {SOURCE}",
             "request history: " + (history.label if history else "each profile's own (warm where the shipped "
                                    "profile says so)") + " (an assumption, not fitted: "
             "simkit whatif reference --history cold,warm,hot compares them)",
             f"conditions: {CONDITIONS}; host factor {host_factor:g} on the B200 host "
             "(its host_speed is an assumption, 1.0 = the CPU of the H200 machine the calibration "
             "runs were measured on)",
             "TP degrees are simkit's choice (smallest TP with a useful KV cache), the study did "
             "not publish them: " + ", ".join(f"{r['model']} TP{r['tp']}" for r in rows),
             "cost model: " + "; ".join(sorted({r["cost_label"] for r in rows})),
             "final = best of K-pad K in {4,6,8,12} and dynamic-K (table/feedback/goodput "
             "policies over KS={4,6,12}); error = predicted / published - 1",
             f"{len(pub_rows)} published rows; {len(rows) - len(pub_rows)} models predicted "
             "without published figures (held out)",
             f"mean |error| over published rows: van {_pct(summary['mean_abs_err_van'])}, final "
             f"{_pct(summary['mean_abs_err_final'])}, ratio {_pct(summary['mean_abs_err_ratio'])}",
             f"geometric-mean ratio predicted {summary['geomean_ratio_pred']:.2f}x over "
             f"{len(rows)} models (study: 2.7x over 11, range 1.49x..4.70x; predicted range "
             f"{summary['ratio_range_pred'][0]:.2f}x..{summary['ratio_range_pred'][1]:.2f}x)",
             f"study: {FINDINGS['dynamic']}; simkit: dynamic beats best K on "
             f"{summary['dynamic_beats_best_k'] or 'no model'} (ties within max(seed spread, "
             f"{DRIFT:.0%}) on {len(summary['dynamic_ties_best_k'])} models)",
             f"study: {FINDINGS['suffix']}; simkit: suffix below van(OFF) on "
             f"{summary['suffix_regresses'] or 'no model'}"]
    proxies = {r["model"]: r["proxy_note"] for r in rows if r["proxy_note"]}
    if proxies:
        notes.append(f"{len(proxies)} of {len(rows)} models replay proxy outputs or tokenizers "
                     "(JSON extra.proxies, or `simkit predict` per model, says which)")
    if skip_note([(r["model"], r["skipped"]) for r in rows]):    # never dropped silently
        notes.append(skip_note([(r["model"], r["skipped"]) for r in rows]))
    mean_tps = {r["model"]: r["tokens_per_step_final"] for r in rows}
    notes.append("tokens per decode step of the final configuration (acceptance + bonus): " +
                 ", ".join(f"{m} {v:.2f}" for m, v in mean_tps.items() if v))
    return WhatIfResult("reference", f"reference study on {hardware}, {corpus} corpus",
                        MAIN_COLUMNS, rows,
                        {"models": models, "hardware": hardware, "corpus": corpus,
                         "host_factor": host_factor, "seeds": run.seeds,
                         "num_requests": run.num_requests, "configs": DEFAULT_CONFIGS,
                         "history": history.label if history else None}, notes,
                        {"summary": summary, "proxies": proxies})


def _mean_abs(vals: list[float | None]) -> float:
    vals = [abs(v) for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def _pct(v: float) -> str:
    return "-" if v != v else f"{v:.0%}"


HISTORY_COLUMNS_PER = ("ratio", "lever", "best_k")


def reproduce_histories(histories: list[History], run: RunOptions = STUDY, *,
                        models: list[str] | None = None, host_factor: float = 1.0
                        ) -> WhatIfResult:
    """One column set per request history: predicted final/van(OFF) ratio, final lever and best
    K beside the published ratio, and which histories bring each published row within 25 %.
    History is a stated assumption per column, never fitted to the published figures; each
    replaces the history of `run` (reproduce)."""
    labels = [h.label for h in histories]
    hardware, corpus = run.hardware, run.corpus
    per = {h.label: reproduce(run.but(history=h), models=models, host_factor=host_factor)
           for h in histories}
    first = per[labels[0]]
    rows = []
    for i, base in enumerate(first.rows):
        row = {"model": base["model"], "ratio_pub": base["ratio_pub"],
               "final_lever_pub": base["final_lever_pub"]}
        within = []
        for h in labels:
            r = per[h].rows[i]
            row[f"ratio_{h}"] = r["ratio_pred"]
            row[f"lever_{h}"] = r["final_lever"]
            row[f"best_k_{h}"] = r["best_k"]
            if r["ratio_pred"] and base["ratio_pub"] and \
                    abs(r["ratio_pred"] / base["ratio_pub"] - 1) <= 0.25:
                within.append(h)
        row["histories_within_25pct"] = ",".join(within) if base["published"] else None
        rows.append(row)
    columns = ["model", "ratio_pub", "final_lever_pub"]
    for h in labels:
        columns += [f"{c}_{h}" for c in HISTORY_COLUMNS_PER]
    columns.append("histories_within_25pct")
    geo = {h: per[h].extra["summary"]["geomean_ratio_pred"] for h in labels}
    notes = [f"published figures: {SOURCE}",
             "one column set per request history (simkit.history): an assumption per column, "
             "not a fitted knob; ratio = final configuration / van(OFF), predicted",
             "geometric-mean ratio predicted: " + ", ".join(f"{h} {g:.2f}x" for h, g in
                                                           geo.items()) +
             f" (study: {FINDINGS['geomean_ratio_11_models']}x over 11 models)",
             "histories_within_25pct: the histories whose predicted ratio is within 25 % of the "
             "published one (published rows only)"]
    notes += [f"{h}: {note}" for h in labels for note in per[h].notes
              if note.startswith("skipped profile requests")]
    return WhatIfResult("reference-history",
                        f"reference study on {hardware}, {corpus} corpus, per request history",
                        columns, rows,
                        {"models": [r["model"] for r in rows], "hardware": hardware,
                         "corpus": corpus, "histories": labels, "host_factor": host_factor,
                         "seeds": run.seeds, "num_requests": run.num_requests}, notes,
                        {"geomean_ratio_pred": geo,
                         "per_history": {h: per[h].extra["summary"] for h in labels}})
