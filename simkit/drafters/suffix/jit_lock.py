"""The lock of a background compile of the drafter's kernels (warmup.py): `start()` runs
`python -m simkit.drafters.suffix.warmup` holding an exclusive file lock named by LOCK_ENV, and
the first compiled replay of any process that inherits LOCK_ENV waits for it (`wait_once`,
called by compiled._require_numba), then reads the kernels from numba's cache; `compiling()`
tells work that drafts nothing to go first meanwhile. Imports nothing
of the drafter, so that the replays can wait on it.
"""

from __future__ import annotations

import os
import subprocess
import sys

LOCK_ENV = "SIMKIT_JIT_LOCK"        # the lock file; inherited by forked workers and children
_WAITED: list[bool] = []            # this process has waited for the lock already


def start():
    """Start the background compile holding a new lock, and point LOCK_ENV at it in os.environ
    (so forked workers and child commands wait on it too); returns the handle for stop(), or
    None where there is nothing to do (numba absent, SIMKIT_PURE_DRAFTER=1, a lock already set
    by a parent, no POSIX locks, no process or temporary file to be had)."""
    try:
        import fcntl
        import tempfile

        import numba  # noqa: F401
    except ImportError:
        return None
    if os.environ.get(LOCK_ENV) or os.environ.get("SIMKIT_PURE_DRAFTER") == "1":
        return None
    child_env = dict(os.environ)             # without LOCK_ENV (none is set, checked above): the
                                             # child holds the lock, it must not wait on it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH")) if p)
    fd = path = None
    try:                         # an optimisation only: where it cannot start, replays compile
        fd, path = tempfile.mkstemp(prefix="simkit-jit-", suffix=".lock")
        fcntl.flock(fd, fcntl.LOCK_EX)       # held by the child (the inherited fd) until it exits
        proc = subprocess.Popen([sys.executable, "-m", "simkit.drafters.suffix.warmup"],
                                env=child_env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        if path is not None:
            os.close(fd)
            os.unlink(path)
        return None
    os.close(fd)
    os.environ[LOCK_ENV] = path
    _WAITED.clear()
    return proc, path


def wait_once() -> None:
    """Block until the background compile (if one holds LOCK_ENV's lock) has finished, once per
    process: numba then loads the kernels from its cache. A failed compile releases the lock
    too, and the caller compiles what is missing."""
    path = os.environ.get(LOCK_ENV)
    if not path or _WAITED:
        return
    try:
        import fcntl

        with open(path) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH)
    except (ImportError, OSError):           # no lock file (removed) or no POSIX locks
        pass
    _WAITED.append(True)


def compiling() -> bool:
    """A background compile holds LOCK_ENV's lock right now (a replay would wait for it)."""
    path = os.environ.get(LOCK_ENV)
    if not path or _WAITED:
        return False
    try:
        import fcntl

        with open(path) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except (ImportError, OSError):
        pass
    return False


def stop(handle) -> None:
    """End the background compile if it still runs (numba writes each cache file whole, so the
    next command compiles what is missing), reap it and remove its lock."""
    if handle is None:
        return
    proc, path = handle
    if proc.poll() is None:
        proc.terminate()
    proc.wait()
    if os.environ.get(LOCK_ENV) == path:
        del os.environ[LOCK_ENV]
    try:
        os.unlink(path)
    except OSError:
        pass
