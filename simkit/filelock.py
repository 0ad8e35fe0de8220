"""An exclusive lock on a file for the length of a block, or none where none can be had.

Why one helper: a table build (simkit.acceptance.cache) and the engine's compile
(simkit.engine.fast.background) each let one process at a time do a costly piece of work that
the others then read; both are optimisations whose results stay whole without the lock (atomic
renames, numba's whole cache files), so where the file system has no locks the block runs
unlocked instead of failing the command.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator


@contextlib.contextmanager
def exclusive(path_of: Callable[[], str], unavailable: tuple[type[BaseException], ...] = (OSError,)
              ) -> Iterator[None]:
    """Hold an exclusive flock on the file `path_of()` names (created if absent, kept after: a
    waiter may hold it open) for the block; where `path_of` or opening it raises one of
    `unavailable`, or the platform has no flock, the block runs unlocked."""
    try:
        import fcntl

        fh = open(path_of(), "a")
    except (ImportError, *unavailable):
        yield
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
