"""A batch-size K table derived from simulated throughput: vLLM 0.34's
`num_speculative_tokens_per_batch_size`, one K per range of batch sizes.

Given tok/s per K at a few load levels (the batch sizes a closed loop at each concurrency runs),
the best K at each level is kept and the levels are joined into inclusive ranges, the boundary
between two levels whose best K differs at their geometric mean (batch sizes between two measured
levels are not simulated: the boundary is a choice, stated as such). K = 0 means no speculation
at those batch sizes. The ranges satisfy vLLM's own checks (first range starts at 1, sorted,
non-overlapping, K >= 0: `v1/spec_decode/dynamic/utils.py:7-74` in vllm-0.34.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

KRange = tuple[int, int, int]        # (first batch size, last batch size, K), inclusive


@dataclass(frozen=True)
class LevelChoice:
    """The best K at one load level and how far ahead of the runner-up it is."""

    level: int                       # batch size (closed-loop concurrency) simulated
    k: int                           # best K (0 = no speculation)
    tok_s: float
    runner_up_k: int | None
    margin: float                    # best / runner-up - 1 (0 when only one K was simulated)


def best_k_per_level(levels: Sequence[int], tok_s: Mapping[int, Sequence[float]]) -> list[LevelChoice]:
    """The best K at each level from tok/s per K (tok_s[K][i] at levels[i]); ties go to the
    smaller K (less verify work for the same throughput)."""
    if not levels:
        raise ValueError("no load level given")
    if list(levels) != sorted(set(levels)) or levels[0] < 1:
        raise ValueError("levels must be increasing batch sizes >= 1")
    for k, row in tok_s.items():
        if k < 0 or len(row) != len(levels):
            raise ValueError(f"K {k}: expected {len(levels)} figures, one per level, and K >= 0")
    out = []
    for i, level in enumerate(levels):
        ranked = sorted(tok_s, key=lambda k: (-float(tok_s[k][i]), k))
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        best_v = float(tok_s[best][i])
        margin = 0.0 if second is None else best_v / float(tok_s[second][i]) - 1.0
        out.append(LevelChoice(level, best, best_v, second, margin))
    return out


def table_from_choices(choices: Sequence[LevelChoice], max_batch_size: int) -> list[KRange]:
    """Join per-level choices into vLLM's inclusive ranges, covering 1..max_batch_size."""
    if not choices:
        raise ValueError("no level choice given")
    if max_batch_size < choices[-1].level:
        raise ValueError("max_batch_size is below the largest level")
    ranges: list[list[int]] = [[1, max_batch_size, choices[0].k]]
    for prev, cur in zip(choices, choices[1:]):
        if cur.k == ranges[-1][2]:
            continue
        boundary = max(prev.level, min(cur.level - 1, math.isqrt(prev.level * cur.level)))
        ranges[-1][1] = boundary
        ranges.append([boundary + 1, max_batch_size, cur.k])
    return [tuple(r) for r in ranges]            # type: ignore[misc]


def k_at(table: Sequence[KRange], batch_size: int) -> int:
    """The K a table gives a batch size (the last range's K past its end, as vLLM carries it)."""
    k = table[0][2]
    for start, end, kk in table:
        if batch_size < start:
            break
        k = kk
    return k


def format_table(table: Sequence[KRange]) -> str:
    """'1-16:8,17-64:4,65-1024:0': the ranges as one option value."""
    return ",".join(f"{a}-{b}:{k}" for a, b, k in table)


__all__ = ["KRange", "LevelChoice", "best_k_per_level", "format_table", "k_at",
           "table_from_choices"]
