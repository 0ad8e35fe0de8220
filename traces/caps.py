"""Generation caps of the trace sources: the token limit each producer's run stopped outputs at.

The study served with max_tokens 8,192; our traces were generated under smaller caps (2,000-4,096
tokens, a 1,000-token cap for the truncated R1-distill traces, a 15,000-token context for one
KORGym run). A request whose output reached its cap did not end on its own: its real length is
unknown (at least the cap). `OutputCap` records each cap with where it comes from; `is_capped`
decides per request. Every source declares its caps with these (traces/sources); looking a
request's cap up in that registry is traces.request_caps.

Tolerance (CAP_TOLERANCE): outputs are re-tokenized from their text, and re-tokenizing generated
text rarely gives the generated token count back exactly (the model may emit non-canonical
splits; a text boundary may merge or split a token). On the same tokenizer, outputs that stop at
the cap measured cap-6..cap+2 tokens (Llama-3.1-8B WMT24 at 4,096), cap-2..cap (Qwen2.5-7B MATH
at 4,096), and cap-43..cap+1 with most in cap-8..cap (Qwen2.5-7B WMT24 at 2,048); outputs
that end on their own are sparse that close to a cap of 2,000 or more. A request counts as
capped when its length is at least cap minus 1 % of the cap (41 tokens at 4,096, 20 at 2,048,
10 at 1,000, 150 at a 15,000-token context). Outputs of another tokenizer family are counted the
same way on the simulated model's tokens, so their count is approximate (stated in the notes).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

SM = "traces-src/SOURCES.md"  # where every stated cap is documented
CAP_TOLERANCE = 0.01  # share of the cap below it that still counts as "hit the cap"


@dataclass(frozen=True)
class OutputCap:
    """A producer run's generation limit.

    tokens: the limit; scope "output" (max_tokens / max_new_tokens: the output alone) or
    "context" (max_model_len: prompt + output); basis "stated" (the source says so), "observed"
    (the data shows it: many outputs stop at exactly that length) or "stated, contradicted"
    (the data shows another value, used instead); provenance: where the figure comes from.
    """

    tokens: int
    scope: str
    basis: str
    provenance: str

    def as_dict(self) -> dict:
        return asdict(self)


def threshold(cap: OutputCap) -> int:
    """The smallest length (output, or prompt + output for a context cap) counted as capped."""
    return cap.tokens - math.ceil(CAP_TOLERANCE * cap.tokens)


def is_capped(prompt_len: int, output_len: int, cap: OutputCap | None) -> bool:
    """True when a request's output stopped at (or within the tolerance of) its source's cap."""
    if cap is None:
        return False
    used = output_len + (prompt_len if cap.scope == "context" else 0)
    return used >= threshold(cap)


def out(tokens: int, basis: str, provenance: str) -> OutputCap:
    """An output-length cap (max_tokens / max_new_tokens)."""
    return OutputCap(tokens, "output", basis, provenance)


def context(tokens: int, basis: str, provenance: str) -> OutputCap:
    """A context-length cap (max_model_len: prompt + output)."""
    return OutputCap(tokens, "context", basis, provenance)
