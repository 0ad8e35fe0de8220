"""Where the first run after an install spends its compile: numba compiles the engine loop's
kernels (simkit/engine/fast/kernel.py) or the suffix drafter's into an empty cache, in a child
process, and this prints the CPU time, then the time of each compiled function and of each of
numba's compile passes (exclusive of what they call), from numba's own event API
(numba.core.event), and the signatures each kernel was compiled for: a function compiled once
per literal argument value (`Literal[int](0)`) is compiled again for nothing. Prints figures;
asserts nothing.

    python tests/benchmarks/bench_compile.py                 # the engine loop
    python tests/benchmarks/bench_compile.py --drafter       # the suffix drafter's kernels
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = 12

CHILD = r"""
import collections, json, sys, time
from numba.core import event
from numba.core.registry import CPUDispatcher

by_pass, stack = collections.Counter(), []

class Listener(event.Listener):
    def on_start(self, ev):
        data = ev.data if isinstance(ev.data, dict) else {}
        fn = str(data.get("qualname", "")).split(".")[-1] or "(numba)"
        stack.append([(fn, str(data.get("name", ev.kind))), time.perf_counter(), 0.0])

    def on_end(self, ev):
        key, t0, inner = stack.pop()
        spent = time.perf_counter() - t0
        by_pass[key] += spent - inner
        if stack:
            stack[-1][2] += spent

for kind in ("numba:compile", "numba:run_pass"):
    event.register(kind, Listener())
drafter = sys.argv[1] == "drafter"
cpu = time.process_time()
if drafter:
    from simkit.drafters.suffix import core, kernels, kernels_in_loop, warmup
    warmup.compile_kernels()
    modules = (core, kernels, kernels_in_loop)
else:
    from simkit.engine.fast import kernel, warmup
    warmup.compile_kernels()
    modules = (kernel,)
cpu = time.process_time() - cpu
sigs = {f"{m.__name__.split('.')[-1]}.{n}": [str(s) for s in f.signatures]
        for m in modules for n, f in vars(m).items() if isinstance(f, CPUDispatcher)}
print(json.dumps({"cpu": cpu, "passes": [[k[0], k[1], v] for k, v in by_pass.items()],
                  "signatures": sigs}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafter", action="store_true", help="the suffix drafter's kernels")
    args = ap.parse_args()
    which = "drafter" if args.drafter else "engine"
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        for name in ("SIMKIT_ENGINE_JIT_LOCK", "SIMKIT_JIT_LOCK", "SIMKIT_ENGINE_LOOP"):
            env.pop(name, None)
        proc = subprocess.run([sys.executable, "-c", CHILD, which], env=env, cwd=ROOT,
                              capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    print(f"{which} kernels into an empty cache: {out['cpu']:.1f} CPU-s")
    by_fn: dict[str, float] = {}
    for fn, _, s in out["passes"]:
        by_fn[fn] = by_fn.get(fn, 0.0) + s
    print(f"\nby function (numba's own helpers: 'impl', ...), top {TOP}:")
    for fn, s in sorted(by_fn.items(), key=lambda x: -x[1])[:TOP]:
        print(f"  {s:6.2f} s  {fn}")
    print(f"\nby compile pass, top {TOP}:")
    for fn, name, s in sorted(out["passes"], key=lambda x: -x[2])[:TOP]:
        print(f"  {s:6.2f} s  {name}")
    print("\nsignatures compiled per kernel (more than one: compiled again per argument type):")
    for name, sigs in sorted(out["signatures"].items()):
        literal = sum("Literal" in s for s in sigs)
        note = f"  ({literal} for a literal argument value)" if literal else ""
        print(f"  {len(sigs):2d}  {name}{note}")


if __name__ == "__main__":
    main()
