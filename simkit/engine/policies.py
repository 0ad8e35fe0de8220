"""How a configuration picks K for the next step: fixed, or one of three dynamic-K policies.

Dynamic policies choose one K from a set KS for the whole batch (drafts padded to K, so the batch
stays uniform and graphs are captured per K). They are called after each step, before drafting.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Callable, Protocol, Sequence

# price(k, num_decode_reqs, context_tokens, real_drafts) -> predicted step seconds of a uniform
# decode batch at that K (the engine builds it from the cost model and the K's capture list).
PriceFn = Callable[[int, int, int, int], float]


class KPolicyName(StrEnum):
    """The dynamic-K policies a configuration can name (dynamic-table, -feedback, -goodput)."""

    TABLE = "table"            # BatchSizeTable
    FEEDBACK = "feedback"      # FeedbackK
    GOODPUT = "goodput"        # GoodputK


class KPolicy(Protocol):
    """Chooses K for the next step and learns from what the last step accepted."""

    needs_observation: bool

    def observe(self, pairs: Sequence[tuple[int, int]], k: int) -> None: ...

    def choose(self, drafts_at: Callable[[int], list[int]], n_decode: int, context: int,
               n_scheduled: int) -> int: ...


class FixedK:
    """One K for every step (vanilla: 0)."""

    needs_observation = False

    def __init__(self, k: int) -> None:
        self.k = k

    def observe(self, pairs, k) -> None:  # noqa: D102 - nothing to learn
        return None

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:
        return self.k


class AcceptanceEWMA:
    """Per-position acceptance estimates, updated once per step with smoothing factor alpha.

    cond[i]: P(slot i accepted | slots < i accepted and a real draft at i).
    uncond[i]: share of decode request-steps that accepted at least i tokens (only positions <= the
    step's K are observed; unobserved positions keep their last value, starting optimistic at 1).
    """

    def __init__(self, kmax: int, alpha: float = 0.1) -> None:
        self.kmax, self.alpha = kmax, alpha
        self.cond = [1.0] * (kmax + 1)
        self.uncond = [1.0] * (kmax + 1)

    def update(self, pairs: Sequence[tuple[int, int]], k: int) -> None:
        if not pairs:
            return
        kk = min(k, self.kmax)
        # histograms of the deepest slot verified (min(d, a+1)) and accepted (a), then suffix sums:
        # reach[i] = #(verified >= i), acc[i] = #(accepted >= i)
        reach = [0] * (kk + 2)
        acc = [0] * (kk + 2)
        for a, d in pairs:
            top = a + 1 if a + 1 < d else d
            reach[top if top < kk else kk] += 1
            acc[a if a < kk else kk] += 1
        for i in range(kk - 1, -1, -1):
            reach[i] += reach[i + 1]
            acc[i] += acc[i + 1]
        al, n = self.alpha, len(pairs)
        for i in range(1, kk + 1):
            if reach[i]:
                self.cond[i] += al * (acc[i] / reach[i] - self.cond[i])
            self.uncond[i] += al * (acc[i] / n - self.uncond[i])

    def cumulative(self) -> list[float]:
        """cum[d] = expected accepted tokens of a real draft of length d."""
        cum, prod, total = [0.0], 1.0, 0.0
        for i in range(1, self.kmax + 1):
            prod *= self.cond[i]
            total += prod
            cum.append(total)
        return cum


class BatchSizeTable:
    """(a) K looked up from the number of requests the step scheduled, like vLLM 0.26's
    num_speculative_tokens_per_batch_size (its dense batch_size -> K lookup after each step).

    The table is tuned offline, once per run: for each batch-size bucket, the K in KS with the
    highest (1 + mean accepted at K over the corpus) per predicted step second.
    """

    needs_observation = False
    BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

    def __init__(self, ks: Sequence[int], mean_accepted: dict[int, float], mean_context: float,
                 price: PriceFn) -> None:
        self.table: list[tuple[int, int]] = []
        for n in self.BUCKETS:
            best = max(ks, key=lambda k: (n * (1 + mean_accepted[k])
                                          / price(k, n, int(n * mean_context), 0), -k))
            self.table.append((n, best))

    def observe(self, pairs, k) -> None:
        return None

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:
        for n, k in self.table:
            if n_scheduled <= n:
                return k
        return self.table[-1][1]


class FeedbackK:
    """(b) Acceptance feedback: the largest K in KS whose K-th slot is still accepted in at least
    `threshold` of request-steps (EWMA); no cost model involved."""

    needs_observation = True

    def __init__(self, ks: Sequence[int], alpha: float = 0.1, threshold: float = 0.2) -> None:
        self.ks = sorted(ks)
        self.threshold = threshold
        self.ewma = AcceptanceEWMA(self.ks[-1], alpha)

    def observe(self, pairs, k) -> None:
        self.ewma.update(pairs, k)

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:
        best = self.ks[0]
        for k in self.ks:
            if self.ewma.uncond[k] >= self.threshold:
                best = k
        return best


class GoodputK:
    """(c) Goodput maximiser: per step, the K in KS with the most expected tokens per predicted
    step second, from each request's draft length at K, EWMA per-position acceptance and the
    cost model's step time of the padded uniform batch."""

    needs_observation = True

    def __init__(self, ks: Sequence[int], price: PriceFn, alpha: float = 0.1) -> None:
        self.ks = sorted(ks)
        self.price = price
        self.ewma = AcceptanceEWMA(self.ks[-1], alpha)

    def observe(self, pairs, k) -> None:
        self.ewma.update(pairs, k)

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:
        if n_decode == 0:
            return self.ks[-1]
        cum = self.ewma.cumulative()
        best_k, best_rate = self.ks[0], -1.0
        for k in self.ks:
            drafts = drafts_at(k)                       # d(t, K) <= K
            expected = n_decode + sum(map(cum.__getitem__, drafts))
            rate = expected / self.price(k, n_decode, context, sum(drafts))
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k
