"""The compiled engine loop: the runs simulate hands it, float for float the same.

`run(...)` runs a closed-loop or open-loop simulation on the numba kernel (kernel.py) and prices
its steps (pricing.py, loop.py); it returns None for every run it was not proven equal on, and simulate then runs
the SimPy loop over simkit.engine.scheduler, which stays the reference implementation
(tests/unit/test_fast_engine.py compares the two). What it takes is an explicit allow-list
(`refusal` says why a run falls back): the vLLM versions, engine settings and configuration
fields it was checked on, the four K policies (goodput only under the cost model it mirrors),
table-replayed drafts. A new version, setting or policy falls back until it is added here and to the test.
SIMKIT_ENGINE_LOOP=reference forces the reference loop (benchmarks, bisecting a difference).
`run_joint(...)`: the fleet's load-aware joint run (simkit.fleet.sim.run_joint) on the same
kernel (joint.py), under the same allow-list (tests/unit/test_fast_joint.py).
"""

from __future__ import annotations

import dataclasses
import os

from simkit.engine.policies import KPolicyName

ENV = "SIMKIT_ENGINE_LOOP"
PROVEN_VERSIONS = frozenset({"0.26", "0.33"})
PROVEN_POLICIES = (None, KPolicyName.TABLE, KPolicyName.FEEDBACK, KPolicyName.GOODPUT)
# the fields the kernel reads or was checked against; a new one falls back until proven
ENGINE_FIELDS = frozenset({"max_num_seqs", "max_num_batched_tokens", "max_model_len",
                           "max_tokens", "block_size", "kv_capacity_tokens", "cudagraph_mode",
                           "prefix_caching", "vllm_version"})
SPEC_FIELDS = frozenset({"name", "drafter", "k", "pad", "ks", "policy", "policy_params",
                         "graphs", "k_table", "adaptive"})


def enabled() -> bool:
    """False when SIMKIT_ENGINE_LOOP=reference asks for the SimPy loop everywhere."""
    return os.environ.get(ENV, "").strip().lower() != "reference"


def may_take(vllm_version: str | None) -> bool:
    """Whether any run of this vLLM version (None: simkit's default) can take the compiled loop:
    a command whose runs cannot (0.34) has no kernels to compile in the background."""
    from simkit.catalog.vllm_versions import get_vllm_version

    return enabled() and get_vllm_version(vllm_version).key in PROVEN_VERSIONS


def refusal(cfg, spec, sched) -> str | None:
    """Why this run cannot take the compiled loop (None: it can)."""
    if not enabled():
        return f"{ENV}=reference"
    if cfg.vllm_version not in PROVEN_VERSIONS:
        return f"vLLM {cfg.vllm_version} rules not checked against the reference loop"
    if {f.name for f in dataclasses.fields(cfg)} != ENGINE_FIELDS:
        return "engine settings the compiled loop does not know"
    if {f.name for f in dataclasses.fields(spec)} != SPEC_FIELDS:
        return "configuration fields the compiled loop does not know"
    if spec.k_table or spec.adaptive:                # vLLM 0.34's batch-size table, adaptive
        return "a batch-size K table or adaptive verification (vLLM 0.34 rules)"
    if spec.policy not in PROVEN_POLICIES:
        return f"K policy {spec.policy} prices steps"
    if sched.in_loop is not None:
        return "drafts made in the loop"
    if sched.async_scheduling != (not spec.speculative) or sched.drafts_on_host != spec.speculative:
        # the kernel runs speculative configs synchronously with host drafting (the V1 runner);
        # a version whose parts run this method on Model Runner V2 (0.33's n-gram) falls back
        return "this method runs on Model Runner V2 with async scheduling in this version"
    if sched.slots.name not in ("variable", "padded"):
        return f"slot policy {sched.slots.name}"
    return None


def run(workload, cost_model, cfg, spec, sched, **kw):
    """simulate's RunResult from the compiled loop, or None (run the reference)."""
    if refusal(cfg, spec, sched) is not None:
        return None
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    from simkit.engine.fast.background import wait_once

    wait_once()                      # a background compile (background.py) caches the kernels
    from simkit.engine.fast import loop as compiled

    return compiled.run(workload, cost_model, cfg, spec, sched, **kw)


def run_joint(workload, cost_model, cfg, spec, sched, times, replicas, **kw):
    """simkit.fleet.sim.run_joint's run on the compiled loop (joint.run), or None (run the
    reference), under the same allow-list as `run`."""
    if refusal(cfg, spec, sched) is not None:
        return None
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    from simkit.engine.fast.background import wait_once

    wait_once()
    from simkit.engine.fast import joint

    return joint.run(workload, cost_model, cfg, spec, sched, times, replicas, **kw)

