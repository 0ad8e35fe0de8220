"""Per-K acceptance statistics of a static-K replay over an AcceptanceTable (vectorised over requests)."""

from __future__ import annotations

import numpy as np

from simkit.acceptance.table import AcceptanceTable


def replay_positions(table: AcceptanceTable, k: int, requests: np.ndarray | None = None):
    """Yield (rows, remaining) for each decode step of a static-K replay, all requests in lockstep.

    A step at position t of request r uses row offsets[r] + t and advances min(a + 1, n - t).
    """
    if not 1 <= k <= table.kmax:
        raise ValueError(f"K={k} outside 1..{table.kmax} of this table")
    reqs = np.arange(table.num_requests) if requests is None else np.asarray(requests)
    n = table.output_len[reqs].astype(np.int64)
    base = table.offsets[reqs].astype(np.int64)
    t = np.ones_like(n)
    live = t < n
    acc = table.accepted[:, k - 1]
    while live.any():
        rows = base[live] + t[live]
        a = acc[rows].astype(np.int64)
        rem = n[live] - t[live]
        yield rows, rem
        t[live] += np.minimum(a + 1, rem)
        live = t < n


def summarize(table: AcceptanceTable, k: int, requests: np.ndarray | None = None,
              weights: np.ndarray | None = None) -> dict:
    """Steps, mean accepted/draft per step, tokens per step (bonus included, capped at the output's
    end), zero-draft fraction, accepted-length histogram (index = accepted tokens, 0..K) and
    per-position acceptance rates as vLLM reports them (accepted at position i / steps with a draft).
    `weights` (one per table request, a weighted profile sample): every step of request r counts
    weights[r] times, so the figures estimate the corpus; counts are then rounded to integers.
    A drafter that fills K slots (vLLM 0.34's suffix_gpu) verifies K tokens every step, so every
    step counts as a draft of K, as vLLM reports it: per-position rates and the acceptance rate
    are over all steps and K slots (mean_draft and zero_draft_frac still count real drafts)."""
    if weights is not None:
        return _weighted(table, k, requests, np.asarray(weights, np.float64))
    steps = 0
    sum_a = sum_d = sum_adv = zero = drafts = 0
    hist = np.zeros(k + 1, np.int64)
    per_pos = np.zeros(k, np.int64)
    for rows, rem in replay_positions(table, k, requests):
        a = table.accepted[rows, k - 1].astype(np.int64)
        d = table.drafted[rows, k - 1].astype(np.int64)
        steps += len(rows)
        sum_a += int(a.sum())
        sum_d += int(d.sum())
        sum_adv += int(np.minimum(a + 1, rem).sum())
        zero += int((d == 0).sum())
        drafts += int((d > 0).sum())
        hist += np.bincount(a, minlength=k + 1)[:k + 1]
        per_pos += np.bincount(np.minimum(a, k), minlength=k + 1)[::-1].cumsum()[::-1][1:]
    return _result(k, steps, sum_a, sum_d, sum_adv, zero, drafts, hist, per_pos,
                   _fills_k_slots(table))


def _fills_k_slots(table: AcceptanceTable) -> bool:
    from simkit.drafters.base import drafter_names, get_drafter

    return table.drafter in drafter_names() and get_drafter(table.drafter).fills_k_slots


def _weighted(table: AcceptanceTable, k: int, requests: np.ndarray | None,
              weights: np.ndarray) -> dict:
    """summarize with every row of request r weighted by weights[r]."""
    if weights.shape != (table.num_requests,):
        raise ValueError(f"{weights.size} weights for {table.num_requests} requests")
    row_w = np.repeat(weights, np.diff(np.asarray(table.offsets, np.int64)))
    steps = sum_a = sum_d = sum_adv = zero = drafts = 0.0
    hist = np.zeros(k + 1)
    per_pos = np.zeros(k)
    for rows, rem in replay_positions(table, k, requests):
        w = row_w[rows]
        a = table.accepted[rows, k - 1].astype(np.int64)
        d = table.drafted[rows, k - 1].astype(np.int64)
        steps += float(w.sum())
        sum_a += float(w @ a)
        sum_d += float(w @ d)
        sum_adv += float(w @ np.minimum(a + 1, rem))
        zero += float(w[d == 0].sum())
        drafts += float(w[d > 0].sum())
        h = np.bincount(a, weights=w, minlength=k + 1)[:k + 1]
        hist += h
        per_pos += h[::-1].cumsum()[::-1][1:]
    out = _result(k, steps, sum_a, sum_d, sum_adv, zero, drafts, hist, per_pos,
                  _fills_k_slots(table))
    for key in ("steps", "num_drafts", "decode_tokens"):
        out[key] = int(round(out[key]))
    out["accept_hist"] = [int(round(x)) for x in hist]
    return out


def _result(k: int, steps, sum_a, sum_d, sum_adv, zero, drafts, hist, per_pos,
            fills_k: bool = False) -> dict:
    safe = max(steps, 1)
    verified = sum_d
    if fills_k:                     # every step verified K slots (fillers included)
        drafts, verified = steps, steps * k
    return {
        "k": k,
        "steps": steps,
        "mean_accepted": sum_a / safe,
        "tokens_per_step": sum_adv / safe,
        "mean_draft": sum_d / safe,
        "zero_draft_frac": zero / safe,
        "accept_hist": [int(x) for x in hist],
        "per_position_accept_rate": [float(x) / max(drafts, 1) for x in per_pos],
        "draft_acceptance_rate": sum_a / max(verified, 1),
        "num_drafts": drafts,
        "decode_tokens": sum_adv,
    }
