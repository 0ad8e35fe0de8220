"""Jobs of one Cell on worker processes forked once and kept until the pool closes.

`runner.run_jobs` forks a pool per batch of jobs, right for a ladder known up front. A search
decides its next jobs from the last results (the capacity search: a rate's next seed only where
the seeds so far meet the goals, the next rate only once one is decided), so it ran a batch per
step, forking a pool and waiting for its slowest job each time. A JobPool forks once for the
whole search, takes jobs one at a time (`submit`) and hands back whichever finished (`done`),
so a worker moves on to the next job of any configuration as soon as it is free. Results do not
depend on the number of workers: a job's result is its simulation's, wherever it ran.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Sequence

from simkit.engine import runner
from simkit.engine.runner import Cell, Job, RunResult


class JobPool:
    """Simulate jobs of `cell` on up to `workers` forked processes (default: all cores, at most
    `width`, the most jobs the caller keeps in flight); one worker runs each job here, at
    submit. The command's progress tracker counts a job when submitted and when done."""

    def __init__(self, cell: Cell, workers: int | None = None, width: int | None = None) -> None:
        self.cell = cell
        prefixes = (cell.cached_prefixes if cell.cached_prefixes is not None
                    else runner.history_cached_prefixes(cell.workload, cell.engine))
        self.history = (prefixes, runner.history_repeated(cell.workload, cell.engine))
        limit = workers or os.cpu_count() or 1
        self.workers = max(1, min(limit, width if width is not None else limit))
        self._fork = "fork" in mp.get_all_start_methods()
        self._pool: ProcessPoolExecutor | None = None
        self._key: int | None = None
        self.forks = 0                   # pools started (one at most): what a test counts

    def __enter__(self) -> "JobPool":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.close(interrupted=kind is not None and issubclass(kind, KeyboardInterrupt))

    def submit(self, job: Job) -> Future:
        """Start `job`; its Future holds the RunResult (already, with one worker)."""
        from simkit.progress import current

        tracker = current()
        if tracker is not None:
            tracker.started(1, draw=True)
        if self.workers == 1:
            fut: Future = Future()
            fut.set_result(runner._simulate(self.cell, self.history, job))
            return fut
        if self._pool is None:
            self._start(job)
        if self._fork:
            return self._pool.submit(runner._run_registered, self._key, job)
        return self._pool.submit(runner._simulate, self.cell, self.history, job)

    def done(self, futures: Sequence[Future]) -> list[Future]:
        """Wait until at least one of `futures` is done; those done, in the given order (each
        counted once by the tracker: pass each future to `done` until it is returned)."""
        from simkit.interrupt import POLL_S, check
        from simkit.progress import current

        pending = list(futures)
        while True:
            finished, _ = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            if finished:
                break
            check()
        out = [f for f in pending if f in finished]
        tracker = current()
        if tracker is not None:
            tracker.finished(len(out))
        return out

    def _start(self, first: Job) -> None:
        if self._fork:
            runner._load_compiled(self.cell, self.history, first)
            self._key = next(runner._KEYS)
            runner._CELLS[self._key] = (self.cell, self.history)
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=mp.get_context("fork") if self._fork else None,
            initializer=runner.ignore_sigint)
        self.forks += 1

    def close(self, interrupted: bool = False) -> None:
        """End the workers (at once after a Ctrl-C) and drop the cell."""
        try:
            if self._pool is not None:
                if interrupted:
                    runner.stop_pool(self._pool)
                self._pool.shutdown(wait=True)
        finally:
            self._pool = None
            if self._key is not None:
                runner._CELLS.pop(self._key, None)
                self._key = None


def results(pool: JobPool, futures: Sequence[Future]) -> list[RunResult]:
    """Every future's result, in order, waiting on them all through `pool` (progress counted)."""
    from simkit.interrupt import result

    left = list(futures)
    while left:
        got = pool.done(left)
        left = [f for f in left if f not in got]
    return [result(f) for f in futures]


__all__ = ["JobPool", "results"]
