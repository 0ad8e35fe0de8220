"""Measured runs predicted on every core: `simkit validate` re-predicts each recorded run under
its own conditions (about a hundred and more per version), one after the other it took minutes.

`map_runs(fn, rows, progress)` applies fn to each run on forked worker processes (they inherit
what the parent built: request pools, records, calibrations) and returns the results in `rows`
order, so the output is the same bytes whatever the number of cores. The runs are handed to the
workers longest first (by the steps the run recorded, `num_steps`: a simulation's cost follows
its step count), so that a long run started last does not leave the other cores idle at the end;
while the drafter's kernels compile in the background, the vanilla runs go first.
Ctrl-C ends the workers at once (simkit.engine.runner.stop_pool); the command's progress tracker
counts the runs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

_FN: list[Callable[[Any], Any]] = []     # the function the forked workers apply


def _worker_init() -> None:
    """A worker ignores Ctrl-C (the parent ends it), draws no progress of its own and yields
    to the drafter's compile while it runs."""
    from simkit import progress
    from simkit.drafters.suffix.jit_lock import yield_to_compile
    from simkit.engine.runner import ignore_sigint

    ignore_sigint()
    yield_to_compile()
    progress._CURRENT[:] = [None]


def _apply(row: Any) -> Any:
    return _FN[-1](row)


def longest_first(rows: Sequence[Any], drafting_last: bool = False,
                  group: Callable[[Any], Any] | None = None, apart: int = 1) -> list[int]:
    """Indices of `rows` by decreasing recorded step count (`num_steps`; rows without one count
    as 0), ties in row order: the order the workers take them. `drafting_last`: the vanilla runs
    (config 'vanilla', which draft nothing) go first, each group longest first, so that the
    workers simulate them while the drafter's kernels still compile (jit_lock) instead of
    waiting for it. `group`: row -> the acceptance table it reads (None: none); a drafting run
    is put off behind the next longest whose table differs from those of the `apart` drafting
    runs before it (what the other workers are on), so that two workers do not wait on one
    table's build."""
    def steps(i: int) -> float:
        n = rows[i].get("num_steps") if hasattr(rows[i], "get") else None
        try:
            n = float(n)
        except (TypeError, ValueError):
            return 0.0
        return n if n == n else 0.0
    def drafts(i: int) -> bool:
        return not (hasattr(rows[i], "get") and rows[i].get("config") == "vanilla")
    order = sorted(range(len(rows)), key=lambda i: (drafting_last and drafts(i), -steps(i), i))
    if group is None or apart < 1:
        return order
    out: list[int] = []
    drafting: list[int] = []                      # the drafting runs of `out`, in order
    waiting = list(order)
    while waiting:
        recent = {group(rows[i]) for i in drafting[-apart:]}
        pick = next((j for j, i in enumerate(waiting)
                     if not drafts(i) or group(rows[i]) not in recent), 0)
        out.append(waiting.pop(pick))
        if drafts(out[-1]):
            drafting.append(out[-1])
    return out


def map_runs(fn: Callable[[Any], Any], rows: Sequence[Any],
             progress: Callable[[str], None] | None = None,
             workers: int | None = None, group: Callable[[Any], Any] | None = None) -> list[Any]:
    """[fn(row) for row in rows], on up to `workers` forked processes (default: all cores);
    progress(run_id) as each result arrives, in order. `group`: as longest_first's."""
    from simkit.engine.runner import stop_pool
    from simkit.interrupt import result
    from simkit.progress import current, detached

    tracker = current()
    if tracker is not None:
        tracker.started(len(rows), lines=progress is None)   # its own lines: progress
    workers = max(1, min(workers or os.cpu_count() or 1, len(rows)))
    fork = "fork" in mp.get_all_start_methods()

    def done(row: Any) -> None:
        if tracker is not None:
            tracker.finished(1)
        if progress:
            progress(row["run_id"])

    if workers == 1 or not fork:
        out = []
        for row in rows:
            with detached():
                out.append(fn(row))
            done(row)
        return out
    _FN.append(fn)
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"),
                                 initializer=_worker_init) as pool:
            futures: list[Any] = [None] * len(rows)
            from simkit.drafters.suffix.jit_lock import compiling

            for i in longest_first(rows, drafting_last=compiling(), group=group,
                                   apart=workers - 1):
                futures[i] = pool.submit(_apply, rows[i])
            out = []
            try:
                for row, fut in zip(rows, futures):
                    out.append(result(fut))
                    done(row)
            except KeyboardInterrupt:
                stop_pool(pool)
                raise
            return out
    finally:
        _FN.pop()
