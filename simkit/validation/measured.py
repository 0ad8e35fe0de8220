"""The measured vLLM records: finding and loading them, and (for notebooks/validation.ipynb)
predicted vs measured: the records under calibrate/data/ (steps*.parquet,
runs*.parquet from the calibration harness) set beside simkit's step-time and run predictions.

Step level: each recorded step's BatchDescriptor through the cost model (default calibration for the
run's GPU) against the measured step wall time (which includes the harness's token forcing, see
calibrate/data/README.md) and, for the device part, against t_forward_s + t_sample_s. Run level: simkit's closed-loop prediction of the
run's (model, corpus, config, K, concurrency, TP, GPU) against its measured steady tok/s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simkit.costmodel.step_records import hardware_of
from simkit.errors import InputError

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "calibrate" / "data"


def find_records(root: str | Path | None = None) -> tuple[list[Path], list[Path]]:
    """(steps files, runs files) under root (default calibrate/data); empty lists if none."""
    root = Path(root) if root else DEFAULT_DIR
    if not root.is_dir():
        return [], []
    return sorted(root.rglob("steps*.parquet")), sorted(root.rglob("runs*.parquet"))


def load_records(root: str | Path | None = None):
    """(steps joined with runs, runs) as DataFrames, or (None, None) when there are none."""
    import pandas as pd

    from simkit.costmodel.step_records import (
        RUN_KEYS, STEP_KEYS, check_unique_runs, join_runs, read_parquet)

    steps_files, runs_files = find_records(root)
    if not steps_files or not runs_files:
        return None, None
    frames = [(p, read_parquet(p, RUN_KEYS)) for p in runs_files]
    check_unique_runs(frames)
    runs = pd.concat([f for _, f in frames], ignore_index=True)
    steps = pd.concat([read_parquet(p, STEP_KEYS) for p in steps_files], ignore_index=True)
    return join_runs(steps, runs), runs


def step_comparison(steps, max_steps_per_run: int = 2000, calibration: str | None = None) -> Any:
    """Per recorded step: measured t_step_s vs the cost model's step_s (first N steps per run).
    `calibration` as in load_cost_model: None = the hardware's default, "analytic", or a name/path."""
    import pandas as pd

    from simkit.costmodel import load_cost_model
    from simkit.costmodel.step_records import batch_from_row, records

    out = []
    models: dict[tuple, Any] = {}
    for run_id, grp in steps.groupby("run_id", sort=True):
        first = grp.iloc[0]
        hw = hardware_of(first.get("gpu", "h200")) or "h200"
        key = (first["model"], hw, int(first["tp"]))
        if key not in models:
            models[key] = load_cost_model(first["model"], hw, tp=int(first["tp"]),
                                          calibration=calibration)
        cost = models[key]
        for row in records(grp.head(max_steps_per_run)):
            if row.get("t_step_s") is None or row["t_step_s"] != row["t_step_s"]:
                continue
            pred = cost.step_cost(batch_from_row(row))
            dev = row.get("t_forward_s", float("nan")) + row.get("t_sample_s", 0.0)
            out.append({"run_id": run_id, "model": key[0], "hardware": hw,
                        "config": row.get("config"), "num_reqs": row["num_reqs"],
                        "graph_mode": row["graph_mode"], "measured_s": row["t_step_s"],
                        "predicted_s": pred.step_s, "measured_device_s": dev,
                        "predicted_device_s": pred.device_s, "cost_model": cost.label})
    frame = pd.DataFrame(out)
    if len(frame):
        frame["error"] = frame["predicted_s"] / frame["measured_s"] - 1
        frame["device_error"] = frame["predicted_device_s"] / frame["measured_device_s"] - 1
    return frame


def run_comparison(runs, *, seeds: int = 1, num_requests: int | None = None,
                   workers: int | None = None, purposes: tuple[str, ...] | None = None,
                   calibration: str | None = None) -> Any:
    """Per recorded run: measured steady output tok/s vs simkit's prediction of that run (the
    run's concurrency, TP, GPU, max_tokens cap and request count unless `num_requests` is given;
    the requests are the profile's, in simkit's seeded order, not the run's own files)."""
    import pandas as pd

    from simkit.engine.config import recorded_config
    from simkit.app.options import RunOptions
    from simkit.app.predict import predict

    out = []
    for row in runs.to_dict("records"):
        if purposes and row.get("purpose") not in purposes:
            continue
        config = recorded_config(str(row["config"]), int(row.get("k") or 0))
        hw = hardware_of(row.get("gpu", "")) or "h200"
        try:
            cap = row.get("max_tokens_cap")
            n = num_requests or int(row.get("num_requests") or 0) or None
            run = RunOptions(row["model"], row["corpus"], hardware=hw, tp=int(row["tp"]),
                             concurrency=int(row["concurrency"]), seeds=seeds, num_requests=n,
                             workers=workers, calibration=calibration,
                             max_tokens=int(cap) if cap and cap == cap else 8192)
            pred = predict(run, configs=config)
            p = pred.rows[0].output_tok_s if pred.rows else float("nan")
            why = ""
        except Exception as exc:                     # reported per row, never dropped
            p, why = float("nan"), f"{type(exc).__name__}: {exc}"
        out.append({"run_id": row["run_id"], "purpose": row.get("purpose"),
                    "model": row["model"], "corpus": row["corpus"], "config": config,
                    "concurrency": row["concurrency"], "hardware": hw,
                    "measured_tok_s": row["output_tok_s"], "predicted_tok_s": p,
                    "cost_model": pred.cost_label if not why else None,
                    "error": p / row["output_tok_s"] - 1 if row["output_tok_s"] else None,
                    "not_predicted": why})
    return pd.DataFrame(out)
