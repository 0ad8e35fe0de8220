"""Synthetic step records drawn from the cost model itself with chosen coefficients and noise.

For testing the fitting code only (recovering known coefficients); they are never calibration
data and carry run_id prefixes 'synthetic-' so nobody mistakes them for measurements."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.costmodel.coefficients import Coefficients
from simkit.costmodel.model import CostModel
from simkit.costmodel.calibrations import load_cost_model
from simkit.drafters.base import NO_DRAFTER

CAPTURE_MAX = 512


def _padded(tokens: int) -> int:
    """Next capture size (vLLM's list: 1, 2, 4, multiples of 8 to 256, then of 16)."""
    for size in (1, 2, 4):
        if tokens <= size:
            return size
    step = 8 if tokens <= 256 else 16
    return -(-tokens // step) * step


def random_batch(rng: np.random.Generator, drafter: str, k: int, async_scheduling: bool,
                 max_reqs: int = 64) -> BatchDescriptor:
    """One plausible step: decodes with 0..k drafts each, sometimes prefill chunks."""
    reqs = int(rng.integers(1, max_reqs + 1))
    prefill_reqs = int(rng.integers(1, min(3, reqs) + 1)) if rng.random() < 0.15 else 0
    decode_reqs = reqs - prefill_reqs
    prefill_tokens = int(rng.integers(32, 1024, size=prefill_reqs).sum()) if prefill_reqs else 0
    if drafter != NO_DRAFTER and k:
        drafts = rng.integers(0, k + 1, size=decode_reqs) if rng.random() < 0.7 else np.full(decode_reqs, k)
    else:
        drafts = np.zeros(decode_reqs, dtype=int)
    spec = int(drafts.sum())
    tokens = decode_reqs + spec + prefill_tokens
    uniform = prefill_reqs == 0 and (spec == 0 or bool((drafts == k).all()))
    if tokens > CAPTURE_MAX:
        mode, padded = GraphMode.NONE, tokens
    else:
        mode, padded = (GraphMode.FULL if uniform else GraphMode.PIECEWISE), _padded(tokens)
    if rng.random() < 0.05:
        mode, padded = GraphMode.NONE, tokens   # e.g. enforce-eager / warm-up steps
    context = int(rng.integers(64, 8192, size=reqs).sum()) + prefill_tokens
    return BatchDescriptor(reqs, tokens, padded, prefill_tokens, prefill_reqs, decode_reqs, spec, 0,
                           decode_reqs if drafter != NO_DRAFTER else 0, context, mode, async_scheduling, drafter)


def generate_step_records(model: str, hardware: str, tp: int | None, coefs: Coefficients, n_steps: int,
                          seed: int, run_id: str, drafter: str = NO_DRAFTER, k: int = 0,
                          noise: float = 0.02) -> pd.DataFrame:
    """n_steps records of one synthetic run, with the recorder's column meanings: t_forward_s and
    t_sample_s are GPU time (forward; sampler + rejection kernels), t_sample_host_s the host side
    of sampling, t_gap_s the front-end work between steps, t_exec_host_s (only with dispatch terms)
    the model runner's host time (preparation plus issuing a PIECEWISE/eager forward); each is the model's value times
    log-normal noise of `noise` (relative sd).
    Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    base = load_cost_model(model, hardware, tp, calibration="analytic")
    cm = CostModel(base.model, base.hw, base.tp, coefs, "synthetic")
    async_scheduling = drafter == NO_DRAFTER
    # the model runner's host time is recorded when the coefficients price the dispatch
    with_dispatch = cm.prices_dispatch
    rows, t = [], 0.0
    for step in range(n_steps):
        b = random_batch(rng, drafter, k, async_scheduling)
        host = cm.host_time(b)
        e = np.exp(rng.normal(0.0, noise, size=8))
        parts_dev = cm.device_breakdown(b)
        sampling = (parts_dev["sampler"] + parts_dev["rejection"]) * e[6]
        fwd = (sum(parts_dev.values()) - parts_dev["sampler"] - parts_dev["rejection"]) * e[0]
        issue = host.dispatch * e[0]           # issuing a PIECEWISE/eager forward (0 without the terms)
        if not async_scheduling:
            fwd = max(fwd, issue)              # the forward ends no earlier than its last launch
        dev = fwd + sampling
        parts = dict(t_schedule_s=host.schedule * e[1], t_prepare_s=host.prepare * e[2], t_forward_s=fwd,
                     t_sample_s=sampling, t_draft_s=host.draft * e[4], t_update_s=host.update * e[5])
        sample_host = host.sample * e[3]
        if async_scheduling:
            overlap = parts["t_schedule_s"] + parts["t_prepare_s"] + issue + sample_host + parts["t_update_s"]
            serial = coefs.for_async_runner().async_serial_s / cm.host_speed
            step_s = max(dev, overlap) + parts["t_draft_s"] + serial
        else:
            step_s = sum(parts.values()) + sample_host
        step_s = max(step_s, host.frontend)   # the model's front-end floor (never binding here)
        if with_dispatch:                     # the model runner's host time: preparation + issuing
            parts["t_exec_host_s"] = parts["t_prepare_s"] + issue
        rows.append(dict(run_id=run_id, step=step, t_start_s=t, **parts, t_step_s=step_s,
                         t_sample_host_s=sample_host, t_gap_s=host.frontend * e[7],
                         num_reqs=b.num_reqs, num_tokens=b.num_tokens, num_padded_tokens=b.num_padded_tokens,
                         num_prefill_tokens=b.num_prefill_tokens, num_prefill_reqs=b.num_prefill_reqs,
                         num_decode_reqs=b.num_decode_reqs, num_spec_tokens=b.num_spec_tokens,
                         num_pad_drafts=b.num_pad_drafts, num_accepted=0, num_drafting_reqs=b.num_drafting_reqs,
                         context_tokens=b.context_tokens, graph_mode=b.graph_mode.value,
                         model=model, tp=base.tp, async_scheduling=async_scheduling, drafter=drafter))
        t += step_s
    return pd.DataFrame(rows)


__all__ = ["generate_step_records", "random_batch"]
