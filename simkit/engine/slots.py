"""Slot policies: how many tokens a decoding request verifies per step, and what may be accepted.

One policy per name in simkit.catalog.vllm_versions.SLOT_POLICIES, chosen by the version's parts
(VllmVersion.slots_for):

- "variable" (vLLM 0.26/0.33 suffix, n-gram): a request verifies its d(t, K) real drafts,
  0..K; acceptance is capped at them.
- "padded" (K-pad and simkit's dynamic-K policies on 0.26/0.33): the real drafts plus -1
  placeholders up to K; placeholders are always rejected, so acceptance is capped at the drafts.
- "exact-k" (vLLM 0.34 suffix): every decoding request verifies exactly K slots; slots without a
  draft hold the last sampled token and are verified like drafts, so acceptance (the drafter's
  table counts accepted slots, fillers included) is capped at the K slots, not at the drafts.
  A request within K+1 tokens of max_model_len gets its slots cut (vLLM's scheduler,
  scheduler.py:866-873) instead of the whole batch drafting nothing (V1's rule), and a step at
  K of a multi-K configuration verifies the first K slots of the K-max draft (vLLM drafts at
  the configured K and cuts, model_runner.py:2388-2389).

A padded decoding request is scheduled with K slots; adaptive verification (vLLM 0.34 `suffix-av`)
then cuts each decode entry to its admitted slots after scheduling (Scheduler._trim_slots,
simkit.engine.adaptive_run), as vLLM's worker does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlotPolicy:
    """What a decode request carries into a step, and how its acceptance is capped."""

    name: str
    pads_to_k: bool            # scheduled with K spec tokens whatever its real drafts
    fillers_verified: bool     # slots without a draft can be accepted (acceptance capped at slots)
    cut_per_request: bool      # near max_model_len: that request's slots are cut (else the
                               # whole batch drafts nothing, vLLM V1)
    kmax_drafts: bool          # a step at K < K-max verifies the first K slots of the K-max draft


SLOT_POLICIES: dict[str, SlotPolicy] = {p.name: p for p in (
    SlotPolicy("variable", pads_to_k=False, fillers_verified=False, cut_per_request=False,
               kmax_drafts=False),
    SlotPolicy("padded", pads_to_k=True, fillers_verified=False, cut_per_request=False,
               kmax_drafts=False),
    SlotPolicy("exact-k", pads_to_k=True, fillers_verified=True, cut_per_request=True,
               kmax_drafts=True),
)}


def get_slot_policy(name: str) -> SlotPolicy:
    """The slot policy of that name (ValueError naming the known ones otherwise)."""
    if name not in SLOT_POLICIES:
        raise ValueError(f"unknown slot policy {name!r} ({', '.join(SLOT_POLICIES)})")
    return SLOT_POLICIES[name]


__all__ = ["SLOT_POLICIES", "SlotPolicy", "get_slot_policy"]
