"""A closed-loop run's trajectory, kept so the same run can be priced under another cost model
without simulating it again.

Why it is exact: in a closed loop, what the engine schedules never depends on how long a step
takes. A client submits its next request at the moment its previous one finishes (a step's end),
the engine picks its next batch before those clients run, and acceptance, preemption, the
prefix cache and the FEEDBACK K policy read tokens and blocks, never seconds. Only the TABLE
and GOODPUT K policies read step prices, and an open loop's arrivals read the clock: neither is
kept. So the steps (their BatchDescriptors and counts) and, per request and per inter-token
gap, WHICH step a time is the end of, are the run; the times follow from the new step costs by
the same running sum SimPy adds (`now + step_s`), and `reprice` returns, float for float, the
RunResult `simulate` would under the new cost model (tests/test_trajectory.py checks it).

Invariant: every time `simulate` records is 0 or the end of a step, and step ends strictly
increase (a run with a zero-length step is not kept: its ends would not name one step).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.engine.metrics import Recorder, RunMetrics, summarize

# the BatchDescriptor fields kept per step (in this column order), graph mode as its code
_DESC_INTS = ("num_reqs", "num_tokens", "num_padded_tokens", "num_prefill_tokens",
              "num_prefill_reqs", "num_decode_reqs", "num_spec_tokens", "num_pad_drafts",
              "num_drafting_reqs", "context_tokens", "num_accepted_tokens")
_MODES = (GraphMode.FULL, GraphMode.PIECEWISE, GraphMode.NONE)
# the Recorder's per-step lists that do not depend on step time
_STEP_LISTS = ("mode", "tokens", "padded", "pad_drafts", "emitted", "accepted", "decodes",
               "decode_tokens", "reqs", "k", "kv_used")


@dataclass
class Trajectory:
    """What a closed-loop run scheduled, with its times as step indices (-1: time 0)."""

    config: str
    k: int
    seed: int
    num_requests: int
    skipped: dict[str, int]
    prefix: dict | None
    preemptions: int
    desc: np.ndarray                    # (steps, len(_DESC_INTS) + 1): counts, then mode code
    async_scheduling: bool
    drafter: str
    steps: dict[str, np.ndarray]        # Recorder lists that do not depend on time
    req_arrival: np.ndarray             # per finished request, in finishing order
    req_first: np.ndarray
    req_done: np.ndarray
    req_out: np.ndarray
    req_preempt: np.ndarray
    itl_emit: np.ndarray                # per inter-token gap: the step that emitted the token,
    itl_last: np.ndarray                # the step of the request's previous emission,
    itl_arrival: np.ndarray             # the request's arrival
    window: tuple[int, int] | None      # (warm-up end, last arrival) or None (no steady window)
    other_windows: dict[int, tuple[int, int] | None] = field(default_factory=dict)


class _StepIndex:
    """Maps a time `simulate` recorded back to the step whose end it is (-1 for time 0)."""

    def __init__(self, step_end: list[float]) -> None:
        self.end = np.asarray(step_end, dtype=np.float64)

    def exact(self, times) -> np.ndarray | None:
        """Indices of times that are exactly step ends or 0; None if any is not."""
        t = np.asarray(times, dtype=np.float64)
        i = np.searchsorted(self.end, t)
        hit = np.zeros(t.shape, bool)
        inside = i < self.end.size
        hit[inside] = self.end[i[inside]] == t[inside]
        zero = ~hit & (t == 0.0)
        if not (hit | zero).all():
            return None
        return np.where(zero, -1, i).astype(np.int64)

    def nearest(self, times) -> np.ndarray | None:
        """Indices of the step ends nearest to times carrying rounding error (a previous
        emission recovered as now - gap); None if one is not within 1e-9 s of a step end."""
        t = np.asarray(times, dtype=np.float64)
        ends = np.concatenate(([0.0], self.end))
        i = np.clip(np.searchsorted(ends, t), 1, ends.size - 1)
        left = np.abs(t - ends[i - 1]) <= np.abs(ends[i] - t)
        j = np.where(left, i - 1, i)
        if t.size and np.abs(ends[j] - t).max() > 1e-9:
            return None
        return (j - 1).astype(np.int64)


def capture(result, rec: Recorder, descs: list[BatchDescriptor], itl_per_step: list[int],
            window: tuple[float, float] | None,
            other_windows: dict[int, tuple[float, float] | None],
            preemptions: int) -> Trajectory | None:
    """The trajectory of a finished closed-loop run (`result`, the RunResult simulate built from
    `rec`), or None where its times cannot be named by step (a zero-length step)."""
    end = rec.step_end
    if not descs or any(b <= a for a, b in zip(end, end[1:])) or end[0] <= 0.0:
        return None
    first = descs[0]
    if any(d.async_scheduling != first.async_scheduling or d.drafter != first.drafter
           for d in descs):
        return None
    index = _StepIndex(end)
    arrays = rec.arrays()
    counts = np.asarray(itl_per_step, dtype=np.int64)
    itl_emit = np.repeat(np.arange(counts.size), counts)
    itl_last = index.nearest(np.asarray(end)[itl_emit] - np.asarray(rec.itl))
    mapped = [index.exact(x) for x in (rec.req_arrival, rec.req_first, rec.req_done,
                                       rec.itl_time)]

    def span(w: tuple[float, float] | None):
        return None if w is None else tuple(index.exact(w))

    spans = [span(window), *(span(w) for w in other_windows.values())]
    if itl_last is None or any(m is None for m in mapped) or \
            any(s is not None and None in s for s in spans):
        return None
    code = {m: c for c, m in enumerate(_MODES)}
    counts = attrgetter(*_DESC_INTS)
    desc = np.array([(*counts(d), code[d.graph_mode]) for d in descs], dtype=np.int64)
    return Trajectory(
        result.config, result.k, result.seed, result.num_requests, dict(result.skipped),
        result.prefix, preemptions, desc, first.async_scheduling, first.drafter,
        {name: arrays[name] for name in _STEP_LISTS},
        *mapped[:3], arrays["req_out"], arrays["req_preempt"], itl_emit, itl_last, mapped[3],
        spans[0], dict(zip(other_windows, spans[1:])))


def reprice(traj: Trajectory, cost_model) -> tuple[RunMetrics, dict[int, RunMetrics]]:
    """The run's metrics (and those over its other windows) under `cost_model`: its steps
    priced again, every recorded time moved to the new end of the same step."""
    from simkit.errors import InputError

    cols = traj.desc.tolist()
    costs = []
    for row in cols:
        *counts, mode = row
        costs.append(cost_model.step_cost(BatchDescriptor(
            *counts[:10], graph_mode=_MODES[mode], async_scheduling=traj.async_scheduling,
            drafter=traj.drafter, num_accepted_tokens=counts[10])))
    step_s = [c.step_s for c in costs]
    if min(step_s) <= 0.0:
        raise InputError("a step priced at zero seconds: the run cannot be repriced",
                         field="cost_model")
    ends = list(itertools.accumulate(step_s))        # SimPy's now + delay, in step order
    at = np.concatenate(([0.0], np.asarray(ends)))    # index + 1 -> time (-1 -> 0.0)
    rec = Recorder()
    rec.step_end, rec.step_s = ends, step_s
    rec.host_s = [c.host_frac * c.step_s for c in costs]
    for name, values in traj.steps.items():
        setattr(rec, name, values)
    rec.req_arrival = at[traj.req_arrival + 1]
    rec.req_first = at[traj.req_first + 1]
    rec.req_done = at[traj.req_done + 1]
    rec.req_out, rec.req_preempt = traj.req_out, traj.req_preempt
    rec.itl = at[traj.itl_emit + 1] - at[traj.itl_last + 1]
    rec.itl_time = at[traj.itl_arrival + 1]

    def window(span: tuple[int, int] | None) -> tuple[float, float] | None:
        return None if span is None else (float(at[span[0] + 1]), float(at[span[1] + 1]))

    metrics = summarize(rec, window(traj.window), traj.preemptions)
    others = {n: summarize(rec, window(s), traj.preemptions)
              for n, s in traj.other_windows.items()}
    return metrics, others


__all__ = ["Trajectory", "capture", "reprice"]
