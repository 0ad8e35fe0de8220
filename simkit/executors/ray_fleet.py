"""A load-independent fleet on Ray (the real `ray` package): one Ray task per replica group.

Once a load-independent router policy (round-robin, prefix-affinity, session-affinity) has named
every request's replica, the replicas share nothing: each ReplicaJob carries its own requests,
arrival times, configurations, cost model and engine limits. Each task runs
simkit.fleet.replica.run_group on its group, exactly what the local executor runs, and the driver
puts the results back in replica order, so the fleet's figures are byte-identical to a local run
whatever the grouping and the number of nodes (tests/slow/test_fleet_ray.py). Every node needs simkit
installed; its drafting cache is its own (cache_dir() on that node). `session(address)` holds
Ray for a whole search (one start, many evaluations): `address` joins an existing cluster, None
starts a local instance, stopped when the session ends.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Sequence

from simkit.executors.ray_sweep import _import_ray


def run_groups_ray(run_group: Callable[[list], list[dict[str, Any]]], jobs: Sequence, *,
                   groups: int = 1, address: str | None = None,
                   num_cpus: int | None = None) -> list[dict[str, Any]]:
    """run_group (simkit.fleet.replica.run_group, passed in so that the executor layer never
    imports the fleet above it) over `groups` interleaved groups of the jobs, one Ray task each;
    results in replica order."""
    ray = _import_ray()
    jobs = list(jobs)
    groups = max(1, min(groups, len(jobs)))
    parts = [jobs[g::groups] for g in range(groups)]
    with session(address, num_cpus or groups):
        task = ray.remote(num_cpus=1)(run_group)
        refs = [task.remote(p) for p in parts]
        flat = [r for ref in refs for r in ray.get(ref)]
    return sorted(flat, key=lambda r: r["replica"])


@contextmanager
def session(address: str | None = None, num_cpus: int | None = None):
    """Ray initialised for the duration (already initialised: left as it is)."""
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        if address is None:
            ray.init(num_cpus=num_cpus, object_store_memory=256 * 1024 ** 2,
                     include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
