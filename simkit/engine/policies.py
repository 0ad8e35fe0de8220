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


def check_k_ranges(ranges: Sequence[tuple[int, int, int]]) -> tuple[tuple[int, int, int], ...]:
    """vLLM 0.34's checks of num_speculative_tokens_per_batch_size (v1/spec_decode/dynamic/
    utils.py:7-74): positive inclusive (start, end) ranges, sorted, not overlapping, the first
    starting at 1, every K >= 0; simkit adds K <= 64 and one K > 0 (else it is vanilla).
    InputError naming the range otherwise."""
    from simkit.errors import InputError

    def bad(msg: str) -> InputError:
        return InputError(f"batch-size K table: {msg}", field="configs")

    if not ranges:
        raise bad("no range given")
    prev_end = 0
    for start, end, k in ranges:
        if start < 1 or end < start:
            raise bad(f"range {start}-{end} must have 1 <= start <= end")
        if start <= prev_end:
            raise bad(f"range {start}-{end} overlaps or precedes the range before it "
                      "(ranges must be sorted and must not overlap)")
        if not 0 <= k <= 64:
            raise bad(f"K {k} of range {start}-{end} must be in 0..64")
        prev_end = end
    if ranges[0][0] != 1:
        raise bad(f"the first range must start at batch size 1, not {ranges[0][0]}")
    if max(k for _, _, k in ranges) < 1:
        raise bad("every K is 0: that is vanilla")
    return tuple(tuple(r) for r in ranges)


def dense_k_table(ranges: Sequence[tuple[int, int, int]], num_spec_tokens: int,
                  max_num_seqs: int) -> list[int]:
    """vLLM 0.34's dense lookup (dynamic/utils.py:77-148): table[n] = K for a step that
    scheduled n requests, n = 1..max_num_seqs (table[0] unused, = table[1]); a gap between
    ranges carries the previous range's K forward, sizes past the last range carry its K, and
    every K is clamped to num_speculative_tokens."""
    table = [0] * (max_num_seqs + 1)
    i, k = 0, ranges[0][2]
    for n in range(1, max_num_seqs + 1):
        while i < len(ranges) and ranges[i][0] <= n:
            k = ranges[i][2]
            i += 1
        table[n] = min(k, num_spec_tokens)
    table[0] = table[1]
    return table


def tier_widths(table: Sequence[int]) -> dict[int, int]:
    """K -> the widest batch size whose step chooses it: vLLM captures each K tier's decode
    graphs up to that many requests (config/vllm.py:677-706)."""
    out: dict[int, int] = {}
    for n in range(1, len(table)):
        out[table[n]] = n
    return out


class BatchSizeKTable:
    """vLLM 0.34's num_speculative_tokens_per_batch_size: the scheduler looks K up with the
    number of requests scheduled in step t (scheduler.py:1764-1769) and the async scheduler
    gives every request k slots for step t+1 (async_scheduler.py:22, 41): the K a step verifies
    comes from the batch size of the step before it (the engine calls choose() after step t
    with n_scheduled = step t's requests)."""

    needs_observation = False

    def __init__(self, table: Sequence[int]) -> None:
        self.table = list(table)

    def observe(self, pairs, k) -> None:
        return None

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:
        n = n_scheduled if n_scheduled < len(self.table) else len(self.table) - 1
        return self.table[n]
