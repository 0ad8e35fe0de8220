"""Repeat-heavy request streams with a stated reuse distance (pure; the fleet's test traffic).

`repeat_stream(u, d)`: each of u unique requests arrives twice; the first arrivals keep their
order, and request j's repeat is placed d arrival slots after its first arrival (slots 2j and
2j + d before compaction, d odd), empty slots are then dropped. So most repeats come back exactly
d arrivals later (fewer for the first (d - 1) / 2 requests), and every request is served twice.
"""

from __future__ import annotations

import numpy as np

from simkit.errors import InputError


def repeat_stream(n_unique: int, reuse_distance: int) -> np.ndarray:
    """Indices into the unique requests, in arrival order (length 2 * n_unique)."""
    if n_unique < 1:
        raise InputError("must be >= 1", field="n_unique")
    if reuse_distance < 1 or reuse_distance % 2 == 0:
        raise InputError("must be an odd number >= 1 (first arrivals take the even slots)",
                         field="reuse_distance")
    j = np.arange(n_unique)
    slots = np.concatenate([2 * j, 2 * j + reuse_distance])
    order = np.argsort(slots, kind="stable")
    return np.concatenate([j, j])[order]


def reuse_distances(stream: np.ndarray) -> np.ndarray:
    """Arrivals between a request's first and second arrival, per unique request (index order)."""
    first: dict[int, int] = {}
    out = np.zeros(int(stream.max()) + 1 if stream.size else 0, np.int64)
    for pos, u in enumerate(stream.tolist()):
        if u in first:
            out[u] = pos - first[u]
        else:
            first[u] = pos
    return out
