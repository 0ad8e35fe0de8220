"""Greedy-verification replay: draft, accept the longest prefix equal to the real output, add the bonus.

Under greedy verification the target model's token at every position is the recorded output token, so
a step at position t with draft D accepts a = common prefix of D and output[t:], then emits the real
token output[t+a] (bonus when a == len(D), recovered token otherwise). `replay_direct` drives a drafter
exactly as vLLM does step by step; `replay_table` walks a precomputed AcceptanceTable for one K.
Both rebuild the output from what they emitted and raise if it differs from the recorded output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable


class ReplayMismatch(AssertionError):
    """The output rebuilt by a replay differs from the recorded output (a drafter or replay bug)."""


@dataclass
class StepLog:
    """One decode step: position t (output tokens known before it), draft length d, accepted a."""

    t: int
    d: int
    a: int


def _accept(draft: Sequence[int], output: np.ndarray, t: int) -> int:
    a = 0
    n = len(output)
    for tok in draft:
        if t + a >= n or int(output[t + a]) != int(tok):
            break
        a += 1
    return a


def verify_rebuilt(rebuilt: list[int], output: np.ndarray, what: str) -> None:
    """Raise ReplayMismatch unless the rebuilt token list equals the recorded output."""
    if len(rebuilt) != len(output) or any(int(x) != int(y) for x, y in zip(rebuilt, output)):
        raise ReplayMismatch(f"{what}: replayed output differs from the recorded output "
                             f"({len(rebuilt)} vs {len(output)} tokens)")


def replay_direct(propose: Callable[[int], list[int]], advance: Callable[[list[int]], None],
                  output: np.ndarray, what: str = "request") -> list[StepLog]:
    """Replay one request: `propose(t)` returns the draft when t output tokens are known,
    `advance(tokens)` feeds the tokens emitted by a step back to the drafter.

    The first output token comes from the prefill step (already fed by the caller).
    """
    n = len(output)
    rebuilt = [int(output[0])] if n else []
    steps: list[StepLog] = []
    t = 1
    while t < n:
        draft = [int(x) for x in propose(t)]
        a = _accept(draft, output, t)
        emitted = draft[:a]
        if t + a < n:
            emitted.append(int(output[t + a]))     # the target's own token after the accepted ones
        rebuilt.extend(emitted)
        steps.append(StepLog(t, len(draft), a))
        t += len(emitted)
        advance(emitted)
    verify_rebuilt(rebuilt, output, what)
    return steps


def replay_table(table: AcceptanceTable, request: int, k: int) -> list[StepLog]:
    """Replay request `request` with static K from the table (a step at t advances min(a+1, n-t)).

    Raises ReplayMismatch if a row breaks a <= d <= K or accepts past the end of the output.
    """
    n = int(table.output_len[request])
    base = int(table.offsets[request])
    acc = table.accepted[:, k - 1]
    dr = table.drafted[:, k - 1]
    steps: list[StepLog] = []
    t = 1
    while t < n:
        a = int(acc[base + t])
        d = int(dr[base + t])
        if a > d or d > k or t + a > n:
            raise ReplayMismatch(f"request {request} t={t} K={k}: a={a} d={d} n={n} "
                                 "violates a <= d <= K, t + a <= n")
        steps.append(StepLog(t, d, a))
        t += min(a + 1, n - t)
    return steps
