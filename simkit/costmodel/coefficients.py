"""Coefficients of the step-time model with their analytic defaults, and where each comes from.

Device coefficients scale analytic terms (1.0 = the roofline with the efficiencies below) or are
seconds per event; host coefficients are seconds on the reference host CPU (the 16-core Xeon
of the H200 machine the calibration runs were measured on, host_speed 1.0). The analytic host values are order-of-magnitude priors, NOT
measurements: docs/costmodel.md says where each comes from. A calibration (fitted coefficients) replaces them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
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

    def to_dict(self) -> dict[str, float]:
        """Plain dict (calibration JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any], path: str | None = None) -> "Coefficients":
        """Validate and build; unknown or negative coefficients are errors naming the field.
        Missing ones keep their analytic default."""
        known = {f.name for f in fields(cls)}
        values = {}
        for key, value in doc.items():
            if key not in known:
                raise InputError(f"unknown coefficient; known: {', '.join(sorted(known))}",
                                 path=path, field=f"coefficients.{key}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise InputError(f"must be a non-negative number, got {value!r}", path=path,
                                 field=f"coefficients.{key}")
            values[key] = float(value)
        return cls(**values)


ANALYTIC = Coefficients()
# the drafters with host drafting terms, and their coefficients: per step that drafts, per
# drafting request, per accepted token; any other drafter costs no host drafting time
DRAFTER_COEFS: dict[str, tuple[str, str, str]] = {
    SUFFIX_DRAFTER: ("suffix_step_s", "suffix_req_s", "suffix_accept_s"),
    NGRAM_DRAFTER: ("ngram_step_s", "ngram_req_s", "ngram_accept_s"),
}

__all__ = ["Coefficients", "ANALYTIC", "DRAFTER_COEFS", "HBM_EFFICIENCY", "GEMM_EFFICIENCY", "ATTN_EFFICIENCY",
           "LINK_EFFICIENCY"]
