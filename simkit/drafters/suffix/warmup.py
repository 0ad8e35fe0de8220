"""Compile the suffix drafter's numba kernels ahead of the first replay, in a process of its own.

numba compiles the kernels on their first call in a process and caches the machine code beside
the sources (about 16 CPU-s on a fresh install), so the first drafting command would wait for
the compile with a core idle. `start()` compiles them in a background process holding an
exclusive file lock while the command does its other work (reading records, rebuilding requests,
simulating what needs no drafter); the first compiled replay of the command and of its forked
workers waits for that lock (`wait_once`, called by compiled._require_numba) and then reads the
kernels from numba's cache instead of compiling them again. With the cache current the
background process takes about a second. `simkit validate` and the test suite use it.

    python -m simkit.drafters.suffix.warmup        # compile now, in this process
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

LOCK_ENV = "SIMKIT_JIT_LOCK"        # the lock file; inherited by forked workers and children
_WAITED: list[bool] = []            # this process has waited for the lock already


@dataclass(frozen=True)
class _Request:
    prompt_ids: object
    output_ids: object


def compile_kernels() -> None:
    """Drive every compiled entry point once on two made-up requests with the argument types of
    every real call (int32 token ids, int64 row bases, uint8 tables, the default SuffixParams),
    so numba compiles and caches exactly the signatures simkit uses: the sequential and
    concurrent replays (acceptance tables) and each call of the in-loop drafter (start, sampled
    tokens, draft, stop, a restart that evicts)."""
    import numpy as np

    from simkit.drafters.suffix import compiled
    from simkit.drafters.suffix.cache import SuffixParams
    from simkit.drafters.suffix.in_loop import CompiledInLoopSuffix

    tokens = np.arange(1, 41, dtype=np.int32) % 7 + 1        # repeats: the trees get matches
    requests = [_Request(tokens[:8], tokens[8:]), _Request(tokens[:8], tokens[4:])]
    kmax, params = 8, SuffixParams()
    rows = np.array([0, len(tokens) - 8], np.int64)
    n_rows = int(rows[-1]) + len(tokens) - 4
    for replay in (compiled.replay_sequential, compiled.replay_concurrent):
        acc, dr = np.zeros((n_rows, kmax), np.uint8), np.zeros((n_rows, kmax), np.uint8)
        args = (requests, params, kmax, rows, acc, dr)
        replay(*args, None) if replay is compiled.replay_sequential else replay(*args, 2, None)
    d = CompiledInLoopSuffix(requests[:1], kmax, params)
    d.sampled("a", 0, 0, 2)
    d.draft("a", 0, 2)
    d.stop("a")
    d.sampled("a", 0, 2, 3)


def start(env: dict[str, str] | None = None):
    """Start the background compile holding a new lock, and point LOCK_ENV at it (in os.environ
    and in `env` when given); returns the handle for stop(), or None where there is nothing to
    do (numba absent, SIMKIT_PURE_DRAFTER=1, a lock already set by a parent, no POSIX locks)."""
    try:
        import fcntl
        import tempfile

        import numba  # noqa: F401
    except ImportError:
        return None
    if os.environ.get(LOCK_ENV) or os.environ.get("SIMKIT_PURE_DRAFTER") == "1":
        return None
    fd, path = tempfile.mkstemp(prefix="simkit-jit-", suffix=".lock")
    fcntl.flock(fd, fcntl.LOCK_EX)           # held by the child (the inherited fd) until it exits
    child_env = dict(os.environ if env is None else env)   # without LOCK_ENV: the child holds
    child_env.pop(LOCK_ENV, None)                            # the lock, it must not wait on it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "simkit.drafters.suffix.warmup"],
                            env=child_env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(fd)
    os.environ[LOCK_ENV] = path
    if env is not None:
        env[LOCK_ENV] = path
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


if __name__ == "__main__":
    compile_kernels()
