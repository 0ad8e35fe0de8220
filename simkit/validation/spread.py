"""The interval a prediction of one run carries: the error a user sees when they rerun it.

Two parts, both measured on a calibration's own fitted runs (so the held-out runs never inform
their own interval):
- run-to-run drift: repeats of one setting differ (host-side step time drifts between runs,
  machines and days; calibrate/data/README.md); the pooled standard deviation of log(measured
  tok/s) around each repeated setting's mean;
- the fit's residuals: the root mean square of log(predicted / measured tok/s) over the fitted
  runs, each predicted under its own conditions (what the cost model misses on runs it saw).
They add in quadrature, sigma^2 = drift^2 + residual^2, and the band is prediction x exp(+-z
sigma). A residual already holds one run's drift, so within one sitting this counts drift twice;
the sum is kept because a rerun happens on another day and machine, whose drift the repeats of
one sitting do not contain. The drift can also be taken per runner class (rerun_interval's
by_runner): a speculative run's synchronous V1 step waits on the host, so its throughput drifts
with the host's speed several times as much as vanilla's async step does (the repeat floor,
simkit.validation.floor), and one drift for both over-widens vanilla's band and under-widens the
speculative ones. A calibration carries the two parts under its "interval" key
(python -m simkit.validation.summary writes it); one without that key gets the drift band alone,
from the repeated runs among its fitted calibration runs.
"""

from __future__ import annotations

import math
from typing import Any

from simkit.costmodel.step_records import forcing_regime

Z90 = 1.6449            # two-sided 90 % of a normal distribution
SETTING = ("model", "corpus", "config", "k", "concurrency", "num_requests", "max_tokens_cap",
           "forcing", "history")


def drift_sigma(runs, purpose: str = "calibration",
                run_ids: set[str] | None = None) -> dict[str, Any]:
    """Pooled sigma of log tok/s over repeated settings of `purpose` (only the runs in `run_ids`
    where given: a calibration's fitted runs); sigma None without any repeat."""
    rows = [r for r in runs.to_dict("records") if r["purpose"] == purpose
            and (run_ids is None or str(r["run_id"]) in run_ids)]
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        key = tuple(str(r.get(c) if c != "forcing" else forcing_regime(r.get("force_copy", "")))
                    if c not in ("history",) else str(r.get(c) or "cold") for c in SETTING)
        groups.setdefault(key, []).append(math.log(float(r["output_tok_s"])))
    ss, dof, used = 0.0, 0, 0
    for vals in groups.values():
        if len(vals) < 2:
            continue
        mu = sum(vals) / len(vals)
        ss += sum((v - mu) ** 2 for v in vals)
        dof += len(vals) - 1
        used += 1
    return {"sigma_log": math.sqrt(ss / dof) if dof else None, "groups": used, "dof": dof,
            "source": f"repeated settings among the {purpose} runs", "z": Z90, "level": 0.90}


def residual_sigma(cells: list[dict[str, Any]], run_ids: set[str]) -> dict[str, Any]:
    """Root mean square of log(predicted / measured tok/s) over the cells of these runs (a
    calibration's fitted runs), bias included: a user sees the bias too. sigma None without any."""
    res = [math.log(c["predicted_tok_s"] / c["measured_tok_s"]) for c in cells
           if c["run_id"] in run_ids and c["predicted_tok_s"] > 0 and c["measured_tok_s"] > 0]
    return {"sigma_log": math.sqrt(sum(r * r for r in res) / len(res)) if res else None,
            "runs": len(res), "mean_log": sum(res) / len(res) if res else None}


def _quadrature(*parts: float | None) -> float | None:
    vals = [s for s in parts if s is not None]
    return math.sqrt(sum(s * s for s in vals)) if vals else None


def runner_drift(runs, run_ids: set[str], pooled: float | None) -> dict[str, dict[str, Any]]:
    """Per runner class (simkit.validation.floor.runner_class): the drift of the repeated
    settings among these fitted runs of that class, or the pooled drift where the class has no
    repeated setting among them (then 'drift_dof' 0 says so)."""
    from simkit.validation.floor import ASYNC, SYNC, runner_class

    cls = {str(r["run_id"]): runner_class(r) for r in runs.to_dict("records")}
    out = {}
    for c in (ASYNC, SYNC):
        own = drift_sigma(runs, run_ids={r for r in run_ids if cls.get(r) == c})
        out[c] = {"drift_sigma_log": own["sigma_log"] if own["dof"] else pooled,
                  "drift_dof": own["dof"], "drift_settings": own["groups"],
                  "fitted_runs": sum(1 for r in run_ids if cls.get(r) == c)}
    return out


def rerun_interval(cells: list[dict[str, Any]], runs, run_ids: set[str],
                   by_runner: bool = False) -> dict[str, Any]:
    """The "interval" block of a calibration: drift and residual sigma of its fitted runs
    (`run_ids`; `cells` predicted with that calibration), their quadrature sum, z and the
    relative half-width it gives. `by_runner`: the drift term per runner class as well (the
    synchronous runner exposes the host's speed, the async runner hides most of it), each added
    to the one residual of every fitted run: a "by_runner" entry whose sigma a prediction of that
    class carries (class_sigma); the pooled figures stay beside it."""
    drift = drift_sigma(runs, run_ids=run_ids)
    resid = residual_sigma(cells, run_ids)
    sigma = _quadrature(drift["sigma_log"], resid["sigma_log"])
    extra: dict[str, Any] = {}
    if by_runner:
        per = runner_drift(runs, run_ids, drift["sigma_log"])
        for part in per.values():
            s = _quadrature(part["drift_sigma_log"], resid["sigma_log"])
            part.update(sigma_log=_r(s), drift_sigma_log=_r(part["drift_sigma_log"]),
                        half_width_pct=_r(100 * half_width(s)) if s is not None else None)
        extra = {"by_runner": per, "definition_by_runner": (
            "per runner class (async: vanilla with async scheduling; synchronous: the "
            "speculative configurations and synchronised runs): sigma^2 = drift of that class's "
            "repeated fitted runs^2 + the residual of every fitted run^2")}
    return {"sigma_log": _r(sigma), "z": Z90, "level": 0.90,
            "half_width_pct": _r(100 * half_width(sigma)) if sigma is not None else None,
            "drift_sigma_log": _r(drift["sigma_log"]), "drift_settings": drift["groups"],
            "drift_dof": drift["dof"], "residual_sigma_log": _r(resid["sigma_log"]),
            "residual_runs": resid["runs"],
            "definition": "prediction x exp(+-z sigma), sigma^2 = drift^2 + residual^2: drift = "
                          "pooled sd of log tok/s over the repeated settings among the fitted "
                          "runs, residual = rms of log(predicted / measured) over the fitted runs "
                          "(simkit.validation.spread)", **extra}


def class_sigma(band: dict[str, Any], runner: str | None) -> float | None:
    """The sigma a prediction of this runner class carries under `band` (a calibration_sigma
    or "interval" block): its class's where the band has one per runner class, else the one
    sigma."""
    per = (band.get("by_runner") or {}).get(runner or "") or {}
    return per.get("sigma_log") if per.get("sigma_log") is not None else band.get("sigma_log")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def half_width(sigma: float) -> float:
    """(high - low) / (2 x prediction) of the band exp(+-z sigma): its relative half-width."""
    return math.sinh(Z90 * sigma)


def calibration_sigma(doc: dict[str, Any] | None, runs) -> dict[str, Any]:
    """The sigma a calibration's predictions carry: its "interval" block where it has one, else
    the drift of the repeated runs among its fitted calibration runs (all calibration runs where
    it lists none). {'sigma_log', 'source'}."""
    block = (doc or {}).get("interval") or {}
    if block.get("sigma_log") is not None:
        return {"sigma_log": float(block["sigma_log"]),
                "drift_sigma_log": block.get("drift_sigma_log"),
                **({"by_runner": block["by_runner"]} if block.get("by_runner") else {}),
                "source": f"calibration {doc.get('name', '')}: drift and fit residuals of its "
                          "fitted runs"}
    fitted = set((doc or {}).get("runs") or []) or None
    drift = drift_sigma(runs, run_ids=fitted)
    return {"sigma_log": drift["sigma_log"], "drift_sigma_log": None,
            "source": "drift of the repeated calibration runs"}


def repeat_tie(drift_sigma_log: float | None) -> float | None:
    """How far apart (measured a / measured b - 1) two runs of one setting come 90 % of the time
    under this drift: exp(z sqrt(2) sigma) - 1 (the log ratio of two runs has sd sqrt(2) sigma).
    Two configurations measured closer than this are not told apart by one run each."""
    if drift_sigma_log is None:
        return None
    return math.exp(Z90 * math.sqrt(2) * drift_sigma_log) - 1


def interval(value: float, sigma: float | None, z: float = Z90) -> tuple[float, float] | None:
    """(low, high) of value x exp(-+ z sigma), or None without a sigma."""
    if sigma is None or not math.isfinite(value):
        return None
    return value * math.exp(-z * sigma), value * math.exp(z * sigma)


def coverage(cells: list[dict[str, Any]], purpose: str | None = "validation") -> dict[str, Any]:
    """How many cells of `purpose` (None: every cell) measured inside their predicted interval,
    and the median relative half-width of those intervals."""
    sel = [c for c in cells if (purpose is None or c["purpose"] == purpose)
           and c.get("predicted_interval")]
    inside = sum(1 for c in sel
                 if c["predicted_interval"][0] <= c["measured_tok_s"] <= c["predicted_interval"][1])
    widths = sorted((c["predicted_interval"][1] - c["predicted_interval"][0])
                    / (2 * c["predicted_tok_s"]) for c in sel if c.get("predicted_tok_s"))
    return {"inside": inside, "cells": len(sel),
            "share": inside / len(sel) if sel else None,
            "median_half_width": _median(widths)}


def _median(vals: list[float]) -> float | None:
    if not vals:
        return None
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
