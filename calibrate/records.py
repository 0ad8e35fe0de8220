"""Measured records: the steady-state window of a closed-loop run, and typed parquet I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simkit.record_schema import OPTIONAL_RUN_COLUMNS, RUN_COLUMNS, STEP_COLUMNS

_PD_TYPES = {"string": "string", "int64": "int64", "float64": "float64", "bool": "bool"}


@dataclass(frozen=True)
class Window:
    """The steady-state interval of a run and how it was chosen."""

    t0: float
    t1: float
    steady: bool
    rule: str


def steady_window(completions: list[float], last_admission: float | None,
                  run_end: float) -> Window:
    """Steady state of a closed loop that keeps N requests in flight.

    It starts at the first completion (the initial burst of N simultaneous prefills is over) and
    ends at the last admission (after it fewer than N requests remain: the drain). When the run
    has no such interval (num_requests <= concurrency) the whole run is used and steady=False.
    """
    if completions and last_admission is not None and last_admission > min(completions):
        return Window(min(completions), last_admission, True,
                      "first completion -> last admission")
    return Window(0.0, run_end, False, "whole run (no admission after the first completion)")


def window_throughput(t_end: np.ndarray, emitted: np.ndarray, w: Window) -> tuple[int, float]:
    """Output tokens emitted by steps ending inside the window, and their rate (tok/s)."""
    t_end = np.asarray(t_end, dtype=np.float64)
    emitted = np.asarray(emitted, dtype=np.int64)
    inside = (t_end > w.t0) & (t_end <= w.t1) if w.steady else np.ones_like(t_end, dtype=bool)
    tokens = int(emitted[inside].sum())
    dur = w.t1 - w.t0
    return tokens, (tokens / dur if dur > 0 else float("nan"))


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]):
    import pandas as pd

    missing = [c for r in rows[:1] for c in columns if c not in r]
    if missing:
        raise ValueError(f"records lack columns {missing}")
    df = pd.DataFrame([{c: r[c] for c in columns} for r in rows], columns=list(columns))
    return df.astype({c: _PD_TYPES[t] for c, t in columns.items()})


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    """steps.parquet with exactly STEP_COLUMNS, typed; written whole or not at all (a full
    disk names the file and leaves no 0-byte file: simkit.outfiles.write_atomic)."""
    from simkit.outfiles import write_atomic

    frame = _frame(rows, STEP_COLUMNS)
    write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def run_columns(rows: list[dict[str, Any]]) -> dict[str, str]:
    """RUN_COLUMNS, then the optional columns any of the rows has (vLLM 0.34 harness runs)."""
    extra = {c: t for c, t in OPTIONAL_RUN_COLUMNS.items() if any(c in r for r in rows)}
    return {**RUN_COLUMNS, **extra}


def write_runs(path: Path, rows: list[dict[str, Any]]) -> None:
    """runs.parquet with RUN_COLUMNS and the optional columns the rows have (missing: ""), typed;
    written whole or not at all."""
    from simkit.outfiles import write_atomic

    cols = run_columns(rows)
    rows = [{**{c: "" for c in OPTIONAL_RUN_COLUMNS if c in cols}, **r} for r in rows]
    frame = _frame(rows, cols)
    write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def step_summary(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Draft/accept totals over a run's step rows."""
    return {
        "num_steps": len(rows),
        "num_drafts": int(sum(r["num_drafting_reqs"] for r in rows)),
        "num_draft_tokens": int(sum(r["num_spec_tokens"] for r in rows)),
        "num_pad_tokens": int(sum(r["num_pad_drafts"] for r in rows)),
        "num_accepted_tokens": int(sum(r["num_accepted"] for r in rows)),
    }


def dumps(obj: Any) -> str:
    """Compact deterministic JSON for string columns."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
