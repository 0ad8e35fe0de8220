"""Compile the numba suffix drafter (simkit/drafters/suffix/kernels.py) once, before the tests.

numba compiles the kernels on their first call in a process and caches the machine code beside
the sources (about 35 CPU-s on a fresh checkout). Without this, every pytest-xdist worker and
every `simkit` process a test starts before one of them has written that cache compiles the same
kernels again: on a fresh clone that was most of the time of the first tests that build a suffix
table (tests/integration/test_history.py's took 60-80 s each instead of 1-2 s).

    python3 tests/jit_warmup.py

replays two made-up requests through the compiled drafter's public entry point, sequentially
and then concurrently, then drives the in-loop drafter's calls once (the argument types of every real call: int32 token ids, the default
SuffixParams), so numba compiles and caches exactly the signatures the tests and commands use.
tests/conftest.py starts it at the beginning of a run; with the cache current it takes about a
second.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _Request:
    prompt_ids: np.ndarray
    output_ids: np.ndarray


def warm(ordering: str) -> None:
    """Run one tiny compiled replay in `ordering` (sequential or concurrent)."""
    from simkit.acceptance.build import build_table

    tokens = np.arange(1, 41, dtype=np.int32) % 7 + 1        # repeats: the trees get matches
    requests = [_Request(tokens[:8], tokens[8:]), _Request(tokens[:8], tokens[4:])]
    build_table(requests, kmax=8, ordering=ordering, concurrency=2, engine="compiled")


def warm_in_loop() -> None:
    """Drive the compiled in-loop drafter (simkit.drafters.suffix.in_loop) through each of its
    calls once: start, sampled tokens, a draft, a stop, a restart that evicts the cached response."""
    from simkit.drafters.suffix.cache import SuffixParams
    from simkit.drafters.suffix.in_loop import CompiledInLoopSuffix

    tokens = np.arange(1, 41, dtype=np.int32) % 7 + 1
    d = CompiledInLoopSuffix([_Request(tokens[:8], tokens[8:])], 8, SuffixParams())
    d.sampled("a", 0, 0, 2)
    d.draft("a", 0, 2)
    d.stop("a")
    d.sampled("a", 0, 2, 3)


if __name__ == "__main__":
    for ordering in sys.argv[1:] or ("sequential", "concurrent", "in-loop"):
        warm_in_loop() if ordering == "in-loop" else warm(ordering)
