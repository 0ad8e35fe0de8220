"""What-if speed: wall time of each `simkit whatif` subcommand on its embedded defaults (the
numbers users wait for), plus the reference reproduction. Prints figures; asserts nothing.

    python tests/benchmarks/bench_whatif.py [--workers 2] [--skip-reference]
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()

    from simkit.whatif import (batch_size_table, capacity, concurrency, hardware, host,
                               quantization, vllm_version)

    print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    from simkit.app.options import RunOptions

    w = args.workers            # each what-if's own default settings, on --workers
    cases = [("capacity", lambda: capacity.capacity(RunOptions(workers=w), target_rate=20.0)),
             ("hardware", lambda: hardware.hardware(RunOptions("llama-3.1-70b", workers=w))),
             ("host", lambda: host.host(RunOptions(hardware="b200", workers=w))),
             ("concurrency", lambda: concurrency.concurrency(RunOptions(workers=w))),
             ("quantization", lambda: quantization.quantization(
                 RunOptions("llama-3.1-70b", hardware="b200", workers=w))),
             ("ktable (vLLM 0.34)", lambda: batch_size_table.batch_size_table(
                 RunOptions(workers=w))),
             ("vllm-version (0.33 -> 0.34)", lambda: vllm_version.vllm_version(
                 RunOptions(workers=w)))]
    if not args.skip_reference:
        from simkit.reference.reproduce import STUDY, reproduce

        cases.append(("reference (11 models, 1 seed)",
                      lambda: reproduce(STUDY.but(workers=args.workers))))
    for name, fn in cases:
        t0, c0 = time.perf_counter(), time.process_time()
        res = fn()
        wall = time.perf_counter() - t0
        print(f"{name:32s} {wall:7.1f} s wall, {time.process_time() - c0:6.1f} s parent CPU, "
              f"{len(res.rows)} rows")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the parent process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
