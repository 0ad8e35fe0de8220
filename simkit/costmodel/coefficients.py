"""Coefficients of the step-time model with their analytic defaults, and where each comes from.

Device coefficients scale analytic terms (1.0 = the roofline with the efficiencies below) or are
seconds per event; host coefficients are seconds on the reference host CPU (the 16-core Xeon
of the H200 machine the calibration runs were measured on, host_speed 1.0). The analytic host values are order-of-magnitude priors, NOT
measurements: docs/costmodel.md says where each comes from. A calibration (fitted coefficients) replaces them."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

from simkit.drafters.base import NGRAM_DRAFTER, SUFFIX_DRAFTER
from simkit.errors import InputError

# Efficiencies used to build the analytic device terms (achievable fraction of datasheet peaks).
HBM_EFFICIENCY = 0.80       # large streaming reads/GEMV on H100/H200 reach ~80-90 % of peak BW
GEMM_EFFICIENCY = 0.70      # large bf16/fp8 GEMMs reach ~70-80 % of dense peak
ATTN_EFFICIENCY = 0.50      # attention kernels (FA3/FlashInfer/MLA) reach less of the GEMM peak
LINK_EFFICIENCY = 0.70      # NVLink all-reduce bus bandwidth vs one direction of the link


@dataclass(frozen=True)
class Coefficients:
    """Every coefficient of the device and host terms; non-negative."""

    # ---- device: scales of analytic seconds (roofline max(bytes/BW, FLOPs/peak)) ----
    gemm_scale: float = 1.0            # dense GEMMs (attention projections, dense/shared MLP, lm_head)
    moe_scale: float = 1.0             # routed experts (distinct experts read, top-k FLOPs)
    attn_scale: float = 1.0            # attention: KV bytes read vs attention FLOPs
    comm_scale: float = 1.0            # TP all-reduce bandwidth term (ring)
    sampler_scale: float = 1.0         # logits read by the sampler kernels
    # ---- device: seconds per event ----
    allreduce_latency_s: float = 8e-6  # per all-reduce (2 per layer, custom all-reduce in a graph)
    rejection_device_s: float = 30e-6  # rejection-sampler kernels, per step with draft tokens
    launch_piecewise_s: float = 5e-6   # per launch outside the graph in PIECEWISE (attention, piece replays)
    launch_none_s: float = 5e-6        # per kernel launch in eager mode (NONE)
    device_fixed_s: float = 50e-6      # per step: input copies, embedding, final norm, graph launch
    kernel_gap_s: float = 0.0          # GPU idle per kernel boundary, every mode (layers x kernels/layer);
                                       # not in the datasheet prior (0), fitted from measured steps
    # ---- host (reference CPU seconds) ----
    sched_step_s: float = 100e-6       # scheduler.schedule, per step
    sched_req_s: float = 4e-6          # ... per scheduled request
    prep_step_s: float = 150e-6        # model-runner input preparation, per step
    prep_req_s: float = 4e-6           # ... per request (block tables, positions, metadata)
    prep_token_s: float = 0.1e-6       # ... per scheduled token
    sample_step_s: float = 100e-6      # sampler host side (incl. GPU->CPU copy), per step
    sample_req_s: float = 2e-6         # ... per request
    rejection_token_s: float = 0.5e-6  # rejection sampler host work per draft token verified
    suffix_step_s: float = 20e-6       # suffix proposer, per step that drafts
    suffix_req_s: float = 25e-6        # ... per drafting request (tree update + speculate)
    ngram_step_s: float = 20e-6        # n-gram proposer, per step that drafts
    ngram_req_s: float = 15e-6         # ... per drafting request
    update_step_s: float = 50e-6       # scheduler.update_from_output + output objects, per step
    update_req_s: float = 6e-6         # ... per request
    frontend_req_s: float = 20e-6      # front-end process: detokenize + stream, per request per step
    # ---- host, per accepted draft token (beyond the one token a request emits per step): the
    # drafter appends every emitted token to its tree, the scheduler and output processing handle
    # each; priors ~ a few microseconds, fitted from the high-acceptance calibration runs
    sched_accept_s: float = 1e-6       # scheduler.schedule/update bookkeeping per accepted token
    prep_accept_s: float = 1e-6        # input preparation per accepted token (token-id buffers)
    suffix_accept_s: float = 5e-6      # suffix proposer: tree update + longer match per accepted token
    ngram_accept_s: float = 1e-6       # n-gram proposer per accepted token
    update_accept_s: float = 1e-6      # update_from_output + output objects per accepted token
    frontend_accept_s: float = 1e-6    # front-end per accepted token (detokenize, stream)
    async_serial_s: float = 30e-6      # async scheduling: per-step host work that cannot overlap
    # ---- optional terms (None: absent, the step is priced without them; a calibration that
    # carries them turns them on, so calibrations fitted before they existed price every step
    # exactly as before) ----
    # host dispatch of a forward that is not one FULL graph replay: PIECEWISE runs attention
    # eagerly between captured pieces, NONE runs every kernel eagerly, and the CPU issues those
    # launches layer by layer; the forward cannot end before its last launch is issued, and under
    # async scheduling that issuing is host work the next step waits for
    prefill_token_s: float | None = None        # device seconds per prefill token beyond the
                                                # roofline terms (attention over the prompt the
                                                # mean-context approximation under-counts)
    dispatch_piecewise_s: float | None = None   # per decoder layer of a PIECEWISE forward
    dispatch_none_s: float | None = None        # per decoder layer of an eager (NONE) forward
    dispatch_token_s: float | None = None       # per decoder layer per scheduled token (both modes)
    frontend_prefill_s: float | None = None     # front-end per request that is prefilling
                                                # (admission of new requests, finished outputs)
    # host coefficients of the async-scheduling runner where they differ from the synchronous
    # runner's (vLLM 0.33: vanilla on Model Runner V2, speculative configs on the V1 runner):
    # sorted (name, value) pairs over ASYNC_RUNNER_COEFS; empty: one set for both runners
    async_runner: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (calibration JSON); absent optional terms are left out, the async
        runner's coefficients nest under 'async_runner'."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "async_runner":
                if value:
                    out[f.name] = dict(value)
            elif value is not None:
                out[f.name] = value
        return out

    def for_async_runner(self) -> "Coefficients":
        """The coefficients that price a step of the async-scheduling runner: these, with the
        runner's own host coefficients in place of the shared ones."""
        return self._async_runner_coefs

    @cached_property
    def _async_runner_coefs(self) -> "Coefficients":
        """for_async_runner's answer, built once per (immutable) instance: pricing recorded
        steps one by one asked for it once per asynchronous step (a third of a fit's time)."""
        if not self.async_runner:
            return self
        return replace(self, async_runner=(), **dict(self.async_runner))

    @classmethod
    def from_dict(cls, doc: dict[str, Any], path: str | None = None) -> "Coefficients":
        """Validate and build; unknown or negative coefficients are errors naming the field.
        Missing ones keep their analytic default (the optional terms: absent)."""
        known = {f.name for f in fields(cls)} - {"async_runner"}
        values: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "async_runner":
                values[key] = _async_runner(value, path)
                continue
            if key not in known:
                raise InputError(f"unknown coefficient; known: {', '.join(sorted(known))}",
                                 path=path, field=f"coefficients.{key}")
            values[key] = _number(value, path, f"coefficients.{key}")
        return cls(**values)


OPTIONAL_TERMS = ("prefill_token_s", "dispatch_piecewise_s", "dispatch_none_s", "dispatch_token_s",
                  "frontend_prefill_s")
# the host coefficients a runner may have its own values of (engine-core host work)
ASYNC_RUNNER_COEFS = ("sched_step_s", "sched_req_s", "sched_accept_s", "prep_step_s", "prep_req_s",
                      "prep_token_s", "prep_accept_s", "sample_step_s", "sample_req_s",
                      "rejection_token_s", "update_step_s", "update_req_s", "update_accept_s",
                      "dispatch_piecewise_s", "dispatch_none_s", "dispatch_token_s")


def _number(value: Any, path: str | None, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise InputError(f"must be a non-negative number, got {value!r}", path=path, field=field)
    return float(value)


def _async_runner(doc: Any, path: str | None) -> tuple[tuple[str, float], ...]:
    """The async runner's coefficients as sorted pairs; names outside ASYNC_RUNNER_COEFS and
    values that are not non-negative numbers are errors naming the field."""
    if not isinstance(doc, dict):
        raise InputError("expected an object of host coefficients", path=path,
                         field="coefficients.async_runner")
    out = []
    for key, value in sorted(doc.items()):
        where = f"coefficients.async_runner.{key}"
        if key not in ASYNC_RUNNER_COEFS:
            raise InputError(f"not a runner host coefficient; known: {', '.join(ASYNC_RUNNER_COEFS)}",
                             path=path, field=where)
        out.append((key, _number(value, path, where)))
    return tuple(out)


ANALYTIC = Coefficients()
# the drafters with host drafting terms, and their coefficients: per step that drafts, per
# drafting request, per accepted token; any other drafter costs no host drafting time
DRAFTER_COEFS: dict[str, tuple[str, str, str]] = {
    SUFFIX_DRAFTER: ("suffix_step_s", "suffix_req_s", "suffix_accept_s"),
    NGRAM_DRAFTER: ("ngram_step_s", "ngram_req_s", "ngram_accept_s"),
}

__all__ = ["Coefficients", "ANALYTIC", "ASYNC_RUNNER_COEFS", "DRAFTER_COEFS", "OPTIONAL_TERMS",
           "HBM_EFFICIENCY", "GEMM_EFFICIENCY", "ATTN_EFFICIENCY",
           "LINK_EFFICIENCY"]
