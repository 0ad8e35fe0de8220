"""What `simkit calibrate fit` reports of a fitted calibration: the summary (its --format json)
and the same in prose lines of at most 100 columns."""

from __future__ import annotations

# the cross-validated components in the order the summary names them, with their words
CV_PARTS = {"step": "step", "forward_sample": "forward+sample", "schedule": "schedule",
            "prepare": "prepare", "draft": "draft", "update": "update"}


def fit_summary(doc: dict, skip_note: str = "") -> dict:
    """What `calibrate fit` reports of a fitted calibration (its --format json); `skip_note`: a
    note already printed as a warning."""
    return {"name": doc["name"], "hardware": doc["hardware"],
            "vllm_version": doc["vllm_version"], "models": doc["models"],
            "runs": len(doc["runs"]), "steps": doc["n_steps"], "left_out": doc["left_out"],
            "runs_without_steps": doc.get("runs_without_steps", []),
            "skipped_steps": doc["skipped"], "not_fitted": doc["not_fitted"],
            "cv_grouping": doc["cv"]["grouping"],
            "cv_mape_pct": {k: (round(v, 2) if v is not None else None)
                            for k, v in doc["cv"]["mean"].items()},
            "notes": [n for n in doc.get("notes", []) if n != skip_note],
            "interval": doc.get("interval")}


def fit_text(s: dict) -> list[str]:
    """The fit summary as prose lines of at most 100 columns."""
    from simkit.report.fit import wrap_prose

    lines = wrap_prose(f"fitted {s['name']} ({s['hardware']}, vLLM {s['vllm_version']}) on "
                       f"{s['runs']} calibration runs of {', '.join(s['models'])} "
                       f"({s['steps']:,} steps)")
    for reason, n in s["left_out"].items():
        lines += wrap_prose(f"left out: {n['runs']} {reason} ({n['steps']:,} steps)")
    if s["skipped_steps"]:
        lines += wrap_prose("steps skipped: " + "; ".join(
            f"{k}: {v:,}" for k, v in s["skipped_steps"].items()))
    own = [k for k in s["not_fitted"] if not k.startswith("async_runner.")]
    runner = [k.split(".", 1)[1] for k in s["not_fitted"] if k.startswith("async_runner.")]
    lines += wrap_prose(f"not fitted (analytic defaults kept): {', '.join(own)}")
    if runner:
        lines += wrap_prose("async-scheduling runner, not fitted apart (the shared value kept): "
                            + ", ".join(runner))
    parts = [f"{CV_PARTS.get(k, k)} {v:.1f} %" for k, v in
             sorted(s["cv_mape_pct"].items(), key=lambda kv: list(CV_PARTS).index(kv[0])
                    if kv[0] in CV_PARTS else len(CV_PARTS)) if v is not None]
    lines += wrap_prose(f"cross-validated MAPE per step ({s['cv_grouping']}): "
                        + ", ".join(parts))
    if s["runs_without_steps"]:
        lines += wrap_prose(f"runs without step records (not fitted): "
                            + ", ".join(s["runs_without_steps"]))
    for note in s["notes"]:
        lines += wrap_prose(f"note: {note}")
    if s["interval"] is not None:
        from simkit.report.assumptions import interval_text

        lines += wrap_prose("rerun interval: " + interval_text(s["interval"], s["runs"]))
    return lines


__all__ = ["CV_PARTS", "fit_summary", "fit_text"]
