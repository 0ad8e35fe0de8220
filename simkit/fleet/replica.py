"""One replica's history, built from its own request stream.

Each vLLM replica keeps its own global suffix tree (FIFO of max_cached_requests responses) and its
own prefix cache. So a replica's acceptance table is the suffix drafter's replay of exactly the
requests the router gave it, in arrival order, from an empty tree (simkit.acceptance.cache.
cached_table: the real drafter, cached on disk by the stream's tokens, so re-planning the same
traffic drafts nothing twice); its prefix cache fills from its own earlier prompts as the engine
serves them (Workload.block_hashes: a repeated prompt hits if its blocks are still cached).

Table ordering: "sequential" by default (each response complete in the tree before the next
request drafts: exact when a repeat arrives after its earlier copy finished; it overstates what
the tree holds when the two overlap, see docs/fleet.md "Validation"), or "concurrent" at a stated
in-flight count. "in-loop" builds no table: each replica's engine drafts on its own simulated
steps (simkit.drafters.suffix.in_loop), as vLLM does, which the fleet validation matches within
2 % where the tables do not. Pure Python: a 240-request, 4-replica plan of 3 policies took 23 s
against 3 s on cached sequential tables (80 s when those are built first).

`ReplicaJob` / `run_group`: the self-contained unit a load-independent fleet is split into (a
replica's requests, arrival times, configurations, cost model and engine limits); run_group runs
a list of them in this process, and is what a Ray task runs (simkit.executors.ray_fleet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simkit.choices import FleetOrdering, member
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.engine.workload import Workload

KMAX = 16               # table columns (columns above 12 equal under the default tree depth)
IN_LOOP = FleetOrdering.IN_LOOP


def check_ordering(ordering: str) -> FleetOrdering:
    """`ordering` as a FleetOrdering, else an InputError naming the option and the choices."""
    return member(FleetOrdering, ordering, "ordering", "ordering")


def stream_workload(requests: Sequence, *, speculative: bool, name: str = "",
                    ordering: FleetOrdering = FleetOrdering.SEQUENTIAL, concurrency: int = 8, model: str = "",
                    corpus: str = "", chains: Sequence[np.ndarray] | None = None) -> Workload:
    """Workload of `requests` in this order: lengths, block hashes and (speculative) the suffix
    table replayed over them in this order from an empty tree."""
    from simkit.acceptance.cache import cached_table
    from simkit.block_hash import pack, prompt_block_hashes

    plen = np.array([len(r.prompt_ids) for r in requests], np.int32)
    olen = np.array([len(r.output_ids) for r in requests], np.int32)
    tables = {}
    if chains is None:
        chains = [prompt_block_hashes(r.prompt_ids) for r in requests]
    if ordering == IN_LOOP:
        wl = Workload(plen, olen, tables, name=name, block_hashes=pack(chains))
        if speculative and len(requests):
            wl.in_loop[SUFFIX_DRAFTER] = in_loop_drafter(list(requests))
        return wl
    if speculative and len(requests):
        tables[SUFFIX_DRAFTER] = cached_table(list(requests), drafter=SUFFIX_DRAFTER, kmax=KMAX,
                                              ordering=ordering, concurrency=concurrency,
                                              model=model, corpus=corpus)
    return Workload(plen, olen, tables, name=name, block_hashes=pack(chains))


def in_loop_drafter(requests: list):
    """A factory of fresh in-loop suffix drafters (vLLM's defaults) over `requests`: each engine
    built on the workload gets its own tree."""
    from functools import partial

    from simkit.drafters.suffix.in_loop import in_loop_suffix

    return partial(in_loop_suffix, requests, KMAX)


def tree_history(draws: Sequence[int], max_cached: int = 10000) -> dict[str, Any]:
    """What one replica's suffix tree held when each of its requests arrived: the share whose
    request (same prompt, same output) it had served before and whose response was still among
    the tree's last `max_cached` responses (FIFO), and how many responses the tree evicted."""
    last: dict[int, int] = {}
    hits = 0
    for pos, d in enumerate(int(x) for x in draws):
        if d in last and pos - last[d] <= max_cached:
            hits += 1
        last[d] = pos
    n = len(draws)
    return {"requests": n, "effective_repeat_share": hits / n if n else 0.0,
            "tree_evictions": max(0, n - max_cached)}


@dataclass
class ReplicaJob:
    """One replica of a load-independent fleet: everything its runs need, and nothing shared."""

    replica: int
    requests: list                 # objects with prompt_ids / output_ids, in arrival order
    draws: list[int]               # pool index of each (for the tree history)
    times: list[float]
    specs: list                    # SpecConfig per configuration
    cost: Any
    engine: Any                    # EngineConfig
    ordering: FleetOrdering = FleetOrdering.SEQUENTIAL
    concurrency: int = 8
    name: str = ""
    chains: list | None = field(default=None, repr=False)


def run_group(jobs: Sequence[ReplicaJob]) -> list[dict[str, Any]]:
    """Run each job's configurations, one after another in this process: per job, the tree
    history, per configuration a simkit.fleet.sim.ReplicaRun (None for an idle replica), and
    the CPU seconds spent drafting and simulating (for the benchmark; never in a report)."""
    import time

    from simkit.fleet.sim import run_replica

    out = []
    for job in jobs:
        t0 = time.process_time()
        speculative = any(s.speculative for s in job.specs)
        wl = stream_workload(job.requests, speculative=speculative, name=job.name,
                             ordering=job.ordering, concurrency=job.concurrency,
                             chains=job.chains)
        t1 = time.process_time()
        runs = {s.name: (run_replica(wl, job.cost, job.engine, s, job.times) if job.requests
                         else None) for s in job.specs}
        out.append({"replica": job.replica, "history": tree_history(job.draws), "runs": runs,
                    "cpu_s": {"draft": t1 - t0, "simulate": time.process_time() - t1}})
    return out
