"""The passes one measured run makes on one engine, for a request history (GPU host, pure).

A run resets the prefix cache and the drafter's cross-request memory (arctic's suffix tree; on
vLLM 0.34 the GPU corpus, whose finished responses feed drafts two steps later under async
scheduling), then serves its passes back to back in the same engine: `cold` one recorded pass; `hot` the list twice, both recorded (the first pass is the cold
run, the second the hot one); `repeat:P` first the share P of the requests that
simkit.history.repeat_indices names (not recorded), then the recorded pass over the whole list.
Earlier passes use fresh request ids, as a real server gives every request a new id (arctic's
start_request would otherwise evict the earlier response kept under the same id).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from traces.calibration_requests import CalRequest
from simkit.history import History, parse_history, repeat_indices


@dataclass(frozen=True)
class Pass:
    """One closed-loop pass: its requests, whether it is recorded, and its run-id suffix."""

    requests: list
    record: bool
    suffix: str          # "" for the cold run id, e.g. "hot" or "rep0.5"
    history: str         # the history label of what this pass measures


def history_suffix(h: History) -> str:
    """Run-id suffix of a history ('' for cold)."""
    if h.kind == "cold":
        return ""
    if h.kind == "repeat":
        return "hot" if h.share == 1.0 else f"rep{h.share:g}"
    raise ValueError(f"history {h.label!r} cannot be run on the GPU (cold, hot, repeat:P)")


def _renamed(reqs: list[CalRequest], prefix: str) -> list[CalRequest]:
    return [replace(r, id=f"{prefix}{r.id}") for r in reqs]


def plan_passes(reqs: list[CalRequest], history: str | History) -> list[Pass]:
    """The passes of one run; raises ValueError for histories the harness cannot serve."""
    h = parse_history(history)
    if h.diverge is not None or h.evicted:
        raise ValueError("diverge and evicted are assumptions of the simulator; greedy repeats on "
                         "one engine reproduce outputs exactly and find their prompts cached")
    if h.kind == "cold":
        return [Pass(list(reqs), True, "", "cold")]
    if h.kind != "repeat":
        raise ValueError(f"history {h.label!r} cannot be run on the GPU (cold, hot, repeat:P)")
    if h.share == 1.0:
        return [Pass(list(reqs), True, "", "cold"),
                Pass(_renamed(reqs, "h"), True, "hot", "hot")]
    before = [reqs[i] for i in repeat_indices(len(reqs), h.share)]
    return [Pass(_renamed(before, "p"), False, "", "prelude"),
            Pass(list(reqs), True, history_suffix(h), h.label)]
