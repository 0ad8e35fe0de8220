"""Compile the suffix drafter's numba kernels ahead of the first replay.

numba compiles the kernels on their first call in a process and caches the machine code beside
the sources (about 14 CPU-s on a fresh install), so the first drafting command would wait for
the compile with a core idle. jit_lock.start() runs this module in a background process while
the command does its other work (reading records, rebuilding requests); the command's replays
wait for it and read the cache. With the cache current it takes about a second. `simkit
validate` and the test suite use it.

    python -m simkit.drafters.suffix.warmup        # compile now, in this process
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class _Request:
    prompt_ids: object
    output_ids: object


def compile_kernels(done: Callable[[str], None] = lambda stage: None) -> None:
    """Drive every compiled entry point once on two made-up requests with the argument types of
    every real call (int32 token ids, int64 row bases, uint8 tables, the default SuffixParams),
    so numba compiles and caches exactly the signatures simkit uses: the concurrent and
    sequential replays (acceptance tables) and each call of the in-loop drafter (start, sampled
    tokens, draft, stop, a restart that evicts). done(stage) after each of jit_lock.STAGES, in
    that order (the concurrent replay first: every speculative table of validate needs it)."""
    import numpy as np

    from simkit.drafters.suffix import compiled
    from simkit.drafters.suffix.cache import SuffixParams
    from simkit.drafters.suffix.in_loop import CompiledInLoopSuffix

    tokens = np.arange(1, 41, dtype=np.int32) % 7 + 1        # repeats: the trees get matches
    requests = [_Request(tokens[:8], tokens[8:]), _Request(tokens[:8], tokens[4:])]
    kmax, params = 8, SuffixParams()
    rows = np.array([0, len(tokens) - 8], np.int64)
    n_rows = int(rows[-1]) + len(tokens) - 4

    def table() -> tuple:
        return np.zeros((n_rows, kmax), np.uint8), np.zeros((n_rows, kmax), np.uint8)

    compiled.replay_concurrent(requests, params, kmax, rows, *table(), 2, None)
    done("concurrent")
    compiled.replay_sequential(requests, params, kmax, rows, *table(), None)
    done("sequential")
    d = CompiledInLoopSuffix(requests[:1], kmax, params)
    d.sampled("a", 0, 0, 2)
    d.draft("a", 0, 2)
    d.stop("a")
    d.sampled("a", 0, 2, 3)
    done("in_loop")


def _release_stages() -> Callable[[str], None]:
    """done() for compile_kernels under jit_lock.start(): releases each stage's lock (the fds
    jit_lock.STAGE_FDS_ENV names) once that stage is cached; LOCK_ENV's goes when this exits."""
    import fcntl
    import os

    from simkit.drafters.suffix.jit_lock import STAGE_FDS_ENV

    fds = dict(item.split("=") for item in os.environ.get(STAGE_FDS_ENV, "").split(",") if item)

    def done(stage: str) -> None:
        fd = fds.pop(stage, None)
        if fd is not None:
            fcntl.flock(int(fd), fcntl.LOCK_UN)
            os.close(int(fd))
    return done


if __name__ == "__main__":
    compile_kernels(_release_stages())
