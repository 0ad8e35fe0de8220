"""The engine loop's compile in the background (warmup.py) while a command loads its tables.

`start()` runs `python -m simkit.engine.fast.warmup` holding an exclusive file lock named by
LOCK_ENV; the first compiled run of any process that inherits LOCK_ENV (the command, its forked
workers) waits for the lock (`wait_once`, called by simkit.engine.fast.run) and then reads the
kernels from numba's cache. The same protocol as the drafter's compile
(simkit.drafters.suffix.jit_lock), with one stage: the kernels are compiled together.
A process whose first compiled run finds the cache cold all the same (no background compile:
a forked worker of validate, a test) runs the compile process itself and waits for it, and the
compile holds COMPILE_LOCK in numba's cache folder: of processes that find the cache cold
together, one compiles and the others read its cache (each compiled it, ~15 CPU-s, before).
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
_CHECKED: list[bool] = []               # this process made sure the kernels are cached
COMPILE_LOCK = "simkit-engine-compile.lock"   # in numba's cache folder of the kernels
PHASE = "compiling the simulator's engine loop (once after install)"


def start():
    """Start the background compile holding a new lock and point LOCK_ENV at it; returns the
    handle for stop(), or None where there is nothing to do (numba absent, the reference loop
    forced, a lock already set by a parent, no POSIX locks or process to be had)."""
    if os.environ.get(LOCK_ENV) or \
            os.environ.get(REFERENCE_ENV, "").strip().lower() == "reference":
        return None
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    if cached():                          # a warm install: a compile process would only cost
        return None
    handle = _spawn()
    if handle is not None:
        os.environ[LOCK_ENV] = handle[1]
        _WAITED.clear()
    return handle


def _spawn():
    """Run `python -m simkit.engine.fast.warmup` holding a new lock file until it exits;
    (process, lock path), or None where no POSIX lock, file or process is to be had."""
    try:
        import fcntl
        import tempfile
    except ImportError:
        return None
    env = dict(os.environ)                # without LOCK_ENV: the child must not wait on itself
    env.pop(LOCK_ENV, None)
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
    return proc, path


def cached() -> bool:
    """numba's cache holds every kernel of kernel.py as its source is now (each one's cache
    index lists a compiled signature; a changed source empties it): nothing to compile. Reads
    the index files only; anything unexpected (another numba's layout) answers False. Under
    NUMBA_DISABLE_JIT nothing is ever compiled: True."""
    try:
        from numba import config

        if config.DISABLE_JIT:
            return True
        kernels = _kernels()
        return bool(kernels) and all(f._cache._cache_file._load_index() for f in kernels)
    except Exception:                     # noqa: BLE001 - an optimisation's probe only
        return False


def _kernels() -> list:
    """kernel.py's compiled functions (numba dispatchers)."""
    from numba.core.registry import CPUDispatcher

    from simkit.engine.fast import kernel

    return [f for f in vars(kernel).values() if isinstance(f, CPUDispatcher)]


def wait_once() -> None:
    """Block until the background compile (if one holds LOCK_ENV's lock) has ended, then, once
    per process, make sure numba's cache holds the kernels: where it does not (no background
    compile, or it failed) run the compile process here and wait for it, so that the run reads
    the cache instead of compiling beside every other process that found it cold."""
    path = os.environ.get(LOCK_ENV)
    if path and path not in _WAITED:
        _wait_for(path)
        _WAITED.append(path)
    if _CHECKED:
        return
    _CHECKED.append(True)
    if cached():
        return
    handle = _spawn()
    if handle is not None:
        try:
            _wait_for(handle[1])
            handle[0].wait()              # it has let go of the lock: it is exiting
        finally:
            stop(handle)                  # ended if still at work (Ctrl-C), its lock removed


def checked() -> None:
    """This process compiles the kernels itself (warmup): its runs need not check the cache."""
    if not _CHECKED:
        _CHECKED.append(True)


def _wait_for(path: str) -> None:
    """Wait until no process holds the compile lock at `path` (a stated phase if it does)."""
    try:
        import fcntl

        with open(path) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:       # still compiling: a stated phase while it waits
                _wait(fh)
    except (ImportError, OSError):        # no lock file (removed) or no POSIX locks
        pass


@contextlib.contextmanager
def compile_lock() -> Iterator[None]:
    """Hold COMPILE_LOCK, in the folder numba caches the kernels in (writable, and shared by
    exactly the processes that read that cache), for the block: one process at a time
    compiles into a cache. Where no lock can be had, the block runs unlocked."""
    from simkit.filelock import exclusive

    # no such cache folder, another numba's layout: unlocked
    with exclusive(_compile_lock_path, unavailable=(Exception,)):
        yield


def _compile_lock_path() -> str:
    return os.path.join(_kernels()[0]._cache._cache_path, COMPILE_LOCK)


def _wait(fh) -> None:
    """Wait for the compile's lock as a stated phase, polled so that its line is said once
    the command has run 2 s and a Ctrl-C lost on the way still stops the wait."""
    import fcntl

    from simkit.interrupt import check
    from simkit.progress import phase

    with phase(PHASE, 1, "compile", aside=True) as told:   # not in the runs' pace
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
def compiling(needed: bool = True) -> Iterator[None]:
    """The engine's kernels compile in the background for the block (a command that will
    simulate on the compiled loop), stopped when it ends; `needed` False (its runs cannot take
    the compiled loop: simkit.engine.fast.may_take): nothing, not ~15 CPU-s beside its work."""
    handle = start() if needed else None
    try:
        yield
    finally:
        stop(handle)
