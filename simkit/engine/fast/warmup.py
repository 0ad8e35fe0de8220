"""Compile the engine loop's numba kernels ahead of a command's first simulation.

numba compiles kernel.py on its first call in a process and caches the machine code (about
17-20 s of CPU on a fresh install), so a fresh planner command used to load its tables first
and then wait for the compile. background.start() runs this module in a background process
while the command loads its profiles and cost model; the command's first compiled run waits
for it (background.wait_once) and reads the kernels from numba's cache. With the cache current
it takes about two seconds.

    python -m simkit.engine.fast.warmup        # compile now (unless cached), in this process

It holds the cache's compile lock (background.compile_lock) while it compiles: of two that
start on a cold cache together, the second finds the cache current once it has the lock.
"""

from __future__ import annotations

import numpy as np

# the configurations whose kernels it compiles: one per K policy the compiled loop runs
CONFIGS = "vanilla,suffix,kpad:4,dynamic-table,dynamic-feedback,dynamic-goodput"


def tiny_workload():
    """Six made-up requests with a shared prompt header (prefix-cache hits) and a suffix table
    with the real tables' types (int32 lengths, int64 offsets, uint8 counts)."""
    from simkit.acceptance.table import AcceptanceTable
    from simkit.block_hash import pack, prompt_block_hashes
    from simkit.engine.workload import Workload

    plen = np.array([40, 72, 24, 96, 40, 56], np.int32)
    olen = np.array([12, 20, 8, 16, 24, 10], np.int32)
    kmax = 16
    offsets = np.zeros(len(olen) + 1, np.int64)
    offsets[1:] = np.cumsum(olen)
    rows = np.arange(int(offsets[-1]))[:, None]
    ks = np.arange(1, kmax + 1)[None, :]
    drafted = np.minimum(ks, rows % 7).astype(np.uint8)
    accepted = np.minimum(drafted, rows % 4).astype(np.uint8)
    table = AcceptanceTable(model="warmup", corpus="warmup", drafter="suffix", params={},
                            kmax=kmax, ordering="concurrent", prompt_len=plen, output_len=olen,
                            offsets=offsets, accepted=accepted, drafted=drafted)
    tokens = [np.r_[np.arange(32), 1000 * (r + 1) + np.arange(p - 32)] for r, p in enumerate(plen)]
    return Workload(plen, olen, {"suffix": table}, name="warmup",
                    block_hashes=pack(prompt_block_hashes(t) for t in tokens))


def compile_kernels() -> None:
    """Run every configuration of CONFIGS closed-loop and open-loop, with and without cached
    prefixes, on the tiny workload under a real cost model, so that numba compiles and caches
    the signatures a command's runs use."""
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.fast.background import checked
    from simkit.engine.runner import engine_config
    from simkit.engine.sim import ClosedLoop, OpenLoop, simulate

    checked()                 # these runs compile: they need not wait for a compile process
    workload = tiny_workload()
    cost = load_cost_model("llama-3.1-8b", "h200")
    cfg = engine_config(cost)
    chains = workload.hash_chains()
    for spec in parse_configs(CONFIGS):
        for load in (ClosedLoop(4), OpenLoop(rate=50.0)):
            simulate(workload, cost, cfg, spec, load=load, seed=0, num_requests=12)
        simulate(workload, cost, cfg, spec, load=ClosedLoop(4), seed=1, num_requests=12,
                 cached_prefixes=chains[:2], repeat_prompts=True)


def compile_if_cold() -> None:
    """The compile process's work: the kernels compiled holding the cache's compile lock,
    unless another process has cached them meanwhile."""
    from simkit.engine.fast.background import cached, checked, compile_lock

    checked()
    with compile_lock():
        if not cached():
            compile_kernels()


if __name__ == "__main__":
    compile_if_cold()
