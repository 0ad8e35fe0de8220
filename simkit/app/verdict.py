"""Which rows of a ladder are the best fixed K and the best dynamic-K policy, and the one rule
that says whether dynamic K beats, ties or loses against the best fixed K.

Tie rule: the gap between the best dynamic row and the best K-pad row is a tie when it is within
max(either row's seed spread (std of tok/s over seeds), DRIFT x the K-pad row's tok/s). DRIFT
(1 %) stands for the few % two runs of one setting drifted apart in the reference study, so a
difference smaller than that is not called a win even with one seed (std 0). Every verdict
(the report's recommendation, the reference reproduction and best-K pattern, Prediction's
dynamic line) uses this rule.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:                    # type hints only
    from simkit.engine.summary import Row

DRIFT = 0.01


class Verdict(StrEnum):
    """Dynamic K against the best fixed K (the value is the word printed)."""

    BEATS = "beats"
    TIES = "ties"
    LOSES = "loses"


def is_kpad(config: str) -> bool:
    """A fixed-K row of the suffix drafter padded to K (kpad-4, kpad-12; not ngram-kpad)."""
    return config.startswith("kpad-")


def is_dynamic(config: str) -> bool:
    """A dynamic-K policy row (dynamic-table, dynamic-goodput-4.8, ...)."""
    return config.startswith("dynamic")


def fastest(rows: Sequence[Row]) -> Row | None:
    """The row with the highest tok/s (the first of equals), None when there is none."""
    return max(rows, key=lambda r: r.output_tok_s) if rows else None


def is_exact_k(config: str) -> bool:
    """A fixed-K suffix row on a vLLM that verifies exactly K slots (0.34: suffix, suffix-8);
    not an adaptive-verification row, whose slots vary per step."""
    return (config == "suffix" or config.startswith("suffix-")) and not is_adaptive(config)


def is_adaptive(config: str) -> bool:
    """A suffix row with vLLM 0.34's adaptive verification (suffix-av, suffix-av-4)."""
    return config == "suffix-av" or config.startswith("suffix-av-")


def adaptive_verdict(rows: Sequence[Row], version: str) -> str:
    """Whether to turn adaptive verification on: each suffix-av row against the suffix row of
    the same K under the tie rule above, with the change in tok/s; '' without such a pair."""
    out = []
    for av in (r for r in rows if is_adaptive(r.config)):
        base = next((r for r in rows if is_exact_k(r.config) and r.k == av.k), None)
        if base is None or base.output_tok_s <= 0:
            continue
        gap = av.output_tok_s - base.output_tok_s
        tol = max(av.output_tok_s_std, base.output_tok_s_std, DRIFT * base.output_tok_s)
        call = ("turn it on (enable_adaptive_verification: true)" if gap > tol else
                "leave it off" if gap < -tol else
                "no difference within the seed spread or 1 %: either setting")
        slots = ("" if av.mean_admitted_slots is None else
                 f", verifying {av.mean_admitted_slots:.1f} of {av.k} slots per request-step "
                 f"({av.budget_share_of_k:.0%} of K)")
        change = av.output_tok_s / base.output_tok_s - 1
        out.append(f"adaptive verification at K={av.k}: {change:+.1%} tok/s against {base.config}"
                   f" ({av.output_tok_s:,.0f} vs "
                   f"{base.output_tok_s:,.0f}){slots}: {call}; its error against real vLLM "
                   f"{version} runs with it on is not yet measured (no such runs exist)")
    return "; ".join(out)


def best_kpad(rows: Sequence[Row], exact_k: bool = False) -> Row | None:
    """The fastest K-pad row: its K is the ladder's best fixed K (`exact_k`: the suffix rows,
    which verify exactly K slots on vLLM 0.34)."""
    return fastest([r for r in rows if (is_exact_k(r.config) if exact_k else is_kpad(r.config))])


def best_dynamic(rows: Sequence[Row]) -> Row | None:
    """The fastest dynamic-K row."""
    return fastest([r for r in rows if is_dynamic(r.config)])


def dynamic_verdict(dyn: Row | None, kp: Row | None) -> Verdict | None:
    """The best dynamic-K row against the best K-pad row under the tie rule above; None when
    either is missing or the K-pad row has no throughput."""
    if dyn is None or kp is None or kp.output_tok_s <= 0:
        return None
    gap = dyn.output_tok_s - kp.output_tok_s
    tol = max(dyn.output_tok_s_std, kp.output_tok_s_std, DRIFT * kp.output_tok_s)
    return Verdict.TIES if abs(gap) <= tol else (Verdict.BEATS if gap > 0 else Verdict.LOSES)


__all__ = ["DRIFT", "Verdict", "adaptive_verdict", "best_dynamic", "best_kpad", "dynamic_verdict",
           "fastest", "is_adaptive", "is_dynamic", "is_exact_k", "is_kpad"]
