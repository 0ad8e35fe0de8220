"""Measurement sittings: runs made back to back on one GPU machine, told apart by their start times.

Runs whose start times are within `gap_min` minutes of the previous run belong to one sitting
(one machine, one day). 15 minutes: the longest pause between two runs of one machine in the
records is 9.9 minutes (an engine start after a long run), and a GPU machine that sits idle for
longer is a different one when it comes back (two 0.33 machines of 2026-12-03 evening ran 23
minutes apart). A cost model that transfers must predict the runs of a sitting it was not
fitted on; `simkit validate` and tests/benchmarks/bench_version_transfer.py hold sittings out.
"""

from __future__ import annotations

from typing import Any

GAP_MIN = 15.0


def assign_sittings(runs: Any, gap_min: float = GAP_MIN) -> Any:
    """A Series (index of `runs`) naming each run's sitting 'YYYY-MM-DDTHH:MM' by its first
    run's start (UTC)."""
    import pandas as pd

    start = pd.to_datetime(runs["started_utc"], utc=True)
    order = start.sort_values(kind="stable")
    names, current, last = {}, None, None
    for idx, t in order.items():
        if last is None or (t - last).total_seconds() > gap_min * 60:
            current = t.strftime("%Y-%m-%dT%H:%M")
        names[idx] = current
        last = t
    return pd.Series(names).reindex(runs.index)


__all__ = ["GAP_MIN", "assign_sittings"]
