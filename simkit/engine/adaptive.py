"""vLLM 0.34's adaptive verification for the GPU suffix drafter: the acceptance counters, the per-step
slot budget and the slot allocation, as the engine replays them step by step.

What vLLM does (vllm-0.34.0, read from the source; docs/engine.md "Adaptive verification"):
- The speculator keeps integer counters (accepted, observed) per (draft source own/corpus,
  match-length bucket, slot position) (`v1/worker/gpu/spec_decode/suffix/speculator.py:58-69,
  340-392`). A valid slot's confidence is (accepted + 1) / (observed + 2) in float32; fillers get 0.
  After a verification, the positions up to the first rejection (and within the valid and admitted
  slots) count as observed, those before it as accepted; every counter is halved every 1,024 steps.
- On the host, the budget for a step reads the confidences recorded one propose earlier (a
  double-buffered copy, `adaptive_verification.py:373-397`); survival of slot k is the product of
  the confidences up to k; the estimated accepted tokens of a budget b are the sampling requests plus
  the b largest survivals, its cost the drafter's cost at the request count plus the verify cost at
  (non-draft tokens + b); b = the first argmax of accepted / cost (`:399-467`).
- On the GPU the b slots of highest survival under the current confidences are admitted, ties
  handed out in request order (`:59-125`); a request verifies its admitted prefix.
This module is pure NumPy and knows nothing of the engine: the engine hands it each step's drafts
(source, match length, valid slots) and verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

NUM_LEN_BUCKETS = 9          # match lengths 1..6 one bucket each, then 7-10, 11-20, 21+
STATS_HALF_LIFE = 1024       # steps between halvings of every counter
SOURCE_OWN = 0               # the draft continues the request's own history
SOURCE_CORPUS = 1            # the draft comes from the corpus of finished responses


def len_bucket(match_len: int) -> int:
    """The counters' bucket of a match length (lengths below 1 count as 1)."""
    return int(len_buckets(np.asarray([match_len]))[0])


def len_buckets(match_len: np.ndarray) -> np.ndarray:
    """len_bucket of every match length of an array (int64)."""
    m = np.maximum(np.asarray(match_len, np.int64), 1)
    return np.where(m <= 6, m - 1, np.where(m <= 10, 6, np.where(m <= 20, 7, 8)))


@dataclass
class AcceptanceCounters:
    """The speculator's (accepted, observed) counters per (source, length bucket, position)."""

    k: int
    counts: np.ndarray = field(init=False)     # (2 * NUM_LEN_BUCKETS, k, 2) int64
    steps: int = 0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("K must be >= 1")
        self.counts = np.zeros((2 * NUM_LEN_BUCKETS, self.k, 2), np.int64)

    @staticmethod
    def bucket(source: int, match_len: int) -> int:
        """The counters' row of a draft from `source` with a match of `match_len` tokens."""
        return int(source) * NUM_LEN_BUCKETS + len_bucket(match_len)

    def confidences(self, source: int, match_len: int, num_valid: int) -> np.ndarray:
        """Confidence of each of the K slots of one draft (float32; fillers 0)."""
        row = self.counts[self.bucket(source, match_len)]
        conf = ((row[:, 0].astype(np.float32) + np.float32(1.0))
                / (row[:, 1].astype(np.float32) + np.float32(2.0)))
        conf[int(num_valid):] = np.float32(0.0)
        return conf

    def observe(self, bucket: int, num_valid: int, num_accepted: int, num_verified: int) -> None:
        """Fold one request's verdict on its last draft in: positions 0..num_accepted (the first
        rejection included) that were verified and valid are observed, those before the rejection
        accepted. A draft with no valid slot (bucket < 0) leaves the counters alone."""
        if bucket < 0:
            return
        pos = np.arange(self.k)
        seen = (pos <= num_accepted) & (pos < num_verified) & (pos < num_valid)
        self.counts[bucket, seen, 0] += (pos[seen] < num_accepted)
        self.counts[bucket, seen, 1] += 1

    def tick(self) -> None:
        """One propose step done: halve every counter each STATS_HALF_LIFE steps."""
        self.steps += 1
        if self.steps % STATS_HALF_LIFE == 0:
            self.counts >>= 1


def choose_budget(stale_confidences: np.ndarray, scheduled_drafts: np.ndarray,
                  num_sampling_requests: int, num_non_draft_tokens: int,
                  draft_cost_ms: float, verify_cost_ms: Callable[[int], float],
                  max_draft_budget: int | None = None) -> int:
    """The number of draft slots to verify this step (vLLM's host rule).

    stale_confidences: (requests, K) confidences recorded one propose earlier; scheduled_drafts:
    slots each request was scheduled (K for a decoding request); verify_cost_ms(tokens): the
    profiled forward cost of a batch of that many tokens."""
    conf = np.asarray(stale_confidences, np.float32)
    sched = np.asarray(scheduled_drafts, np.int64)
    survival = np.cumprod(conf.astype(np.float64), axis=1)
    valid = np.arange(conf.shape[1])[None, :] < sched[:, None]
    scores = np.sort(survival[valid])[::-1]
    limit = int(sched.sum()) if max_draft_budget is None else min(int(sched.sum()),
                                                                  max(0, int(max_draft_budget)))
    scores = scores[:limit]
    accepted = np.concatenate(([float(num_sampling_requests)],
                               num_sampling_requests + np.cumsum(scores)))
    costs = np.array([draft_cost_ms + verify_cost_ms(num_non_draft_tokens + b)
                      for b in range(limit + 1)], np.float64)
    return int(np.argmax(accepted / costs))


def allocate(confidences: np.ndarray, capacities: np.ndarray, budget: int) -> np.ndarray:
    """Admitted slots per request: the `budget` slots of highest survival (float32 products of the
    current confidences) among each request's first `capacities` slots, ties in request order."""
    conf = np.asarray(confidences, np.float32)
    cap = np.asarray(capacities, np.int64)
    total = int(cap.sum())
    if budget >= total:
        return cap.copy()
    if budget <= 0:
        return np.zeros_like(cap)
    survival = np.cumprod(conf, axis=1, dtype=np.float32)
    eligible = np.arange(conf.shape[1])[None, :] < cap[:, None]
    ranked = np.where(eligible, survival, np.float32(-1.0))
    threshold = np.sort(ranked[eligible])[::-1][budget - 1]
    above = (ranked > threshold).sum(axis=1)
    tied = (ranked == threshold).sum(axis=1)
    ties_left = budget - int(above.sum())
    tied_before = np.cumsum(tied) - tied
    taken = np.minimum(tied, np.maximum(ties_left - tied_before, 0))
    return above + taken


__all__ = ["AcceptanceCounters", "NUM_LEN_BUCKETS", "SOURCE_CORPUS", "SOURCE_OWN",
           "STATS_HALF_LIFE", "allocate", "choose_budget", "len_bucket", "len_buckets"]
