"""Per-request sampled tokens of one ModelRunnerOutput, whichever vLLM made it.

vLLM 0.26/0.33 outputs carry `req_id_to_index`; 0.34 dropped it and lists `req_ids` in the order
of `sampled_token_ids`. Reading a missing `req_id_to_index` as empty silently counted 0 accepted
tokens, so an output with neither is an error here, never an empty step.
"""

from __future__ import annotations

from typing import Any, Sequence


def sampled_by_request(out: Any) -> dict[str, Sequence[int]]:
    """request id -> the tokens this step emitted for it (1 + accepted drafts; [] when none)."""
    sampled = getattr(out, "sampled_token_ids", None)
    if sampled is None:
        return {}
    index = getattr(out, "req_id_to_index", None)
    if index is None:
        ids = getattr(out, "req_ids", None)
        if ids is None:
            raise AttributeError(f"{type(out).__name__} has neither req_id_to_index nor req_ids: "
                                 "cannot tell which request sampled which tokens")
        index = {rid: i for i, rid in enumerate(ids)}
    return {rid: sampled[i] for rid, i in index.items() if i < len(sampled)}


def accepted_tokens(scheduled_spec: dict[str, list[int]], out: Any) -> int:
    """Accepted draft tokens of one step: sampled tokens beyond the first, per request that had
    draft slots scheduled."""
    by_req = sampled_by_request(out)
    acc = 0
    for rid, ids in scheduled_spec.items():
        got = by_req.get(rid)
        if ids and got is not None:
            acc += max(len(got) - 1, 0)
    return acc


__all__ = ["accepted_tokens", "sampled_by_request"]
