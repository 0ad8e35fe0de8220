"""Entry points of the compiled suffix drafter: lay requests out in one token array, run the kernels.

Same tables as the pure-Python replay (simkit.acceptance.build with engine="python"), byte for
byte (tests/slow/test_compiled_drafter.py); the kernels live in kernels.py / core.py.
numba compiles them on first use and caches the machine code (cache=True) next to the sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from simkit.drafters.suffix.cache import SuffixParams
from simkit.drafters.suffix.tree import MAX_TOKEN, f32, spec_cap

CHUNK_TOKENS = 100_000        # output tokens per kernel call between progress callbacks
FOREST_SIZES = (1 << 12, 1 << 14, 1 << 13)   # initial nodes, child-pool slots, hash slots (tests shrink them)


@dataclass(frozen=True)
class Response:
    """A prelude response as a request the replay only inserts (no prompt, never drafted)."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def with_prelude(prelude: Sequence, requests: Sequence, rowbase: np.ndarray
                 ) -> tuple[list, np.ndarray]:
    """The prelude responses as insert-only requests ahead of `requests` (rows -1: never drafted)."""
    empty = np.zeros(0, np.int32)
    pre = [Response(empty, np.asarray(o, np.int32)) for o in prelude]
    return pre + list(requests), np.concatenate([np.full(len(pre), -1, np.int64), rowbase])


def _ids(arr, r: int, field: str) -> np.ndarray:
    a = np.asarray(arr)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"request {r}: {field} must be a 1-D array of int token ids")
    if a.size and (int(a.min()) < 0 or int(a.max()) > MAX_TOKEN):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise ValueError(f"request {r}: {field}: token id {bad} outside 0..{MAX_TOKEN}")
    return a


def pack(requests: Sequence, with_prompt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(flat tokens, prompt start, prompt length, output length) per request; the output follows the
    prompt in `flat`. Prompts are laid out only where with_prompt[r] (requests that are drafted)."""
    n = len(requests)
    plen = np.zeros(n, np.int64)
    olen = np.zeros(n, np.int64)
    parts = []
    for r, req in enumerate(requests):
        out = _ids(req.output_ids, r, "output_ids")
        olen[r] = out.size
        if with_prompt[r] and out.size:
            p = _ids(req.prompt_ids, r, "prompt_ids")
            plen[r] = p.size
            parts.append(p.astype(np.int32, copy=False))
        parts.append(out.astype(np.int32, copy=False))
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    if flat.size >= 1 << 31:
        raise ValueError(f"{flat.size} tokens in one replay: the compiled drafter holds at most 2^31 "
                         "(use engine='python' or fewer requests)")
    pbase = np.zeros(n, np.int64)
    if n:
        np.cumsum((plen + olen)[:-1], out=pbase[1:])
    return flat, pbase, plen, olen


def require_numba_installed() -> None:
    """numba importable, else the ImportError that names the way out; called before anything
    that imports the kernels (they import numba first: a bare "No module named 'numba'")."""
    try:
        import numba  # noqa: F401
    except ImportError as exc:
        raise ImportError("the compiled suffix drafter needs numba (a dependency of simkit: "
                          "pip install -e . installs it); engine='python' or SIMKIT_PURE_DRAFTER=1 "
                          "uses the pure-Python drafter instead") from exc


def _require_numba(*stages: str) -> None:
    """numba present, and the background compile (jit_lock.start) done with these of its
    jit_lock.STAGES (none named: all of them), if one runs."""
    require_numba_installed()
    from simkit.drafters.suffix.jit_lock import wait_once

    for stage in stages or (None,):
        wait_once(stage)


def _setup(requests: Sequence, params: SuffixParams, rowbase: np.ndarray, *stages: str):
    _require_numba(*stages)
    from simkit.drafters.suffix.core import new_forest
    from simkit.drafters.suffix.kernels import GROOT

    if params.max_cached_requests > 0x7FFFFFFF:
        raise ValueError("max_cached_requests must be at most 2^31")
    flat, pbase, plen, olen = pack(requests, rowbase >= 0)
    T = new_forest(*FOREST_SIZES)
    from simkit.drafters.suffix.core import new_node
    root = new_node(T, 0, 0, 0, 0, -1)
    assert root == GROOT
    n = len(requests)
    state = (np.zeros(4, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64))
    depth = params.max_tree_depth
    caps = np.array([spec_cap(m, params.max_spec_factor, params.max_spec_offset)
                     for m in range(depth + 1)], np.int64)
    return T, state, flat, pbase, plen, olen, caps, f32(params.min_token_prob)


def replay_sequential(requests: Sequence, params: SuffixParams, kmax: int, rowbase: np.ndarray,
                      acc: np.ndarray, dr: np.ndarray, progress: Callable[[int], None] | None) -> None:
    """Sequential replay into acc/dr (uint8, rows x kmax); rowbase[r] = first row of request r, or
    -1 for a request that only enters the global tree (build_warm_table)."""
    require_numba_installed()
    from simkit.drafters.suffix.kernels import sequential_chunk

    rowbase = np.ascontiguousarray(rowbase, np.int64)
    T, (D, fifo, live, glen), flat, pbase, plen, olen, caps, minp = _setup(requests, params, rowbase,
                                                                           "sequential")
    from simkit.drafters.suffix.core import new_forest
    TL = new_forest(*FOREST_SIZES)           # local trees, one at a time
    lo, n = 0, len(requests)
    while lo < n:
        hi, tok = lo, 0
        while hi < n and (tok < CHUNK_TOKENS or hi == lo):
            tok += int(olen[hi])
            hi += 1
        T, TL = sequential_chunk(T, TL, D, fifo, live, glen, flat, pbase, plen, olen, rowbase, lo, hi,
                                 params.max_tree_depth, params.max_cached_requests, caps, minp, kmax,
                                 acc, dr)
        if progress:
            for r in range(lo, hi):
                if olen[r]:
                    progress(int(olen[r]))
        lo = hi


def replay_concurrent(requests: Sequence, params: SuffixParams, kmax: int, rowbase: np.ndarray,
                      acc: np.ndarray, dr: np.ndarray, concurrency: int,
                      progress: Callable[[int], None] | None, prelude: Sequence = ()) -> None:
    """Round-robin replay of `concurrency` in-flight requests (one output token per tick) into acc/dr.
    `prelude`: responses inserted into the global tree first, in order, each complete before the
    replay starts (a request history; the same insert-only walk as the sequential replay's)."""
    require_numba_installed()
    from simkit.drafters.suffix.kernels import concurrent_all, sequential_chunk

    rowbase = np.ascontiguousarray(rowbase, np.int64)
    first = len(prelude)
    if first:
        requests, rowbase = with_prelude(prelude, requests, rowbase)
    T, (D, fifo, live, glen), flat, pbase, plen, olen, caps, minp = _setup(
        requests, params, rowbase, "concurrent", *(("sequential",) if first else ()))
    if first:
        from simkit.drafters.suffix.core import new_forest

        T, _ = sequential_chunk(T, new_forest(2, 4, 2), D, fifo, live, glen, flat, pbase, plen,
                                olen, rowbase, 0, first, params.max_tree_depth,
                                params.max_cached_requests, caps, minp, kmax, acc, dr)
    concurrent_all(T, D, fifo, live, glen, flat, pbase, plen, olen, rowbase, first, concurrency,
                   params.max_tree_depth, params.max_cached_requests, caps, minp, kmax, acc, dr)
    if progress:
        for n_out in olen[first:]:
            if n_out:
                progress(int(n_out))

