"""Request history: what the server already served before the predicted (or measured) requests.

vLLM's global suffix tree lives as long as the server process and keeps every response it produced
(FIFO eviction past max_cached_requests), so acceptance depends on what was served before. A
History names that assumption; every prediction states one.

- ``cold``: a fresh server; the global tree holds only what this run has produced so far.
- ``warm``: a steady stream of the same traffic: the whole corpus was replayed before (default).
- ``repeat:P``: a fresh server that first served a share P of this run's requests (the same
  prompts, identical greedy outputs); ``hot`` = ``repeat:1`` (the whole list served twice).
- ``repeat:P,diverge:M`` (or ``hot,diverge:M``): a repeated output equals the earlier one for its
  first M tokens only (batch-variant numerics can make greedy outputs drift between runs); an
  assumption, not a measurement: the earlier output's later tokens are unknown, so the tree holds
  its first M tokens only.
- ``,evicted`` with a repeat: the repeated prompts are no longer in the prefix cache (served long
  ago: the KV cache's LRU pool holds far fewer prompts than the suffix tree's 10,000 responses),
  so only the suffix tree remembers them. Without it, a repeat was served just before and its
  prompt blocks are still cached (as in the GPU harness's runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simkit.errors import InputError

CHOICES = ("cold", "warm", "hot", "repeat:P")     # what --history takes (plus modifiers)
REPEAT_SEED = 20261201          # which requests repeat: fixed, so the GPU harness and simkit agree


@dataclass(frozen=True)
class History:
    """One history assumption; `label` is its canonical text (printed in every header)."""

    kind: str                    # "cold", "warm" or "repeat"
    share: float = 0.0           # repeat: share P of requests served before
    diverge: int | None = None   # repeat: earlier output agrees for its first M tokens only
    evicted: bool = False        # repeat: the repeated prompts left the prefix cache

    @property
    def label(self) -> str:
        if self.kind != "repeat":
            return self.kind
        base = "hot" if self.share == 1.0 else f"repeat:{_num(self.share)}"
        if self.diverge is not None:
            base += f",diverge:{self.diverge}"
        return base + (",evicted" if self.evicted else "")

    @property
    def tree(self) -> "History":
        """What the suffix tree held before the run, which alone decides the acceptance table:
        evicted changes only the prefix cache, and a repeat of nobody is cold."""
        if self.kind == "repeat" and self.share == 0:
            return COLD
        return replace(self, evicted=False)

    @property
    def tree_label(self) -> str:
        """The label of `tree` (names a history table: hot and hot,evicted share one)."""
        return self.tree.label

    @property
    def prompts_cached(self) -> bool:
        """The repeated prompts are still in the prefix cache when the run starts."""
        return self.is_repeat and not self.evicted

    @property
    def is_repeat(self) -> bool:
        return self.kind == "repeat" and self.share > 0

    def describe(self) -> str:
        """One line for report headers."""
        if self.kind == "cold":
            return "cold: fresh server, the suffix tree holds only what this run produced"
        if self.kind == "warm":
            return "warm: the whole corpus was served before (steady stream of this traffic)"
        text = (f"{self.label}: fresh server that already served {self.share:.0%} of these "
                "requests once (same prompts, identical greedy outputs)")
        if self.diverge is not None:
            text += f"; assumed: repeated outputs agree for their first {self.diverge} tokens only"
        text += ("; their prompts have left the prefix cache (only the suffix tree remembers them)"
                 if self.evicted else "; their prompts are still in the prefix cache")
        return text

    def as_dict(self) -> dict:
        return {"history": self.label, "kind": self.kind, "repeat_share": self.share,
                "diverge_tokens": self.diverge, "prompts_cached": self.prompts_cached}


COLD = History("cold")
WARM = History("warm")          # the default: a steady stream of the same traffic


def _num(x: float) -> str:
    return f"{x:g}"


def parse_history(text: str | History | None) -> History:
    """'cold' | 'warm' | 'hot' | 'repeat:P' with optional ',diverge:M' and ',evicted' (None:
    warm, the default); InputError otherwise. Called where a history enters as text: the
    command line, a record's column, a profile's provenance file."""
    if isinstance(text, History):
        return text
    if text is None:
        return WARM
    raw = str(text).strip().lower()
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts:
        raise InputError("history is empty; use cold, warm, hot or repeat:P", field="history")
    head, rest = parts[0], parts[1:]
    diverge = None
    evicted = "evicted" in rest
    rest = [p for p in rest if p != "evicted"]
    for p in rest:
        if not p.startswith("diverge:"):
            raise InputError(f"unknown history modifier {p!r} in {text!r} (diverge:M, evicted)",
                             field="history")
        try:
            diverge = int(p.split(":", 1)[1])
        except ValueError:
            raise InputError(f"diverge needs an integer token count, got {p!r}",
                             field="history") from None
        if diverge < 0:
            raise InputError(f"diverge must be >= 0 tokens, got {diverge}", field="history")
    if head in ("cold", "warm"):
        if diverge is not None or evicted:
            raise InputError(f"diverge and evicted apply to repeats only (hot or repeat:P), got "
                             f"{text!r}", field="history")
        return History(head)
    if head == "hot":
        return History("repeat", 1.0, diverge, evicted)
    if head.startswith("repeat:"):
        try:
            share = float(head.split(":", 1)[1])
        except ValueError:
            raise InputError(f"repeat needs a share P in [0, 1], got {head!r}",
                             field="history") from None
        if not math.isfinite(share) or not 0.0 <= share <= 1.0:
            raise InputError(f"repeat share must be in [0, 1], got {share:g}", field="history")
        if share == 0.0:
            return History("cold") if diverge is None else History("repeat", 0.0, diverge,
                                                                   evicted)
        return History("repeat", share, diverge, evicted)
    raise InputError(f"unknown history {text!r}; use cold, warm, hot, repeat:P "
                     "(optionally ,diverge:M and ,evicted)", field="history")


def repeat_indices(n: int, share: float, seed: int = REPEAT_SEED) -> "np.ndarray":
    """Which of n requests were served before, in the order they were served: the first
    round(share * n) of a seeded permutation (the GPU harness serves them in this order)."""
    import numpy as np          # here, so that the command line can parse --history cheaply

    m = int(round(share * n))
    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.random.default_rng(seed).permutation(n)[:m].astype(np.int64)


def split_histories(text: str | None) -> list[History]:
    """A comma list of histories, each modifier (diverge:M, evicted) kept with the history
    before it: 'cold,hot,evicted,hot' -> the Histories cold, hot,evicted and hot."""
    if not text:
        return []
    out: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if (part.startswith("diverge:") or part == "evicted") and out:
            out[-1] = f"{out[-1]},{part}"
        else:
            out.append(part)
    return [parse_history(h) for h in out]
