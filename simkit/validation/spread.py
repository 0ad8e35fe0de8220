"""Run-to-run drift as a distribution: the interval a prediction of one run carries.

Repeats of one setting on the H200 differ (host-side step time drifts between runs, machines and days;
calibrate/data/README.md). The pooled standard deviation of log(measured tok/s) around each
repeated setting's mean, over the calibration runs only (so the held-out runs never inform their
own interval), gives a log-normal band: prediction x exp(+-z sigma). It covers drift, not model
error; `simkit validate` scores the prediction against it as well as against the mean.
"""

from __future__ import annotations

import math
from typing import Any

from simkit.costmodel.step_records import forcing_regime

Z90 = 1.6449            # two-sided 90 % of a normal distribution
SETTING = ("model", "corpus", "config", "k", "concurrency", "num_requests", "max_tokens_cap",
           "forcing", "history")


def drift_sigma(runs, purpose: str = "calibration") -> dict[str, Any]:
    """Pooled sigma of log tok/s over repeated settings of `purpose`; sigma None without any."""
    rows = [r for r in runs.to_dict("records") if r["purpose"] == purpose]
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


def interval(value: float, sigma: float | None, z: float = Z90) -> tuple[float, float] | None:
    """(low, high) of value x exp(-+ z sigma), or None without a sigma."""
    if sigma is None or not math.isfinite(value):
        return None
    return value * math.exp(-z * sigma), value * math.exp(z * sigma)


def coverage(cells: list[dict[str, Any]], purpose: str = "validation") -> dict[str, Any]:
    """How many cells of `purpose` measured inside their predicted interval."""
    sel = [c for c in cells if c["purpose"] == purpose and c.get("predicted_interval")]
    inside = sum(1 for c in sel
                 if c["predicted_interval"][0] <= c["measured_tok_s"] <= c["predicted_interval"][1])
    return {"inside": inside, "cells": len(sel),
            "share": inside / len(sel) if sel else None}
