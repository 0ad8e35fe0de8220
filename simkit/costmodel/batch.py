"""What the engine tells the cost model about one step, and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from simkit.drafters.base import NO_DRAFTER


class GraphMode(str, Enum):
    """CUDA-graph runtime mode of one step, as vLLM's dispatcher resolves it."""

    FULL = "FULL"
    PIECEWISE = "PIECEWISE"
    NONE = "NONE"


@dataclass(frozen=True, slots=True)
class BatchDescriptor:
    """One engine step as scheduled: counts the cost model needs, nothing about token values."""

    num_reqs: int
    num_tokens: int                 # scheduled tokens (prefill chunks + decode + drafts)
    num_padded_tokens: int          # tokens the forward pass runs after graph padding (>= num_tokens)
    num_prefill_tokens: int         # tokens of prefill chunks in this step
    num_prefill_reqs: int
    num_decode_reqs: int
    num_spec_tokens: int            # draft tokens verified this step, placeholder (-1) pads included
    num_pad_drafts: int             # of those, placeholder pads
    num_drafting_reqs: int          # requests the CPU drafter proposes for after this step
    context_tokens: int             # sum over requests of KV tokens attended (context length)
    graph_mode: GraphMode
    async_scheduling: bool          # V2 runner with async scheduling (van(OFF)) vs V1 synchronous
    drafter: str = NO_DRAFTER       # NO_DRAFTER or a drafter's name (simkit.drafters.base)
    num_accepted_tokens: int = 0    # draft tokens this step accepts (the replay knows them when
                                    # it schedules); host work per emitted token grows with them


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds one step takes: device (forward, sampler) and host parts, and the step's wall time."""

    device_s: float
    host_s: float
    step_s: float                   # wall time of the step after any host/device overlap

    @property
    def host_frac(self) -> float:
        """Share of the step's wall time the device is idle waiting on the host."""
        return 0.0 if self.step_s <= 0 else max(0.0, self.step_s - self.device_s) / self.step_s


class StepCostModel(Protocol):
    """The small latency-model interface the engine calls once per step."""

    def step_cost(self, batch: BatchDescriptor) -> StepCost: ...
