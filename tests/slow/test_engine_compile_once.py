"""Forked workers that find numba's cache of the engine loop cold together (validate's, a
command's without a background compile) compile nothing themselves: one compile process
(simkit.engine.fast.background) fills the cache and each worker reads it, counted by numba's
own dispatcher stats. Each worker compiled the kernels (~15 CPU-s) before. Slow: one real
compile into an empty cache folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r"""
import json, multiprocessing as mp, sys
from numba.core.registry import CPUDispatcher
from simkit.costmodel import load_cost_model
from simkit.engine.config import parse_configs
from simkit.engine.fast import kernel
from simkit.engine.fast.warmup import tiny_workload
from simkit.engine.runner import engine_config
from simkit.engine.sim import ClosedLoop, simulate

def worker(path):
    cost = load_cost_model("llama-3.1-8b", "h200")
    simulate(tiny_workload(), cost, engine_config(cost), parse_configs("kpad:4")[0],
             load=ClosedLoop(2), seed=0, num_requests=6)
    stats = {name: [sum(f.stats.cache_misses.values()), sum(f.stats.cache_hits.values())]
             for name, f in vars(kernel).items() if isinstance(f, CPUDispatcher)}
    with open(path, "w") as fh:
        json.dump(stats, fh)

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(f"worker{i}.json",)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print(json.dumps([json.load(open(f"worker{i}.json")) for i in range(2)]))
"""


def test_forked_workers_on_a_cold_cache_compile_nothing_themselves(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    for name in ("SIMKIT_ENGINE_JIT_LOCK", "SIMKIT_ENGINE_LOOP"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    workers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(workers) == 2
    for stats in workers:
        assert sum(hits for _, hits in stats.values()) >= 1     # it ran the compiled loop
        assert all(misses == 0 for misses, _ in stats.values()), stats   # read, not compiled
