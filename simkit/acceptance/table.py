"""Per-position acceptance tables: a(t, K) and d(t, K) for every request, position and K."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class AcceptanceTable:
    """Accepted and drafted lengths at every output position, for K = 1..kmax, of one corpus.

    Row `offsets[r] + t` belongs to request r when t output tokens are already known (the first
    output token comes from the prefill step, so a decode step starts at t >= 1). Column k-1 holds
    K = k: `drafted` = d(t, K) tokens proposed (0..K), `accepted` = a(t, K) <= d(t, K) tokens equal to
    the real output[t:t+a]. A step at t advances the request by a + 1 (the bonus/recovered token).
    """

    model: str
    corpus: str
    drafter: str
    params: dict
    kmax: int
    ordering: str                       # "sequential" or "concurrent"
    prompt_len: np.ndarray              # (n_req,) int32
    output_len: np.ndarray              # (n_req,) int32
    offsets: np.ndarray                 # (n_req + 1,) int64 into the row axis
    accepted: np.ndarray                # (rows, kmax) uint8
    drafted: np.ndarray                 # (rows, kmax) uint8
    provenance: dict = field(default_factory=dict)

    @property
    def num_requests(self) -> int:
        return int(self.prompt_len.shape[0])

    def row(self, request: int, t: int) -> int:
        """Row index of request `request` at output position t."""
        return int(self.offsets[request]) + t

    def accepted_at(self, request: int, t: int, k: int) -> int:
        return int(self.accepted[self.offsets[request] + t, k - 1])

    def drafted_at(self, request: int, t: int, k: int) -> int:
        return int(self.drafted[self.offsets[request] + t, k - 1])
