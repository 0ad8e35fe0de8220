"""Compiled (numba) copies of adaptive verification's per-step work, one call each: fold a step's
verdicts into the counters, refresh the confidence table, and gather + budget + allocate a batch.

The same numbers as the NumPy rules they copy (simkit.engine.adaptive: choose_budget, allocate,
AcceptanceCounters), float32 where vLLM computes in float32; tests/unit/test_adaptive_engine.py
holds them equal. The NumPy path (simkit.engine.adaptive_run) stays as the reference; numba
caches the machine code beside this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def fold(counts, pending):
    """Add each verdict (counter row, valid slots, accepted, verified) of `pending` (n, 4):
    positions up to the first rejection within the verified and valid slots are observed, those
    before it accepted. Rows < 0 (a draft without valid slots) are skipped."""
    k = counts.shape[1]
    for i in range(pending.shape[0]):
        row, valid, acc, ver = pending[i, 0], pending[i, 1], pending[i, 2], pending[i, 3]
        if row < 0:
            continue
        for p in range(k):
            if p <= acc and p < ver and p < valid:
                counts[row, p, 1] += 1
                if p < acc:
                    counts[row, p, 0] += 1


@njit(cache=True)
def confidence_table(counts, out):
    """out[r, p] = (accepted + 1) / (observed + 2) in float32."""
    one, two = np.float32(1.0), np.float32(2.0)
    for r in range(counts.shape[0]):
        for p in range(counts.shape[1]):
            out[r, p] = (np.float32(counts[r, p, 0]) + one) / (np.float32(counts[r, p, 1]) + two)


@njit(cache=True)
def admit(tables, which, caps, num_sampling, non_draft, verify_ms, out):
    """Admitted slots per request into `out`; returns the budget. tables: (m, rows, K) float32
    confidence tables; which: (n, 6) = current (table, row, valid), stale (table, row, valid);
    caps: slots scheduled per request; verify_ms: verify cost per token count."""
    n = which.shape[0]
    k = tables.shape[2]
    # the host's budget from the stale confidences (float64 survival, sorted scores)
    scores = np.empty(n * k, np.float64)
    m = 0
    for i in range(n):
        t, r, valid = which[i, 3], which[i, 4], which[i, 5]
        s = 1.0
        for p in range(min(caps[i], k)):
            c = tables[t, r, p] if p < valid else np.float32(0.0)
            s = s * np.float64(c)
            scores[m] = s
            m += 1
    ranked = np.sort(scores[:m])[::-1]
    top = verify_ms.size - 1
    base = np.float64(num_sampling)
    best_b = 0
    best = base / verify_ms[min(non_draft, top)]
    cum = 0.0                           # as NumPy: the scores' running sum, then + base
    for b in range(1, m + 1):
        cum = cum + ranked[b - 1]
        ratio = (base + cum) / verify_ms[min(non_draft + b, top)]
        if ratio > best:
            best = ratio
            best_b = b
    # the GPU's allocation with the current confidences (float32 survival, ties in order)
    total = 0
    for i in range(n):
        total += caps[i]
    if best_b >= total:
        for i in range(n):
            out[i] = caps[i]
        return best_b
    if best_b <= 0:
        for i in range(n):
            out[i] = 0
        return best_b
    surv = np.empty((n, k), np.float32)
    flat = np.empty(total, np.float32)
    m = 0
    for i in range(n):
        t, r, valid = which[i, 0], which[i, 1], which[i, 2]
        s = np.float32(1.0)
        for p in range(caps[i]):
            c = tables[t, r, p] if p < valid else np.float32(0.0)
            s = np.float32(s * c)
            surv[i, p] = s
            flat[m] = s
            m += 1
    threshold = np.sort(flat)[::-1][best_b - 1]
    left = best_b
    for i in range(n):
        above = 0
        for p in range(caps[i]):
            if surv[i, p] > threshold:
                above += 1
        out[i] = above
        left -= above
    for i in range(n):
        tied = 0
        for p in range(caps[i]):
            if surv[i, p] == threshold:
                tied += 1
        take = min(tied, max(left, 0))
        out[i] += take
        left -= take
    return best_b
