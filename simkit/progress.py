"""Simulations finished so far, for the whole command: a progress bar on stderr and the line a
Ctrl-C prints.

Every simulation a command runs goes through `simkit.engine.runner.run_jobs` (predict, sweep,
every what-if, validate, the reference reproduction) or the fleet planner; each reports its jobs
here (`started(n)`, then `finished()` per job). The command line installs one tracker per
command (`tracking()`): on a terminal it draws one rich bar on stderr (transient: gone when the
output is printed), unless the command draws its own (`started(n, draw=False)`); anywhere it
counts, so that an interrupted command can say how far it got (`summary()`). Without an
installed tracker (the Python API, tests) nothing is drawn or counted.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator


class Tracker:
    """Counts of simulations started and finished in this command; draws a bar when given
    one (a rich Progress on stderr, started at the first simulation)."""

    def __init__(self, bar=None) -> None:
        self.total = 0
        self.done = 0
        self._bar = bar
        self._task = None

    def started(self, n: int, *, draw: bool = True) -> None:
        """`n` more simulations are under way; draw=False: their caller shows its own bar."""
        self.total += n
        if self._bar is None or not draw:
            return
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("simulations", total=n)
        else:
            self._bar.update(self._task, total=self._bar.tasks[0].total + n)

    def finished(self, n: int = 1) -> None:
        """`n` simulations are done; a Ctrl-C lost on the way is raised here
        (simkit.interrupt)."""
        from simkit.interrupt import check

        self.done += n
        check()
        if self._task is not None:
            self._bar.advance(self._task, n)

    def summary(self) -> str | None:
        """'12 of 27 simulations had finished', or None before any started."""
        if not self.total:
            return None
        return f"{self.done} of {self.total} simulation(s) had finished"

    def close(self) -> None:
        if self._task is not None:
            self._bar.stop()
            self._task = None


_CURRENT: list[Tracker | None] = []


def current() -> Tracker | None:
    """The installed tracker, or None."""
    return _CURRENT[-1] if _CURRENT else None


def _terminal_bar():
    """A transient rich bar on stderr when stderr is a terminal, else None."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """No tracker inside: a caller that counts coarser units (validate: one per measured run)
    keeps the simulations under it from being counted twice."""
    _CURRENT.append(None)
    try:
        yield
    finally:
        _CURRENT.pop()


@contextlib.contextmanager
def tracking(draw: bool | None = None) -> Iterator[Tracker]:
    """Install a tracker for one command; draw None: a bar only when stderr is a terminal."""
    bar = _terminal_bar() if draw is None and sys.stderr is not None else None
    tracker = Tracker(bar if draw is not False else None)
    _CURRENT.append(tracker)
    try:
        yield tracker
    finally:
        tracker.close()
        _CURRENT.remove(tracker)


@contextlib.contextmanager
def status(text: str) -> Iterator[None]:
    """A spinner with `text` on a terminal's stderr while a long step with no simulations to
    count runs (a fit, a table build); nothing elsewhere."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    with console.status(text):
        yield
