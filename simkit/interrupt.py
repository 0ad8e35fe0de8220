"""Ctrl-C that no library can lose: the command line's SIGINT handler raises KeyboardInterrupt as
Python's own does, and also remembers that the user asked to stop.

Why: Python runs a signal handler at whichever bytecode the main thread is on. When that is a
finaliser (a `__del__`, a weakref callback, a garbage-collection pass on a busy machine) the
KeyboardInterrupt is printed as "Exception ignored" and dropped; library code that catches
BaseException (a simpy process, a numba dispatcher) can lose it too; and a main thread blocked on
a worker's result does not see it until that result arrives. The command then ran on to its
result after a Ctrl-C. With the flag, every wait on a worker polls it (`result`), every finished
simulation checks it (simkit.progress), and the command line checks it once more before any
output, so a lost KeyboardInterrupt is raised again within a fraction of a second.
"""

from __future__ import annotations

import signal
from typing import Any

POLL_S = 0.2          # how often a wait on a worker's result looks at the flag
_SEEN = [False]


def _on_sigint(signum: int, frame: Any) -> None:
    _SEEN[0] = True
    raise KeyboardInterrupt


def install() -> None:
    """Handle SIGINT with the remembering handler, where Python's default handler is in place
    (a shell that started the command with SIGINT ignored keeps it ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def interrupted() -> bool:
    """Whether a Ctrl-C reached this process since install()."""
    return _SEEN[0]


def check() -> None:
    """Raise KeyboardInterrupt again if a Ctrl-C came (and was lost on the way)."""
    if _SEEN[0]:
        raise KeyboardInterrupt


def result(fut: Any) -> Any:
    """fut.result(), looking at the flag every POLL_S while the worker runs."""
    while True:
        try:
            return fut.result(timeout=POLL_S)
        except TimeoutError:
            check()
