"""Cells of `simkit validate` (one per measured run) and the figures over them: MAPE, best-K
agreement among the measured kpad Ks, the acceptance-replay check, the JSON document and plot."""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from simkit.app.cells import run_history
from simkit.choices import Ordering
from simkit.history import History
from simkit.costmodel.step_records import forcing_regime, forcing_synchronised, version_of
from simkit.validation.run_prediction import (ORDERINGS, measured_figures, predict_run,
                                              recorded_step_error)
from simkit.validation.requests import check_against_run, request_pool, run_requests
from simkit.validation.parallel import map_runs
from simkit.validation.floor import FLEET_PREFIX, config_label, runner_class
from simkit.validation.spread import calibration_sigma, class_sigma, coverage, interval, repeat_tie

PURPOSES = ("validation", "calibration", "all")




def build_cells(runs, steps, *, purpose: str = "validation", seeds: int = 1,
                ordering: Ordering = Ordering.CONCURRENT, run_ids: list[str] | None = None,
                compare_orderings: bool = False, calibration: str | None = None,
                progress: Callable[[str], None] | None = None,
                history: History | None = None,
                pools: dict[tuple, list] | None = None, keep: frozenset[str] = frozenset(),
                kept: dict[str, Any] | None = None,
                diagnosis: bool = True) -> list[dict[str, Any]]:
    """One cell per selected measured run: measured vs predicted tok/s under the run's own
    conditions (its request history included, unless `history` overrides it for every run),
    the stock-async prediction for runs whose overlap the harness removed, the engine's
    default-window prediction (diagnosis), and accepted tokens per decode step. `pools`:
    (model, corpus) -> its request_pool, filled here and shared by the calls of one command
    (validate's unseen-day predictions read the corpora its first call read). `kept`: run id ->
    its first prediction's trajectory (run_prediction.KeptRun), filled here for the runs in
    `keep`, and priced again by the predictions of a later call whose conditions it matches
    (validate's unseen-day refits: the same runs, another calibration). `diagnosis` False:
    the cells carry the error and its interval only, without what explains it (the cost model
    on the recorded steps, the stock-async prediction: a second simulation of a synchronised
    vanilla run): what the unseen-day refits' figures read, in less time."""
    from simkit.errors import InputError

    if purpose not in PURPOSES:
        raise InputError(f"must be one of {', '.join(PURPOSES)}", field="purpose")
    if ordering not in ORDERINGS:
        raise InputError(f"must be one of {', '.join(ORDERINGS)}", field="ordering")
    rows = [r for r in runs.sort_values("run_id").to_dict("records")
            if (purpose == "all" or r["purpose"] == purpose)
            and not str(r["corpus"]).startswith(FLEET_PREFIX)]
    if run_ids:
        known = {r["run_id"] for r in runs.to_dict("records")}
        bad = sorted(set(run_ids) - known)
        if bad:
            raise InputError(f"unknown run id(s) {bad}", field="run-id")
        rows = [r for r in rows if r["run_id"] in run_ids]
    sigma_of = _sigma_lookup(runs, calibration)
    pools = {} if pools is None else pools
    for run in rows:               # in this process, before any worker forks (they inherit)
        key = (run["model"], run["corpus"])
        if key not in pools:
            pools[key] = request_pool(*key)
        sigma_of(run)
    rebuilt = {r["run_id"]: run_requests(pools[(r["model"], r["corpus"])], r) for r in rows}
    _refuse_unmatched(rows, rebuilt)
    # each run's steps, found once here (a filter of every step per run took ~4 ms each)
    rows_of = steps.groupby("run_id", sort=False).indices
    own = {r["run_id"]: _rows_at(steps, rows_of.get(r["run_id"], [])) for r in rows}
    one = functools.partial(_cell, steps=own, rebuilt=rebuilt, sigma_of=sigma_of, seeds=seeds,
                            ordering=ordering, compare_orderings=compare_orderings,
                            calibration=calibration, history=history, keep=keep,
                            kept={} if kept is None else kept, diagnosis=diagnosis)
    cells = map_runs(one, rows, progress, group=functools.partial(_table_group, history=history))
    for cell in cells:             # a worker's kept trajectory comes back inside its cell
        trajectory = cell.pop("kept", None)
        if trajectory is not None and kept is not None:
            kept[cell["run_id"]] = trajectory
    return cells


def _rows_at(frame, at):
    """The rows of `frame` at the ascending positions `at`: a slice where they are contiguous
    (the records keep one run's steps together), else a take; the same rows either way, the
    slice without copying every column (a take of each of 196 runs' steps cost ~0.8 s)."""
    if len(at) and at[-1] - at[0] + 1 == len(at):
        return frame.iloc[at[0]:at[-1] + 1]
    return frame.iloc[at]


def _table_group(run: dict[str, Any], history: History | None) -> tuple:
    """What decides the acceptance table a run's prediction reads, near enough to keep two
    runs of one table off the workers at the same time (parallel.longest_first): its requests
    (model, corpus, count, limits), the history they are replayed after and the concurrency."""
    return (run["model"], run["corpus"], int(run["num_requests"]), int(run["max_model_len"]),
            int(run.get("max_tokens_cap") or 0), (history or run_history(run)).tree_label,
            int(run["concurrency"]))


def _refuse_unmatched(rows: list[dict[str, Any]], rebuilt: dict[str, tuple]) -> None:
    """One error, before any simulation, naming every run whose requests rebuilt from the traces
    here (`rebuilt`: run id -> run_requests) differ in number or output tokens from its records:
    its prediction would replay other requests than the GPU served, a figure simkit cannot stand
    behind."""
    from simkit.errors import InputError

    bad = []
    for run in rows:
        check = check_against_run(rebuilt[run["run_id"]][0], run)
        if not check["ok"]:
            bad.append(f"{run['run_id']} ({check['num_requests']} requests and "
                       f"{check['output_tokens']} output tokens rebuilt, "
                       f"{check['expected_requests']} and {check['expected_output_tokens']} "
                       f"recorded)")
    if bad:
        raise InputError("the requests rebuilt from your traces do not match the records of "
                         f"{len(bad)} run(s): " + "; ".join(bad) + ". Are the traces the ones "
                         "the runs were made from (SIMKIT_TRACES_SRC)?", path="runs.parquet",
                         field="num_requests, total_output_tokens")


def _cell(run: dict[str, Any], *, steps, rebuilt, sigma_of, seeds: int, ordering: Ordering,
          compare_orderings: bool, calibration: str | None,
          history: History | None, keep: frozenset[str], kept: dict[str, Any],
          diagnosis: bool = True) -> dict[str, Any]:
    """The cell of one measured run (build_cells); `steps`: run id -> its step records; under
    "kept" its seed-0 trajectory when the run is in `keep`; `diagnosis` as build_cells'."""
    reqs, skipped = rebuilt[run["run_id"]]
    st = steps[run["run_id"]]
    check = check_against_run(reqs, run, st)
    meas = measured_figures(run, st)
    hist = history or run_history(run)
    conc = int(run["concurrency"])
    # seed 0 also yields the engine's default window (from the concurrency-th completion): the
    # same simulation counted from a later completion, not a second simulation
    run_id = run["run_id"]
    preds = [predict_run(reqs, run, ordering=ordering, seed=s, calibration=calibration, history=hist,
                         other_window_starts=(conc,) if s == 0 else (),
                         keep=s == 0 and run_id in keep, reuse=kept.get(run_id) if s == 0 else None)
             for s in range(max(1, seeds))]
    tok = [p.output_tok_s for p in preds]
    pred = preds[0]
    sync = forcing_synchronised(run.get("force_copy", ""))
    spec = str(run["config"]) != "vanilla"
    m = float(run["output_tok_s"])
    p = sum(tok) / len(tok)
    band = sigma_of(run)
    cell: dict[str, Any] = {
        "run_id": run["run_id"], "purpose": run["purpose"], "model": run["model"],
        "forcing": forcing_regime(run.get("force_copy", "")), "corpus": run["corpus"],
        "config": config_label(run), "k": int(run["k"] or 0),
        "vllm_version": version_of(run.get("vllm_version")) or "0.26",
        "history": run_history(run).label, "history_assumed": hist.label,
        "k_counts": _k_counts(run),
        "concurrency": int(run["concurrency"]), "num_requests": int(run["num_requests"]),
        "max_tokens_cap": int(run.get("max_tokens_cap") or 0),
        "measured_tok_s": m, "predicted_tok_s": p, "error": p / m - 1,
        "predicted_tok_s_seed_std": _std(tok),
        "runner": runner_class(run),
        "predicted_interval": interval(p, class_sigma(band, runner_class(run))),
        "interval_source": band["source"],
        "repeat_tie_frac": repeat_tie(band.get("drift_sigma_log")),
        "measured_accepted_per_step": meas["accepted_per_step"] if spec else None,
        "predicted_accepted_per_step": pred.accepted_per_step if spec else None,
        "measured_step_ms": meas["mean_step_ms"], "predicted_step_ms": pred.mean_step_ms,
        "measured_window_s": meas["window_s"], "predicted_window_s": pred.window_s,
        "conditions": ("synchronous step (forcing synchronised the stream)" if sync and
                       not spec else "as run") + ", front-end in the engine thread",
        "requests_match_records": check["ok"], "requests_skipped": skipped,
    }
    if pred.kept is not None:
        cell["kept"] = pred.kept
    if not diagnosis:
        return cell
    if sync and not spec:      # what stock vLLM (overlap kept, front-end process) would do
        stock = predict_run(reqs, run, ordering=ordering, sync=False, serial_frontend=False,
                            calibration=calibration, history=hist)
        cell["predicted_tok_s_stock_async"] = stock.output_tok_s
    cell["predicted_tok_s_engine_window"] = pred.other_window_tok_s[conc]
    if spec and compare_orderings:
        other = next(o for o in ORDERINGS if o != ordering)
        cell[f"predicted_accepted_per_step_{other}"] = predict_run(
            reqs, run, ordering=other, calibration=calibration, history=hist).accepted_per_step
    on_rec = recorded_step_error(run, st, calibration)
    step_term = meas["mean_step_ms"] / pred.mean_step_ms - 1
    acc_term = ((1 + pred.accepted_per_step) / (1 + meas["accepted_per_step"]) - 1
                if spec else 0.0)
    cell["diagnosis"] = {
        "step_time": step_term, "acceptance": acc_term,
        "rest": (1 + cell["error"]) / ((1 + step_term) * (1 + acc_term)) - 1,
        "cost_model_on_recorded_steps": on_rec["step"],
        "device_on_recorded_steps": on_rec["device"]}
    return cell


def _sigma_lookup(runs, calibration: str | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """run -> the interval sigma of the calibration that predicts it (the given one, else the
    default of the run's GPU and vLLM version; simkit.validation.spread.calibration_sigma)."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration
    from simkit.costmodel.step_records import hardware_of

    cache: dict[str | None, dict[str, Any]] = {}

    def sigma_of(run: dict[str, Any]) -> dict[str, Any]:
        ref = calibration or default_calibration(
            hardware_of(str(run.get("gpu", ""))) or "h200",
            version_of(run.get("vllm_version")) or "0.26")
        if ref not in cache:
            cache[ref] = calibration_sigma(read_calibration(ref) if ref else None, runs)
        return cache[ref]
    return sigma_of


def _k_counts(run: dict[str, Any]) -> dict[str, int] | None:
    import json

    raw = run.get("k_counts")
    if not raw or raw != raw:
        return None
    counts = json.loads(str(raw))
    return counts or None


def _std(vals: list[float]) -> float:
    if len(vals) < 2:
        return 0.0
    mu = sum(vals) / len(vals)
    return math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1))


def mape(cells: list[dict[str, Any]], purpose: str) -> float | None:
    """Mean absolute percentage error of predicted tok/s over the cells of one purpose."""
    errs = [abs(c["error"]) for c in cells if c["purpose"] == purpose and c["error"] == c["error"]]
    return 100.0 * sum(errs) / len(errs) if errs else None


SETTING_KEYS = ("model", "corpus", "concurrency", "num_requests", "max_tokens_cap", "forcing",
                "history")


def _same_setting(c: dict[str, Any]) -> tuple:
    """What makes runs comparable: same model, corpus, load, request list, cap, forcing, history."""
    return (c["model"], c["corpus"], c["concurrency"], c["num_requests"],
            c.get("max_tokens_cap", 0), c.get("forcing", ""), c.get("history", "cold"))


def _setting_doc(key: tuple) -> dict[str, Any]:
    return dict(zip(SETTING_KEYS, key))


def _fastest(by: dict) -> tuple[dict, Any, Any]:
    """Mean measured tok/s per key (repeats averaged) and the measured and predicted fastest key
    (ties: the first in sorted order)."""
    meas = {k: sum(c["measured_tok_s"] for c in cs) / len(cs) for k, cs in by.items()}
    pred = {k: sum(c["predicted_tok_s"] for c in cs) / len(cs) for k, cs in by.items()}
    return meas, max(sorted(meas), key=meas.get), max(sorted(pred), key=pred.get)


def best_k_agreement(cells: list[dict[str, Any]], purpose: str | None = None) -> dict[str, Any]:
    """Per (model, corpus, concurrency, forcing regime) group with >= 2 measured kpad Ks: the
    measured and the predicted best K among those Ks, and the measured throughput lost by running
    the predicted one (1 - measured[predicted best] / measured[measured best]). Repeated runs of
    one K are averaged (measured and predicted) and counted in `repeats`."""
    groups: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["config"].startswith("kpad-") and (purpose is None or c["purpose"] == purpose):
            groups[_same_setting(c)][c["k"]].append(c)
    out = []
    for key, by_k in sorted(groups.items()):
        if len(by_k) < 2:
            continue
        meas, mb, pb = _fastest(by_k)
        out.append({**_setting_doc(key), "ks": sorted(by_k), "repeats": {k: len(cs) for k, cs in sorted(by_k.items())
                                                    if len(cs) > 1},
                    "measured_best_k": mb, "predicted_best_k": pb, "match": mb == pb,
                    "lost_tok_s_frac": 1 - meas[pb] / meas[mb]})
    return {"matched": sum(g["match"] for g in out), "total": len(out), "cells": out}


def best_config_agreement(cells: list[dict[str, Any]], purpose: str | None = None) -> dict[str, Any]:
    """Per setting group (model, corpus, concurrency, requests, cap, forcing, history) with >= 2
    measured configurations of any kind (vanilla, suffix, kpad-K, dynamic-*): the measured and
    the predicted fastest, and the measured throughput lost by running the predicted one.
    Repeats of one configuration are averaged. Where the cells carry the calibration's repeat tie
    (simkit.validation.spread.repeat_tie), each group also says whether the measured best leads
    the predicted best by no more than it (`within_repeat_spread`: one run each cannot tell them
    apart), counted beside the strict agreement."""
    groups: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if purpose is None or c["purpose"] == purpose:
            groups[_same_setting(c)][c["config"]].append(c)
    out = []
    for key, by_cfg in sorted(groups.items()):
        if len(by_cfg) < 2:
            continue
        meas, mb, pb = _fastest(by_cfg)
        ties = [c["repeat_tie_frac"] for cs in by_cfg.values() for c in cs
                if c.get("repeat_tie_frac") is not None]
        gap = meas[mb] / meas[pb] - 1
        out.append({**_setting_doc(key), "configs": sorted(by_cfg), "measured_best": mb,
                    "predicted_best": pb, "match": mb == pb,
                    "lost_tok_s_frac": 1 - meas[pb] / meas[mb], "measured_gap": gap,
                    "repeat_tie_frac": max(ties) if ties else None,
                    "within_repeat_spread": gap <= max(ties) if ties else None})
    judged = [g for g in out if g["within_repeat_spread"] is not None]
    return {"matched": sum(g["match"] for g in out), "total": len(out), "cells": out,
            "within_repeat_spread": sum(g["within_repeat_spread"] for g in judged) if judged else None,
            "repeat_tie_frac": max(g["repeat_tie_frac"] for g in judged) if judged else None}


def repeatability(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs repeated under one setting (same model, corpus, config, concurrency, requests and
    forcing regime): the spread of their measured tok/s, max/min - 1. The simulator predicts one
    value for all of them, so this spread is a floor under any per-run error."""
    groups: dict[tuple, list] = defaultdict(list)
    for c in cells:
        groups[(*_same_setting(c), c["config"])].append(c)
    out = []
    for (*key, config), cs in sorted(groups.items()):
        if len(cs) < 2:
            continue
        m = [c["measured_tok_s"] for c in cs]
        out.append({**_setting_doc(tuple(key)), "config": config,
                    "runs": sorted(c["run_id"] for c in cs),
                    "measured_tok_s": m, "spread": max(m) / min(m) - 1})
    spreads = [g["spread"] for g in out]
    return {"groups": out, "mean_spread": sum(spreads) / len(spreads) if spreads else None,
            "max_spread": max(spreads) if spreads else None}


def setting_mean_mape(cells: list[dict[str, Any]], purpose: str = "validation") -> dict[str, Any]:
    """MAPE of the prediction against the mean measured tok/s of each setting measured >= 2 times
    (the cells of one purpose): the model's error with one run's drift partly averaged out, a
    second figure beside the per-run MAPE, never in its place. A mean of m runs still carries
    their drift / sqrt(m) (simkit.validation.floor), so this is, in expectation, an upper bound on
    the model's."""
    groups: dict[tuple, list] = defaultdict(list)
    for c in cells:
        if c["purpose"] == purpose and c["error"] == c["error"]:
            groups[(*_same_setting(c), c["config"])].append(c)
    errs = []
    for cs in groups.values():
        if len(cs) >= 2:
            meas = sum(c["measured_tok_s"] for c in cs) / len(cs)
            pred = sum(c["predicted_tok_s"] for c in cs) / len(cs)
            errs.append(abs(pred / meas - 1))
    return {"mape_pct": 100.0 * sum(errs) / len(errs) if errs else None,
            "settings": len(errs), "runs": sum(len(cs) for cs in groups.values() if len(cs) >= 2)}


def acceptance_check(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean absolute relative error of replayed vs measured accepted tokens per decode step,
    per table ordering present in the cells."""
    res = {}
    spec = [c for c in cells if c["measured_accepted_per_step"]]
    for key, name in [("predicted_accepted_per_step", "used")] + [
            (f"predicted_accepted_per_step_{o}", o) for o in ORDERINGS]:
        errs = [abs(c[key] / c["measured_accepted_per_step"] - 1) for c in spec if key in c]
        if errs:
            res[name] = {"mean_abs_rel_error": sum(errs) / len(errs), "cells": len(errs)}
    return res


def dynamic_k_check(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Measured dynamic-K runs against the best fixed K measured in the same setting: the
    measured and the predicted gain (dynamic / best kpad - 1, the prediction taken at the K the
    measurement found best) and whether their signs agree (|gain| under 1 % counts as a tie)."""
    groups: dict[tuple, list] = defaultdict(list)
    for c in cells:
        groups[_same_setting(c)].append(c)
    out = []
    for key, cs in sorted(groups.items()):
        kp = [c for c in cs if c["config"].startswith("kpad-")]
        dyn = [c for c in cs if c["config"].startswith("dynamic-")]
        if not kp or not dyn:
            continue
        best = max(kp, key=lambda c: c["measured_tok_s"])
        for d in dyn:
            mg = d["measured_tok_s"] / best["measured_tok_s"] - 1
            pg = d["predicted_tok_s"] / best["predicted_tok_s"] - 1
            out.append({**_setting_doc(key), "policy": d["config"].split("-")[1],
                        "best_fixed": best["config"], "measured_gain": mg,
                        "predicted_gain": pg, "k_counts": d.get("k_counts"),
                        "sign_agrees": _sign(mg) == _sign(pg)})
    if not out:
        return {"status": "not measured", "cells": [],
                "why": "no dynamic-K run beside measured kpad runs of the same setting"}
    return {"status": "measured", "cells": out,
            "sign_agreement": f"{sum(c['sign_agrees'] for c in out)} of {len(out)}",
            "mean_abs_gain_error": sum(abs(c["predicted_gain"] - c["measured_gain"])
                                       for c in out) / len(out)}


def _interval_doc(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The band's definition, where its sigma came from, and its coverage of the held-out and
    calibration cells (with the median relative half-width)."""
    return {"definition": "prediction x exp(+-1.645 sigma) (simkit.validation.spread)",
            "sigma_sources": sorted({c["interval_source"] for c in cells
                                     if c.get("interval_source")}),
            "coverage_validation": coverage(cells, "validation"),
            "coverage_validation_by_runner": {
                r: coverage([c for c in cells if c.get("runner") == r], "validation")
                for r in sorted({c.get("runner") for c in cells if c.get("runner")})},
            "coverage_calibration": coverage(cells, "calibration")}


def _sign(x: float, tie: float = 0.01) -> int:
    return 0 if abs(x) < tie else (1 if x > 0 else -1)


def mape_by_history(cells: list[dict[str, Any]], purpose: str = "validation") -> dict[str, Any]:
    """MAPE of the held-out cells per measured request history (cold first-pass vs repeats)."""
    return {h: mape([c for c in cells if c.get("history", "cold") == h], purpose)
            for h in sorted({c.get("history", "cold") for c in cells})}


def document(cells: list[dict[str, Any]], ordering: Ordering) -> dict[str, Any]:
    """The JSON document of `simkit validate --format json`."""
    return {"cells": [_clean(c) for c in cells], "mape": mape(cells, "validation"),
            "mape_calibration": mape(cells, "calibration"),
            "mape_by_forcing": {f: mape([c for c in cells if c.get("forcing") == f], "validation")
                                for f in sorted({c.get("forcing", "") for c in cells})},
            "repeatability": _clean(repeatability(cells)),
            "mape_vs_setting_mean": _clean(setting_mean_mape(cells)),
            "best_k_agreement": _clean(best_k_agreement(cells, "validation")),
            "best_k_agreement_calibration": _clean(best_k_agreement(cells, "calibration")),
            "best_config_agreement": _clean(best_config_agreement(cells, "validation")),
            "best_config_agreement_all": _clean(best_config_agreement(cells)),
            "vllm_versions": sorted({c.get("vllm_version", "") for c in cells}),
            "mape_by_history": mape_by_history(cells),
            "interval": _clean(_interval_doc(cells)),
            "acceptance_replay_by_history": {
                h: _clean(acceptance_check([c for c in cells if c.get("history", "cold") == h]))
                for h in sorted({c.get("history", "cold") for c in cells})},
            "dynamic_k": _clean(dynamic_k_check(cells)),
            "acceptance_replay": _clean(acceptance_check(cells)),
            "table_ordering": ordering,
            "window": "first completion -> last admission (calibrate.records.steady_window)"}


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 6) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def plot(cells: list[dict[str, Any]], path: str | Path) -> None:
    """Predicted vs measured tok/s, log axes, y=x line, colour per config, hollow markers for
    calibration runs (the fit saw them)."""
    from simkit.plotting import plt_agg, save_png

    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(6.5, 6))
    configs = sorted({c["config"] for c in cells})
    cmap = plt.get_cmap("tab10")
    for i, cfg in enumerate(configs):
        for purpose, face in (("validation", cmap(i)), ("calibration", "none")):
            cs = [c for c in cells if c["config"] == cfg and c["purpose"] == purpose]
            if cs:
                ax.scatter([c["measured_tok_s"] for c in cs], [c["predicted_tok_s"] for c in cs],
                           facecolors=face, edgecolors=cmap(i), s=36,
                           label=f"{cfg} ({purpose})")
    vals = [v for c in cells for v in (c["measured_tok_s"], c["predicted_tok_s"]) if v > 0]
    lo, hi = min(vals) / 1.3, max(vals) * 1.3
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="y = x")
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.6, label="±10 %")
    ax.plot([lo, hi], [lo / 1.1, hi / 1.1], "k:", lw=0.6)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel=f"measured output tok/s (H200, vLLM {', '.join(sorted({c.get('vllm_version', '0.26') for c in cells}))})",
           ylabel="simkit predicted output tok/s",
           title="simkit validate: predicted vs measured")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ticks = [t for t in (100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000) if lo <= t <= hi]
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
        axis.set_ticks(ticks)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_png(fig, path, dpi=120)
