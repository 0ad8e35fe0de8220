"""The compiled engine loop: the runs simulate hands it, float for float the same.

`run(...)` runs a closed-loop or open-loop simulation on the numba kernel (kernel.py) and prices
its steps (pricing.py, loop.py); it returns None for every run it was not proven equal on, and simulate then runs
the SimPy loop over simkit.engine.scheduler, which stays the reference implementation
(tests/unit/test_fast_engine.py compares the two). What it takes is an explicit allow-list
(`refusal` says why a run falls back): the vLLM versions, engine settings and configuration
fields it was checked on, the four K policies (goodput only under the cost model it mirrors),
table-replayed drafts. A new version, setting or policy falls back until it is added here and to the test.
SIMKIT_ENGINE_LOOP=reference forces the reference loop (benchmarks, bisecting a difference).
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
                         "graphs"})


def enabled() -> bool:
    """False when SIMKIT_ENGINE_LOOP=reference asks for the SimPy loop everywhere."""
    return os.environ.get(ENV, "").strip().lower() != "reference"


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
    if spec.policy not in PROVEN_POLICIES:
        return f"K policy {spec.policy} prices steps"
    if sched.in_loop is not None:
        return "drafts made in the loop"
    return None


def run(workload, cost_model, cfg, spec, sched, **kw):
    """simulate's RunResult from the compiled loop, or None (run the reference)."""
    if refusal(cfg, spec, sched) is not None:
        return None
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    from simkit.engine.fast import loop as compiled

    return compiled.run(workload, cost_model, cfg, spec, sched, **kw)


def replica(workload, cost_model, cfg, spec, times):
    """simkit.fleet.sim.run_replica's run (every request of `workload` in order, request i
    arriving at times[i]) on the compiled loop: (RunResult, its Recorder), or None
    (run the fleet's own SimPy loop). It is simulate's open loop on that order, so it refuses
    what simulate's compiled loop refuses, and a stream it would reorder or skip."""
    from simkit.engine.prefix_cache import PrefixCache
    from simkit.engine.scheduler import Scheduler
    from simkit.engine.sim import RunResult, request_order

    times = [float(t) for t in times]
    n = workload.num_requests
    if len(times) != n or any(b < a for a, b in zip(times, times[1:])):
        return None
    order, skipped = request_order(workload, cfg, n, 0, shuffle=False)
    if order != list(range(n)):
        return None
    chains = workload.hash_chains() if cfg.prefix_caching else None
    pc = PrefixCache(cfg.num_blocks) if chains is not None else None
    sched = Scheduler(cfg, spec, workload, cost_model, pc)
    kept: list = []
    prefix = {"modelled": True, "preloaded_blocks": 0} if pc is not None else None
    res = run(workload, cost_model, cfg, spec, sched, order=order, skipped=skipped,
              concurrency=0, times=times, warm_count=None, marks=frozenset(), pc=pc,
              prefix=prefix, chains=chains, shared=None, exact=frozenset(), capture=False,
              seed=0, result_type=RunResult, recorder=kept)    # each request once: no copies
    return None if res is None else (res, kept[0])
