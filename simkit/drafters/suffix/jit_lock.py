"""The locks of a background compile of the drafter's kernels (warmup.py): `start()` runs
`python -m simkit.drafters.suffix.warmup` holding an exclusive file lock named by LOCK_ENV, and
the first compiled replay of any process that inherits LOCK_ENV waits for it (`wait_once`,
called by compiled._require_numba), then reads the kernels from numba's cache; `compiling()`
tells work that drafts nothing to go first meanwhile. Imports nothing of the drafter, so that
the replays can wait on it.

The compile goes in STAGES (each kernel family about 2 to 10 CPU-s), and each stage but the last
has a lock of its own (LOCK_ENV's path + "." + stage) that the compile releases as soon as that
stage's kernels are cached: a replay that needs only the concurrent kernel starts while the
others still compile. The last stage (the in-loop drafter) has LOCK_ENV's lock, held until the
compile ends, which waiting for no stage in particular (`wait_once()`) waits on.
"""

from __future__ import annotations

import os
import subprocess
import sys

LOCK_ENV = "SIMKIT_JIT_LOCK"        # the lock file; inherited by forked workers and children
STAGE_FDS_ENV = "SIMKIT_JIT_STAGE_FDS"   # to the compile: "stage=fd,..." of the stages' locks
STAGES = ("concurrent", "sequential", "in_loop")   # compile order; the last has LOCK_ENV's lock
_WAITED: list[str | None] = []      # the stages this process has waited for (None: all)


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
    stage_fds: dict[str, int] = {}
    try:                         # an optimisation only: where it cannot start, replays compile
        fd, path = tempfile.mkstemp(prefix="simkit-jit-", suffix=".lock")
        fcntl.flock(fd, fcntl.LOCK_EX)       # held by the child (the inherited fd) until it exits
        for stage in STAGES[:-1]:            # released by the child as each stage is cached
            stage_fds[stage] = os.open(_stage_path(path, stage),
                                       os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            fcntl.flock(stage_fds[stage], fcntl.LOCK_EX)
        child_env[STAGE_FDS_ENV] = ",".join(f"{k}={v}" for k, v in stage_fds.items())
        proc = subprocess.Popen([sys.executable, "-m", "simkit.drafters.suffix.warmup"],
                                env=child_env, pass_fds=(fd, *stage_fds.values()),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        if path is not None:
            os.close(fd)
            _remove(path)
        for sfd in stage_fds.values():
            os.close(sfd)
        return None
    os.close(fd)
    for sfd in stage_fds.values():
        os.close(sfd)
    os.environ[LOCK_ENV] = path
    _WAITED.clear()
    return proc, path


def _stage_path(path: str, stage: str | None) -> str:
    """The lock file of a stage (None or the last stage: LOCK_ENV's own)."""
    return path if stage is None or stage == STAGES[-1] else f"{path}.{stage}"


def wait_once(stage: str | None = None) -> None:
    """Block until the background compile (if one holds LOCK_ENV's lock) has cached the kernels
    of `stage` (one of STAGES; None: every stage), once per process and stage: numba then loads
    them from its cache. A failed compile releases its locks too, and the caller compiles what
    is missing. A lock set without stage locks (an older parent's) is waited on whole."""
    path = os.environ.get(LOCK_ENV)
    if not path or None in _WAITED or stage in _WAITED:
        return
    target = _stage_path(path, stage)
    if not os.path.exists(target):
        target = path
    try:
        import fcntl

        with open(target) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH)
    except (ImportError, OSError):           # no lock file (removed) or no POSIX locks
        pass
    _WAITED.append(None if target == path else stage)


def compiling() -> bool:
    """A background compile holds LOCK_ENV's lock right now (some replay would wait for it)."""
    path = os.environ.get(LOCK_ENV)
    if not path or None in _WAITED:
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


YIELD_NICE = 3     # how far a process yields to the compile (nice increment; it cannot go back)


def yield_to_compile() -> None:
    """In a process forked to work beside a background compile (a validate worker, the refit):
    run at a lower priority while it compiles, so that on a small machine the compile, which
    every drafting run waits for, keeps a core to itself instead of a share of one (measured on
    2 cores: the first drafting run no longer waits with a core idle). Nothing while no compile
    runs; a process that cannot change its priority runs as it was."""
    if compiling():
        try:
            os.nice(YIELD_NICE)
        except OSError:
            pass


def stop(handle) -> None:
    """End the background compile if it still runs (numba writes each cache file whole, so the
    next command compiles what is missing), reap it and remove its locks."""
    end_compile(handle, LOCK_ENV, _remove)


def end_compile(handle, lock_env: str, remove) -> None:
    """End a background compile process (a (process, lock path) handle, or None) if it still
    runs, reap it, clear `lock_env` when it names this lock, and `remove(path)` its lock files;
    the engine kernel's background compile (simkit.engine.fast.background) ends the same way."""
    if handle is None:
        return
    proc, path = handle
    if proc.poll() is None:
        proc.terminate()
    proc.wait()
    if os.environ.get(lock_env) == path:
        del os.environ[lock_env]
    remove(path)


def _remove(path: str) -> None:
    """Remove a compile's lock files (LOCK_ENV's and the stages'), those that exist."""
    for stage in STAGES:
        try:
            os.unlink(_stage_path(path, stage))
        except OSError:
            pass
