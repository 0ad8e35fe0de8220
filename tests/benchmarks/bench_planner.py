"""Issue 42's figures, old and new side by side in one run: CPU per simulated request per
configuration on the reference SimPy loop and on the compiled loop (simkit.engine.fast), and
the wall and CPU time of the planner's commands (and validate) with each; optionally the README
test command's pytest. Targets on the 2-core machine: CPU
per simulated request per configuration <= 0.1 ms; each command <= 20 s fresh (numba's cache
empty: the compile included), <= 5 s warm. Prints figures; asserts nothing about time.

    python tests/benchmarks/bench_planner.py                    # engine + commands, both loops
    python tests/benchmarks/bench_planner.py --commands new     # commands on the compiled loop only
    python tests/benchmarks/bench_planner.py --commands none    # the engine figures alone
    python tests/benchmarks/bench_planner.py --with-pytest      # also the README's pytest (~6 min)

"old" is the reference loop of the same checkout (SIMKIT_ENGINE_LOOP=reference), so both
columns share everything else (profiles, cost model, searches).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "predict (mix)": ["predict", "--model", "llama-3.1-8b", "--corpus", "mix"],
    "whatif capacity": ["whatif", "capacity", "--corpus", "chat", "--target-rate", "40",
                        "--ttft-p99-ms", "1000", "--configs", "vanilla,suffix,kpad:4,dynamic"],
    "whatif concurrency": ["whatif", "concurrency"],
    "fleet plan": ["fleet", "plan", "--corpus", "chat", "--rate", "40", "--ttft-p99-ms", "1000"],
    "validate 0.33": ["validate", "--vllm-version", "0.33"],
}
PYTEST_SUMMARY = re.compile(r"\bin ([0-9.]+)s\b")   # pytest's last line: "... in 331.42s (0:05:31)"


def _engine(requests: int) -> None:
    """CPU per simulated request of one run per configuration, reference vs compiled."""
    from simkit.app.cells import load_cell
    from simkit.app.options import RunOptions
    from simkit.engine import fast
    from simkit.engine.config import DEFAULT_CONFIGS, parse_configs
    from simkit.engine.runner import engine_config, history_cached_prefixes, history_repeated
    from simkit.engine.sim import ClosedLoop, OpenLoop, simulate

    cases = [("mix", ClosedLoop(32), DEFAULT_CONFIGS), ("chat", OpenLoop(rate=20.0),
                                                        "vanilla,suffix,kpad:4,dynamic-goodput")]
    print(f"{'corpus':6s} {'load':12s} {'config':18s} {'steps':>7s} {'old ms/req':>11s} "
          f"{'new ms/req':>11s} {'ratio':>7s}  same")
    for corpus, load, configs in cases:
        workload, cost = load_cell(RunOptions("llama-3.1-8b", corpus))
        cfg = engine_config(cost)
        kw = dict(load=load, seed=0, num_requests=requests,
                  cached_prefixes=history_cached_prefixes(workload, cfg),
                  repeat_prompts=history_repeated(workload, cfg))
        specs = parse_configs(configs)
        simulate(workload, cost, cfg, specs[0], **{**kw, "num_requests": 16})   # compile/load
        for spec in specs:
            cpu = {}
            res = {}
            for mode in ("reference", "compiled"):
                if mode == "reference":
                    os.environ[fast.ENV] = "reference"
                else:
                    os.environ.pop(fast.ENV, None)
                c0 = time.process_time()
                res[mode] = simulate(workload, cost, cfg, spec, **kw)
                cpu[mode] = (time.process_time() - c0) / requests * 1e3
            os.environ.pop(fast.ENV, None)
            same = repr(asdict(res["reference"].metrics)) == repr(asdict(res["compiled"].metrics))
            label = "closed C=32" if isinstance(load, ClosedLoop) else f"open {load.rate:g}/s"
            print(f"{corpus:6s} {label:12s} {spec.name:18s} {res['compiled'].metrics.steps:7d} "
                  f"{cpu['reference']:11.3f} {cpu['compiled']:11.3f} "
                  f"{cpu['reference'] / cpu['compiled']:6.1f}x  {'yes' if same else 'NO'}")


def _run(argv: list[str], env: dict) -> tuple[float, float, int]:
    """(wall s, CPU s of the command and its workers, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "simkit", *argv], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        print(f"  exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return wall, cpu, proc.returncode


def _commands(which: str) -> None:
    """Wall and CPU time of each planner command: reference loop (old), then the compiled loop
    fresh (an empty numba cache: compile included) and warm."""
    base = dict(os.environ, PYTHONPATH=str(ROOT))
    base.pop("SIMKIT_ENGINE_LOOP", None)
    print(f"\n{'command':20s} {'old wall s':>10s} {'old cpu s':>10s} {'new fresh wall':>15s} "
          f"{'new warm wall':>14s} {'new warm cpu':>13s} {'ratio (wall)':>13s}")
    for name, argv in COMMANDS.items():
        old = (float("nan"), float("nan"))
        if which == "both":
            old = _run(argv, dict(base, SIMKIT_ENGINE_LOOP="reference"))[:2]
        with tempfile.TemporaryDirectory() as numba_cache:
            env = dict(base, NUMBA_CACHE_DIR=numba_cache)
            fresh = _run(argv, env)[:2]
            warm = _run(argv, env)[:2]
        ratio = f"{old[0] / warm[0]:12.1f}x" if which == "both" else f"{'n/a':>13s}"
        olds = (f"{old[0]:10.1f} {old[1]:10.1f}" if which == "both"
                else f"{'n/a':>10s} {'n/a':>10s}")
        print(f"{name:20s} {olds} {fresh[0]:15.1f} {warm[0]:14.1f} {warm[1]:13.1f} {ratio}")


def _pytest() -> None:
    """The README test command's pytest (`python3 -m pytest -q`), once, on the compiled loop:
    its wall time as pytest's summary line states it, and as measured around it. No old
    column: the suite checks both loops itself (tests/unit/test_fast_engine.py)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SIMKIT_ENGINE_LOOP", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q"], env=env, cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()
    last = lines[-1] if lines else ""
    found = PYTEST_SUMMARY.search(last)
    stated = f"{float(found.group(1)):.1f}" if found else "n/a"
    print(f"\npytest -q: exit {proc.returncode}, {stated} s by its summary line, "
          f"{wall:.1f} s wall around it")
    print(f"  {last}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1024, help="requests per engine run")
    ap.add_argument("--commands", choices=("both", "new", "none"), default="both",
                    help="time the commands on both loops, the compiled one only, or not")
    ap.add_argument("--with-pytest", action="store_true",
                    help="also time the README test command's pytest, once, at the end (~6 min)")
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    _engine(args.requests)
    if args.commands != "none":
        _commands(args.commands)
    if args.with_pytest:
        _pytest()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
