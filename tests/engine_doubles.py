"""Small hand-computable stand-ins for the engine tests: a linear step-cost model and tables.

These are test doubles for hand-computed engine cases only; predict uses the real cost model and
the real profiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.costmodel.batch import BatchDescriptor, GraphMode, StepCost


@dataclass
class LinearCost:
    """device = base + per_token * padded tokens (+ eager/piecewise surcharges); host = fixed."""

    base_s: float = 1e-3
    per_token_s: float = 1e-5
    host_s: float = 0.0
    piecewise_s: float = 0.0
    none_s: float = 0.0
    calls: list = field(default_factory=list)

    def step_cost(self, batch: BatchDescriptor) -> StepCost:
        self.calls.append(batch)
        dev = self.base_s + self.per_token_s * batch.num_padded_tokens
        if batch.graph_mode is GraphMode.PIECEWISE:
            dev += self.piecewise_s
        elif batch.graph_mode is GraphMode.NONE:
            dev += self.none_s
        return StepCost(device_s=dev, host_s=self.host_s, step_s=dev + self.host_s)


def make_table(prompt_len, output_len, accepted_fn, drafted_fn, kmax: int = 16,
               drafter: str = "suffix", slots: bool = False) -> AcceptanceTable:
    """A table whose a(t,K), d(t,K) come from functions of (request, t, K); rows t = 0..L-1.
    `slots`: a(t,K) counts accepted slots <= K (vLLM 0.34's fillers included, so it may exceed
    d); otherwise accepted drafts <= d."""
    plen = np.asarray(prompt_len, np.int32)
    olen = np.asarray(output_len, np.int32)
    offsets = np.zeros(len(olen) + 1, np.int64)
    offsets[1:] = np.cumsum(olen)
    acc = np.zeros((int(offsets[-1]), kmax), np.uint8)
    dr = np.zeros_like(acc)
    for r, L in enumerate(olen):
        for t in range(int(L)):
            for k in range(1, kmax + 1):
                d = min(k, drafted_fn(r, t, k))
                dr[offsets[r] + t, k - 1] = d
                acc[offsets[r] + t, k - 1] = min(k if slots else d, accepted_fn(r, t, k))
    return AcceptanceTable(model="test", corpus="test", drafter=drafter, params={}, kmax=kmax,
                           ordering="sequential", prompt_len=plen, output_len=olen,
                           offsets=offsets, accepted=acc, drafted=dr)


def patterned_table(prompt_len, output_len, seed: int, kmax: int = 8) -> AcceptanceTable:
    """A table whose drafts (0-8 tokens) and accepted counts (0-5) cycle with the request, the
    position and `seed`: varied batches for the property tests, reproducible from the seed."""
    return make_table(prompt_len, output_len, lambda r, t, k: (seed + r * 3 + t) % 6,
                      lambda r, t, k: (seed * 7 + r * 13 + t * 5) % 9, kmax=kmax)
