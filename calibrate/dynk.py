"""Dynamic-K without a fork: a vLLM 0.26 scheduler that picks K per step with simkit's policies.

The engine is started with num_speculative_tokens = max(KS), so the suffix proposer drafts up to
Kmax tokens per request. After each step, `update_draft_token_ids` asks the policy (the same
classes simkit simulates: simkit.engine.policies.BatchSizeTable / FeedbackK / GoodputK) for K,
cuts every draft to K and pads it to exactly K with -1 (as K-pad does), and logs the choice;
`update_from_output` feeds the policy the (accepted, real drafted) pairs of the step just verified.

What differs from simkit's idealised dynamic-K, and is stated wherever these runs are shown:
- drafts at K are the Kmax draft cut to K (simkit asks the drafter at K; suffix drafts at different
  K agree on their common prefix in most positions, not all);
- vLLM 0.26 captures FULL decode graphs only for q = 1 + Kmax, so a step with K < Kmax runs the
  PIECEWISE graph (simkit's `graphs="kmax"` dynamic configs model exactly this).

The policy comes from the environment (set by calibrate.runner): SIMKIT_DYNK = JSON
{"policy": "table"|"feedback"|"goodput", "ks": [...], "table": [[n, k], ...] (table policy),
"price": {...} (goodput: the arguments of simkit.engine.pricing.price_fn_for)}.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Sequence

from calibrate.kpad import pad_drafts
from calibrate.model_output import sampled_by_request

ENV = "SIMKIT_DYNK"


def step_pairs(scheduled_spec: dict[str, list[int]], sampled: dict[str, Sequence[int]]
               ) -> tuple[list[tuple[int, int]], int]:
    """(accepted, real drafted) per drafted request of one verified step, and the step's K.

    scheduled_spec: request -> the spec token ids scheduled (real drafts then -1 placeholders);
    sampled: request -> the tokens the step emitted for it (1 + accepted).
    """
    pairs, k = [], 0
    for rid, spec in scheduled_spec.items():
        if not spec or rid not in sampled:
            continue
        real = sum(1 for t in spec if t >= 0)
        k = max(k, len(spec))
        got = len(sampled[rid])
        if got == 0:
            continue
        pairs.append((min(max(got - 1, 0), real), real))
    return pairs, k


class TablePolicy:
    """A precomputed (batch-size bucket -> K) table, simkit's BatchSizeTable once tuned."""

    needs_observation = False

    def __init__(self, table: Sequence[Sequence[int]]) -> None:
        self.table = [(int(n), int(k)) for n, k in table]
        if not self.table:
            raise ValueError("table policy needs a non-empty table")

    def observe(self, pairs, k) -> None:  # noqa: D102 - nothing to learn
        return None

    def choose(self, drafts_at, n_decode, context, n_scheduled) -> int:  # noqa: D102
        for n, k in self.table:
            if n_scheduled <= n:
                return k
        return self.table[-1][1]


def make_policy(spec: dict[str, Any]):
    """The K policy a SIMKIT_DYNK document describes."""
    from simkit.engine.policies import FeedbackK, GoodputK

    name = spec.get("policy")
    ks = [int(k) for k in spec.get("ks", (4, 6, 12))]
    if name == "table":
        return TablePolicy(spec["table"])
    if name == "feedback":
        return FeedbackK(ks)
    if name == "goodput":
        from simkit.engine.pricing import price_fn_for

        return GoodputK(ks, price_fn_for(**spec["price"]))
    raise ValueError(f"unknown dynamic-K policy {name!r} (table, feedback, goodput)")


def choose_and_pad(policy, drafts: list[list[int]], n_scheduled: int, context: int
                   ) -> tuple[int, list[list[int]]]:
    """K for the next step and every draft cut/padded to exactly K."""
    k = policy.choose(lambda kk: [min(len(d), kk) for d in drafts], len(drafts), context,
                      n_scheduled)
    return k, pad_drafts(drafts, k)


_CLS = None


def dynamic_k_scheduler_cls():
    """vLLM's Scheduler with per-step K from a simkit policy (built lazily: imports vLLM)."""
    global _CLS
    if _CLS is not None:
        return _CLS
    from dataclasses import replace

    from vllm.v1.core.sched.scheduler import Scheduler

    class DynamicKScheduler(Scheduler):
        """Chooses K after each step; drafts are cut and padded to it."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.k_policy = make_policy(json.loads(os.environ[ENV]))
            self.k_counts: Counter = Counter()
            self._last_scheduled = 0

        def schedule(self, *args, **kwargs):  # noqa: D102
            out = super().schedule(*args, **kwargs)
            if out.num_scheduled_tokens:
                self._last_scheduled = len(out.num_scheduled_tokens)
            return out

        def update_from_output(self, scheduler_output, model_runner_output, *args, **kwargs):  # noqa: D102,E501
            sampled = sampled_by_request(model_runner_output)
            pairs, k = step_pairs(scheduler_output.scheduled_spec_decode_tokens or {}, sampled)
            if pairs:
                self.k_policy.observe(pairs, k)
            return super().update_from_output(scheduler_output, model_runner_output, *args,
                                              **kwargs)

        def update_draft_token_ids(self, draft_token_ids) -> None:  # noqa: D102
            drafts = [list(d) for d in draft_token_ids.draft_token_ids]
            context = 0
            for rid in draft_token_ids.req_ids:
                req = self.requests.get(rid)
                if req is not None:
                    context += int(req.num_computed_tokens)
            k, padded = choose_and_pad(self.k_policy, drafts, self._last_scheduled, context)
            self.k_counts[k] += 1
            super().update_draft_token_ids(replace(draft_token_ids, draft_token_ids=padded))

    _CLS = DynamicKScheduler
    return _CLS


def __getattr__(name: str):
    # `scheduler_cls="calibrate.dynk.DynamicKScheduler"` resolves through this on the GPU host.
    if name == "DynamicKScheduler":
        return dynamic_k_scheduler_cls()
    raise AttributeError(name)
