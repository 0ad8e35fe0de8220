"""Dynamic-K policies and their acceptance estimates, checked by hand."""

import pytest

from engine_doubles import make_table
from simkit.engine.policies import AcceptanceEWMA, BatchSizeTable, FeedbackK, GoodputK
from simkit.engine.scheduler import mean_accepted_per_step
from simkit.engine.workload import Workload


def test_ewma_update_by_hand():
    e = AcceptanceEWMA(kmax=4, alpha=0.5)
    # two request-steps at K=4: (a=2, d=3) and (a=0, d=4)
    e.update([(2, 3), (0, 4)], k=4)
    # position 1: reached by both, accepted by one -> cond 1 + 0.5*(0.5-1) = 0.75
    # position 2: reached by the first only (second stopped at 1), accepted -> stays 1.0
    # position 3: reached by the first (d=3, a=2 -> slot 3 verified), rejected -> 0.5
    # position 4: not reached -> unchanged 1.0
    assert e.cond[1:] == [0.75, 1.0, 0.5, 1.0]
    # unconditional: share with a >= i: 1/2, 1/2, 0, 0
    assert e.uncond[1:] == [0.75, 0.75, 0.5, 0.5]
    cum = e.cumulative()
    assert cum[1] == pytest.approx(0.75) and cum[2] == pytest.approx(1.5)
    assert cum[3] == pytest.approx(1.5 + 0.375)


def test_ewma_leaves_positions_above_k_unobserved():
    e = AcceptanceEWMA(kmax=12, alpha=0.5)
    e.update([(0, 4)] * 3, k=4)
    assert e.uncond[5:] == [1.0] * 8 and e.uncond[1] == 0.5


def test_feedback_moves_between_extremes():
    f = FeedbackK([4, 6, 12], alpha=0.5, threshold=0.2)
    assert f.choose(None, 8, 0, 8) == 12              # optimistic start
    for _ in range(10):
        f.observe([(0, 12)] * 8, 12)                 # nothing accepted
    assert f.choose(None, 8, 0, 8) == 4
    for _ in range(10):
        f.observe([(4, 4)] * 8, 4)                   # everything accepted up to K=4
    assert f.ewma.uncond[4] > 0.99
    assert f.choose(None, 8, 0, 8) == 4              # 6 and 12 keep their last (low) estimate


def test_goodput_picks_k_by_expected_tokens_per_second():
    # every draft is 12 long and everything is accepted (EWMA starts at 1): tokens = n(1+K)
    drafts = {4: [4] * 8, 6: [6] * 8, 12: [12] * 8}
    flat = GoodputK([4, 6, 12], price=lambda k, n, ctx, real: 1.0)
    assert flat.choose(lambda k: drafts[k], 8, 0, 8) == 12
    # step time 1 + K: (1+K)/(1+K) ties at 1.0 for every K -> the first (smallest) K wins
    tied = GoodputK([4, 6, 12], price=lambda k, n, ctx, real: 1.0 + k)
    assert tied.choose(lambda k: drafts[k], 8, 0, 8) == 4
    # steep: time grows as (1+K)^2 -> smallest K
    steep = GoodputK([4, 6, 12], price=lambda k, n, ctx, real: (1.0 + k) ** 2)
    assert steep.choose(lambda k: drafts[k], 8, 0, 8) == 4


def test_batch_size_table_by_hand():
    # mean accepted 3 at K=4, 4 at K=12; price: 1 + 0.01 * tokens
    price = lambda k, n, ctx, real: 1.0 + 0.01 * n * (1 + k)  # noqa: E731
    table = BatchSizeTable([4, 12], {4: 3.0, 12: 4.0}, 100.0, price)
    # n=1: K=4 -> 4/1.05 = 3.81, K=12 -> 5/1.13 = 4.42 -> 12
    # n=64: K=4 -> 256/4.2 = 61.0, K=12 -> 320/9.32 = 34.3 -> 4
    assert table.choose(None, 0, 0, 1) == 12
    assert table.choose(None, 0, 0, 64) == 4
    assert table.choose(None, 0, 0, 5000) == table.table[-1][1]


def test_mean_accepted_per_step_replays_strides():
    # one request of 10 tokens, a = 2 everywhere: steps at t=1, 4, 7 (3 steps, 2 accepted each)
    w = Workload.from_table(make_table([5], [10], lambda r, t, k: 2, lambda r, t, k: 4, kmax=4))
    assert mean_accepted_per_step(w, "suffix", 4) == pytest.approx(2.0)
    w2 = Workload.from_table(make_table([5], [10], lambda r, t, k: t % 2, lambda r, t, k: 4,
                                        kmax=4))
    # t=1: a=1 -> t=3: a=1 -> t=5 -> t=7 -> t=9: a=1 -> end; 5 steps, 5 accepted
    assert mean_accepted_per_step(w2, "suffix", 4) == pytest.approx(1.0)
