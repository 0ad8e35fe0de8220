"""The study's qualitative findings checked with simkit: the best-K pattern across corpora (mix
favours large K, chat and short code small K) and how the errors move with what simkit must
assume (host CPU speed, TP degree)."""

from __future__ import annotations

from typing import Any

from simkit.app.options import RunOptions
from simkit.reference.published import FINDINGS, PUBLISHED
from simkit.reference.reproduce import STUDY, predict_model, with_published
from simkit.whatif.common import WhatIfResult

BEST_K_COLUMNS = ["model", "corpus", "best_k", "kpad_4", "kpad_6", "kpad_8", "kpad_12",
                  "dynamic_vs_best_k", "dynamic_verdict"]
# the study's K ladder without unpadded suffix (its best-K and assumption figures need no more)
LADDER = "vanilla,kpad:4,6,8,12,dynamic"
SWEEP_COLUMNS = ["model", "assumption", "value", "tp", "van_pred", "van_err", "final_pred",
                 "final_err", "ratio_pred", "ratio_err"]


def best_k_pattern(run: RunOptions = STUDY, *, models: list[str] | None = None,
                   corpora: tuple[str, ...] = ("mix", "chat", "code")) -> WhatIfResult:
    """Best K-pad K per (model, corpus), K in {4, 6, 8, 12}, under `run` (its model and
    corpus replaced by each; reproduce.predict_model)."""
    models = models or ["llama-3.1-8b"]
    hardware = run.hardware
    rows = []
    for m in models:
        for c in corpora:
            p = predict_model(run.but(model=m, corpus=c), configs=LADDER)
            van = p["van_pred"] or float("nan")
            row = {"model": m, "corpus": c, "best_k": p["best_k"],
                   "dynamic_vs_best_k": p["dynamic_vs_best_k"],
                   "dynamic_verdict": p["dynamic_verdict"]}
            for k, v in p["kpad_tok_s"].items():
                row[f"kpad_{k}"] = v / van
            rows.append(row)
    mix = [r["best_k"] for r in rows if r["corpus"] == "mix"]
    small = [r["best_k"] for r in rows if r["corpus"] != "mix"]
    agrees = bool(mix and small and min(mix) >= 8 and max(small) <= 6)
    notes = [f"study: {FINDINGS['best_k']}",
             "kpad_K columns are speedups over van(OFF) on the same corpus",
             f"simkit: best K on mix {mix}, on {', '.join(c for c in corpora if c != 'mix')} "
             f"{small}: " + ("agrees" if agrees else "does not fully agree") +
             " with the study's pattern (mix >= 8, others <= 6)"]
    return WhatIfResult("best-k", f"best K per corpus on {hardware}", BEST_K_COLUMNS, rows,
                        {"models": models, "corpora": list(corpora), "hardware": hardware,
                         "seeds": run.seeds, "num_requests": run.num_requests}, notes,
                        {"agrees_with_study": agrees})


def assumption_sweep(run: RunOptions = STUDY, *, models: list[str] | None = None,
                     host_factors: tuple[float, ...] = (0.5, 1.0, 2.0),
                     tp_multipliers: tuple[int, ...] = (2,),
                     calibrations: tuple[str, ...] | None = None) -> WhatIfResult:
    """Errors against the published rows as the host speed, the TP degree and the cost-model
    coefficients change, each from `run` (its model replaced by each; reproduce.predict_model).
    `calibrations` defaults to every embedded calibration of the run's vLLM version (each
    transferred to its hardware: device scales as fitted, host values rescaled by
    host_speed).
    The printed rows and JSON keep the names from before the rename (assumption "cost_profile",
    params key "cost_profiles") so that the output does not change."""
    from simkit.costmodel import choose_tp
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.costmodel.calibrations import calibration_version, list_calibrations, read_calibration

    hardware = run.hardware
    version = get_vllm_version(run.vllm_version).key
    if calibrations is None:
        calibrations = tuple(n for n in list_calibrations()
                             if calibration_version(read_calibration(n)) == version)

    models = models or [r.model for r in PUBLISHED]
    rows: list[dict[str, Any]] = []
    for m in models:
        base_tp = choose_tp(m, hardware)

        def point(assumption: str, value: Any, host_factor: float = 1.0,
                  **changed: Any) -> dict[str, Any]:
            r = with_published(predict_model(run.but(model=m, **changed), configs=LADDER,
                                             host_factor=host_factor))
            return _sweep_row(r, assumption, value)

        rows += [point("host_factor", f, host_factor=f) for f in host_factors]
        rows += [point("tp", base_tp * mult, tp=base_tp * mult) for mult in tp_multipliers
                 if base_tp * mult <= 8]
        rows += [point("cost_profile", name, calibration=name) for name in calibrations]
    notes = ["error = predicted / published - 1; host_factor multiplies the B200 host's assumed "
             "speed (1.0); tp rows use that TP instead of simkit's choice; cost_profile rows use "
             "that calibrated profile transferred to this hardware instead of its default "
             f"({', '.join(calibrations) or 'none embedded'})",
             "read: if the ratio error shrinks as the host factor falls, simkit's host is too "
             "fast for the study's (and the other way round); nothing is fitted"]
    return WhatIfResult("assumptions", f"error vs assumptions on {hardware}", SWEEP_COLUMNS,
                        rows, {"models": models, "host_factors": list(host_factors),
                               "tp_multipliers": list(tp_multipliers),
                               "cost_profiles": list(calibrations), "seeds": run.seeds,
                               "num_requests": run.num_requests}, notes)


def _sweep_row(r: dict[str, Any], assumption: str, value: float) -> dict[str, Any]:
    return {"model": r["model"], "assumption": assumption, "value": value, "tp": r["tp"],
            "van_pred": r["van_pred"], "van_err": r["van_err"], "final_pred": r["final_pred"],
            "final_err": r["final_err"], "ratio_pred": r["ratio_pred"],
            "ratio_err": r["ratio_err"]}
