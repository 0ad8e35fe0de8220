"""The engine loop's compile in the background (warmup.py) while a command loads its tables.

`start()` runs `python -m simkit.engine.fast.warmup` holding an exclusive file lock named by
LOCK_ENV; the first compiled run of any process that inherits LOCK_ENV (the command, its forked
workers) waits for the lock (`wait_once`, called by simkit.engine.fast.run) and then reads the
kernels from numba's cache. The same protocol as the drafter's compile
(simkit.drafters.suffix.jit_lock), with one stage: the kernels are compiled together.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Iterator

LOCK_ENV = "SIMKIT_ENGINE_JIT_LOCK"     # the lock file; inherited by forked workers and children
REFERENCE_ENV = "SIMKIT_ENGINE_LOOP"     # =reference: no compiled runs (simkit.engine.fast.ENV)
_WAITED: list[str] = []                 # the lock this process has waited for


def start():
    """Start the background compile holding a new lock and point LOCK_ENV at it; returns the
    handle for stop(), or None where there is nothing to do (numba absent, the reference loop
    forced, a lock already set by a parent, no POSIX locks or process to be had)."""
    if os.environ.get(LOCK_ENV) or \
            os.environ.get(REFERENCE_ENV, "").strip().lower() == "reference":
        return None
    try:
        import fcntl
        import tempfile

        import numba  # noqa: F401
    except ImportError:
        return None
    if cached():                          # a warm install: a compile process would only cost
        return None
    env = dict(os.environ)                # without LOCK_ENV: the child must not wait on itself
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    fd = path = None
    try:                                  # an optimisation only: where it cannot start, the
        fd, path = tempfile.mkstemp(prefix="simkit-engine-jit-", suffix=".lock")  # run compiles
        fcntl.flock(fd, fcntl.LOCK_EX)    # held by the child (the inherited fd) until it exits
        proc = subprocess.Popen([sys.executable, "-m", "simkit.engine.fast.warmup"], env=env,
                                pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        if path is not None:
            os.close(fd)
            _remove(path)
        return None
    os.close(fd)
    os.environ[LOCK_ENV] = path
    _WAITED.clear()
    return proc, path


def cached() -> bool:
    """numba's cache holds every kernel of kernel.py as its source is now (each one's cache
    index lists a compiled signature; a changed source empties it): nothing to compile. Reads
    the index files only; anything unexpected (another numba's layout) answers False."""
    try:
        from numba.core.registry import CPUDispatcher

        from simkit.engine.fast import kernel

        kernels = [f for f in vars(kernel).values() if isinstance(f, CPUDispatcher)]
        return bool(kernels) and all(f._cache._cache_file._load_index() for f in kernels)
    except Exception:                     # noqa: BLE001 - an optimisation's probe only
        return False


def wait_once() -> None:
    """Block until the background compile (if one holds LOCK_ENV's lock) has ended, once per
    process; a failed compile releases the lock too, and the run compiles what is missing."""
    path = os.environ.get(LOCK_ENV)
    if not path or path in _WAITED:
        return
    try:
        import fcntl

        with open(path) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:       # still compiling: a stated phase while it waits
                _wait(fh)
    except (ImportError, OSError):        # no lock file (removed) or no POSIX locks
        pass
    _WAITED.append(path)


def _wait(fh) -> None:
    """Wait for the compile's lock as a stated phase, polled so that its line is said once
    the command has run 2 s and a Ctrl-C lost on the way still stops the wait."""
    import fcntl

    from simkit.interrupt import check
    from simkit.progress import phase

    with phase("compiling the simulator's engine loop (once after install)", 1,
               "compile") as told:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                told(0)
                check()
                time.sleep(0.1)
        told(1)


def stop(handle) -> None:
    """End the background compile if it still runs (numba writes each cache file whole, so the
    next command compiles what is missing), reap it and remove its lock."""
    from simkit.drafters.suffix.jit_lock import end_compile

    end_compile(handle, LOCK_ENV, _remove)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """The engine's kernels compile in the background for the block (a command that will
    simulate on the compiled loop), stopped when it ends."""
    handle = start()
    try:
        yield
    finally:
        stop(handle)
