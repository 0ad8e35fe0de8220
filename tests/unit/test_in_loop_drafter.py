"""The suffix drafter inside the engine loop (simkit.drafters.suffix.in_loop) against the
acceptance tables: equal where a table's interleaving is the engine's (one request at a time),
different where it is not (a repeat in flight with its earlier copy)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from engine_doubles import LinearCost
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.drafters.suffix.cache import SuffixParams
from simkit.drafters.suffix.in_loop import InLoopSuffix
from simkit.drafters.suffix.replay import replay_concurrent, replay_sequential
from simkit.acceptance.table import AcceptanceTable
from simkit.engine.config import EngineConfig, kpad, suffix
from simkit.engine.scheduler import Scheduler
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.workload import Workload

KMAX = 16


@dataclass(frozen=True)
class R:
    prompt_ids: np.ndarray
    output_ids: np.ndarray


def _requests(seed: int, n: int, repeats: dict[int, int]) -> list[R]:
    """n requests of random tokens from a small vocabulary (so the trees find matches);
    request j of `repeats` gets the output of request repeats[j] (a new prompt, the same answer)."""
    rng = np.random.default_rng(seed)
    reqs = [R(rng.integers(0, 40, int(rng.integers(8, 30))).astype(np.int32),
              rng.integers(0, 40, int(rng.integers(20, 90))).astype(np.int32)) for _ in range(n)]
    for j, src in repeats.items():
        reqs[j] = R(reqs[j].prompt_ids, reqs[src].output_ids)
    return reqs


def _table(reqs: list[R], ordering: str, concurrency: int = 1) -> AcceptanceTable:
    plen = np.array([len(r.prompt_ids) for r in reqs], np.int32)
    olen = np.array([len(r.output_ids) for r in reqs], np.int32)
    offsets = np.zeros(len(reqs) + 1, np.int64)
    np.cumsum(olen, out=offsets[1:])
    acc = np.zeros((int(offsets[-1]), KMAX), np.uint8)
    dr = np.zeros_like(acc)
    if ordering == "sequential":
        replay_sequential(reqs, SuffixParams(), KMAX, offsets, acc, dr, None, engine="python")
    else:
        replay_concurrent(reqs, SuffixParams(), KMAX, offsets, acc, dr, concurrency, None,
                          engine="python")
    return AcceptanceTable(model="t", corpus="t", drafter=SUFFIX_DRAFTER, params={}, kmax=KMAX,
                           ordering=ordering, prompt_len=plen, output_len=olen, offsets=offsets,
                           accepted=acc, drafted=dr)


def _in_loop(reqs: list[R]) -> Workload:
    wl = Workload(np.array([len(r.prompt_ids) for r in reqs], np.int32),
                  np.array([len(r.output_ids) for r in reqs], np.int32), {})
    wl.in_loop[SUFFIX_DRAFTER] = partial(InLoopSuffix, reqs, KMAX)
    return wl


@pytest.mark.parametrize("spec", [suffix(24), kpad(4)], ids=["suffix24", "kpad4"])
def test_one_request_at_a_time_equals_the_sequential_table(spec):
    # alone in the batch, each request drafts against the earlier responses complete in the
    # tree, exactly what the sequential table holds: same accepted tokens, same steps
    reqs = _requests(1, 12, {5: 1, 9: 5, 11: 0})
    table = Workload.from_table(_table(reqs, "sequential"))
    args = dict(load=ClosedLoop(1), shuffle=False, window_start_completion=1)
    want = simulate(table, LinearCost(), EngineConfig(), spec, **args).metrics
    got = simulate(_in_loop(reqs), LinearCost(), EngineConfig(), spec, **args).metrics
    assert want.mean_accepted > 0.1               # the repeats accept drafts
    assert (got.steps, got.output_tokens, got.mean_accepted) == \
        (want.steps, want.output_tokens, want.mean_accepted)


def _trajectory(wl: Workload, spec, concurrency: int) -> list[dict[int, int]]:
    """Per engine step, each running request's output tokens so far (closed loop, in order)."""
    sched = Scheduler(EngineConfig(), spec, wl, LinearCost())
    offs = wl.offsets()
    from simkit.engine.scheduler import Req

    nxt = [0]

    def submit() -> None:
        i = nxt[0]
        if i < wl.num_requests:
            nxt[0] += 1
            sched.add(Req(i, i, int(wl.prompt_len[i]), int(wl.output_len[i]), offs[i], 0.0))

    for _ in range(concurrency):
        submit()
    out, now = [], 0.0
    while sched.has_work():
        plan = sched.schedule()
        now += 1.0
        sched.update(plan, now, [], [], lambda req, t: submit())
        out.append({r.idx: r.t for r in sched.running})
        out[-1].update({e.req.idx: e.req.t for e in plan.entries})
    return out


def test_a_repeat_in_flight_never_runs_ahead_of_its_earlier_copy():
    # request 2 repeats request 0's answer and starts while 0 is still running (C = 2, request 1
    # short). Drafting in the loop, its drafts come from what 0 has produced so far, so after
    # catching up it is never more than the one sampled token ahead; the concurrent table let it
    # accept 0's whole answer and run ahead.
    rng = np.random.default_rng(3)
    answer = rng.integers(100, 5000, 200).astype(np.int32)        # no repeats inside it
    reqs = [R(rng.integers(5000, 9000, 20).astype(np.int32), answer),
            R(rng.integers(5000, 9000, 20).astype(np.int32),
              rng.integers(9000, 9999, 10).astype(np.int32)),
            R(rng.integers(5000, 9000, 20).astype(np.int32), answer)]
    loop = _trajectory(_in_loop(reqs), suffix(24), 2)
    both = [s for s in loop if 0 in s and 2 in s]
    assert both and max(s[2] - s[0] for s in both) <= 1
    assert both[-1][2] >= both[-1][0]                             # it did catch up
    table = _trajectory(Workload.from_table(_table(reqs, "concurrent", 2)), suffix(24), 2)
    assert max(s[2] - s[0] for s in table if 0 in s and 2 in s) > 1
