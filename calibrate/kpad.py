"""K-padding without a fork: every decode request's draft is padded to exactly K with -1.

vLLM's rejection sampler always rejects the placeholder -1 (greedy: -1 never equals the argmax),
and the embedding never sees it (input ids are clamped under spec decode), so outputs are
unchanged while every decode batch becomes uniform (1 + K tokens per request) and can replay a
FULL CUDA graph. The scheduler subclass is built lazily so this module imports without vLLM.
"""

from __future__ import annotations

PLACEHOLDER = -1


def pad_drafts(drafts: list[list[int]], k: int) -> list[list[int]]:
    """Each draft cut or padded to exactly k tokens with PLACEHOLDER (new lists)."""
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    return [list(d[:k]) + [PLACEHOLDER] * (k - min(len(d), k)) for d in drafts]


_CLS = None


def kpad_scheduler_cls():
    """vLLM's Scheduler with update_draft_token_ids padding each draft to num_spec_tokens."""
    global _CLS
    if _CLS is not None:
        return _CLS
    from dataclasses import replace

    from vllm.v1.core.sched.scheduler import Scheduler

    class KPadScheduler(Scheduler):
        """Pads drafts handed over after each step; prefill chunks are still ignored upstream."""

        def update_draft_token_ids(self, draft_token_ids) -> None:  # noqa: D102
            padded = pad_drafts(draft_token_ids.draft_token_ids, self.num_spec_tokens)
            super().update_draft_token_ids(replace(draft_token_ids, draft_token_ids=padded))

    _CLS = KPadScheduler
    return _CLS


def __getattr__(name: str):
    # `scheduler_cls="calibrate.kpad.KPadScheduler"` resolves through this on the GPU host.
    if name == "KPadScheduler":
        return kpad_scheduler_cls()
    raise AttributeError(name)
