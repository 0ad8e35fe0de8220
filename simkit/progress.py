"""Simulations finished so far, for the whole command: a progress bar on stderr and the line a
Ctrl-C prints.

Every simulation a command runs goes through `simkit.engine.runner.run_jobs` (predict, sweep,
every what-if, validate, the reference reproduction) or the fleet planner; each reports its jobs
here (`started(n)`, then `finished()` per job). The command line installs one tracker per
command (`tracking()`): on a terminal it draws one rich bar on stderr (transient: gone when the
output is printed), unless the command draws its own (`started(n, draw=False)`); anywhere it
counts, so that an interrupted command can say how far it got (`summary()`). Without an
installed tracker (the Python API, tests) nothing is drawn or counted.

Phases: a command states what it is doing and how much of it there is (`phase(name, total,
unit)`: the capacity search's pilot and each of its rounds, a profile build's corpus and
tables); simulations started outside a stated phase form one "simulations" phase. On a
terminal each phase is a bar with its own total; elsewhere (a log, a pipe) the tracker writes
one line per phase on stderr, once the command has run LINE_AFTER_S: the phase, how far it is,
and, once a tenth of it is done (PACE_SHARE), the time left at its pace so far; a command that
ends within that time prints nothing. Why the tenth: a phase's first units carry its start-up
(a kernel compile, a table load), and a pace read off them said "about 5,819 s left" of a
replay that ended 40 s later. A one-off wait stated `aside` (the engine's compile on a fresh
install) is left out of the pace of the phases under way beside it.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator

LINE_AFTER_S = 2.0          # off a terminal: phases are reported once the command runs this long
REDRAW_S = 0.1              # on a terminal: a bar is redrawn at most this often
PACE_SHARE = 0.1            # the time left is stated only from a pace over this share of a phase


@dataclass
class _Phase:
    """One stated phase: its name, total and unit, how far it is, whether its line was said."""

    name: str
    total: int
    unit: str
    start: float
    draw: bool = True
    done: int = 0
    begun: int = 0                  # simulations started in it
    said: bool = False
    task: object = None
    aside: bool = False             # a one-off wait the other phases' pace leaves out


class Tracker:
    """Counts of simulations started and finished in this command; draws a bar when given
    one (a rich Progress on stderr, started at the first simulation)."""

    def __init__(self, bar=None, lines=None) -> None:
        self.total = 0
        self.done = 0
        self._bar = bar
        self._started = False
        self._lines = lines              # a stream for one line per phase (off a terminal)
        self._t0 = time.monotonic()
        self._phases: list[_Phase] = []  # stated phases, innermost last
        self._sims: _Phase | None = None  # simulations started outside a stated phase
        self._drawn_at = float("-inf")    # when a bar was last redrawn

    # -- phases ------------------------------------------------------------------------------
    def open_phase(self, name: str, total: int, unit: str, aside: bool = False) -> _Phase:
        """Begin a stated phase (see `phase`)."""
        ph = _Phase(name, int(total), unit, time.monotonic(), aside=aside)
        self._phases.append(ph)
        self._draw(ph)
        self._say(ph)
        return ph

    def close_phase(self, ph: _Phase) -> None:
        """End a stated phase: its bar goes. An `aside` phase's time is taken off the pace of
        the phases under way beside it (their start moves on by it)."""
        self._phases.remove(ph)
        if ph.task is not None:
            self._bar.remove_task(ph.task)
        if ph.aside:
            spent = time.monotonic() - ph.start
            for other in (*self._phases, self._sims):
                if other is not None and other.start <= ph.start:
                    other.start += spent

    def advance(self, ph: _Phase, n: int) -> None:
        """`n` more units of the phase are done."""
        ph.done += n
        if ph.task is not None:
            self._bar.advance(ph.task, n)
            # drawn here (a compiled simulation holds the GIL from rich's own thread), at most
            # every REDRAW_S: the drafters' replays advance once per request
            now = time.monotonic()
            if now - self._drawn_at >= REDRAW_S or ph.done >= ph.total:
                self._bar.refresh()
                self._drawn_at = now
        self._say(ph)

    def _sim_phase(self, n: int, draw: bool) -> _Phase:
        """The phase simulations count towards: the innermost stated phase of simulations, or
        the command's own "simulations" phase (grown by `n`)."""
        for ph in reversed(self._phases):
            if ph.unit == "simulations":
                ph.begun += n
                if ph.begun > ph.total:               # more than stated: the total grows
                    ph.total = ph.begun
                    if ph.task is not None:
                        self._bar.update(ph.task, total=ph.total)
                return ph
        if self._sims is None:
            self._sims = _Phase("simulations", 0, "simulations", time.monotonic(), draw)
        ph = self._sims
        ph.total += n
        if ph.task is None:
            ph.draw = ph.draw and draw
            self._draw(ph)
        elif ph.task is not None:
            self._bar.update(ph.task, total=ph.total)
        return ph

    def _draw(self, ph: _Phase) -> None:
        if self._bar is None or not ph.draw or ph.total <= 0:
            return
        if not self._started:
            self._bar.start()
            self._started = True
        ph.task = self._bar.add_task(ph.name, total=ph.total)
        self._bar.refresh()

    def _say(self, ph: _Phase) -> None:
        """Off a terminal: the phase's one line, once the command has run LINE_AFTER_S."""
        if self._lines is None or ph.said:
            return
        now = time.monotonic()
        if now - self._t0 < LINE_AFTER_S:
            return
        ph.said = True
        text = f"{ph.name}: {ph.done:,} of {ph.total:,} {ph.unit} done after {now - self._t0:.0f} s"
        if ph.total * PACE_SHARE <= ph.done < ph.total:
            left = (now - ph.start) / ph.done * (ph.total - ph.done)
            text += f", about {left:.0f} s left at this pace"
        print(text, file=self._lines, flush=True)

    # -- simulations -------------------------------------------------------------------------
    def started(self, n: int, *, draw: bool = True, lines: bool = True) -> None:
        """`n` more simulations are under way; draw=False: their caller shows its own bar;
        lines=False: its own lines."""
        self.total += n
        ph = self._sim_phase(n, draw)
        if lines:
            self._say(ph)
        else:
            ph.said = True

    def finished(self, n: int = 1) -> None:
        """`n` simulations are done; a Ctrl-C lost on the way is raised here
        (simkit.interrupt)."""
        from simkit.interrupt import check

        self.done += n
        check()
        ph = self._sim_phase(0, True)
        self.advance(ph, n)

    def summary(self) -> str | None:
        """'12 of 27 simulations had finished', or None before any started."""
        if not self.total:
            return None
        return f"{self.done} of {self.total} simulation(s) had finished"

    def close(self) -> None:
        """The command is over (or interrupted): the bars go."""
        if self._started:
            self._bar.stop()
            self._started = False


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
    lines = sys.stderr if draw is None and bar is None else None
    tracker = Tracker(bar if draw is not False else None, lines)
    _CURRENT.append(tracker)
    try:
        yield tracker
    finally:
        tracker.close()
        _CURRENT.remove(tracker)


@contextlib.contextmanager
def phase(name: str, total: int, unit: str = "simulations",
          aside: bool = False) -> Iterator[Callable[[int], None]]:
    """A stated phase of the command: `total` units of `unit` (simulations started inside it
    count towards it); yields advance(n) for other units (tokens replayed, sources read).
    `aside`: a one-off wait (the first run's compile) that the time left of the phases under
    way beside it leaves out: it will not come again. Without a tracker, nothing."""
    tracker = current()
    if tracker is None:
        yield lambda n: None
        return
    ph = tracker.open_phase(name, total, unit, aside)
    try:
        yield lambda n: tracker.advance(ph, n)
    finally:
        tracker.close_phase(ph)


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


# the one line a phase prints off a terminal (Tracker._say); readers that want a command's own
# stderr lines (an error line, a warning) tell these apart with is_phase_line
_PHASE_LINE = re.compile(r"^.+: [\d,]+ of [\d,]+ .+ done after \d+ s(, about \d+ s left at this pace)?$")


def is_phase_line(text: str) -> bool:
    """True for a progress phase's stderr line ('PHASE: N of M UNITS done after S s[, ...]')."""
    return bool(_PHASE_LINE.match(text.strip()))
