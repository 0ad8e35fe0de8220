"""Benchmark: a user's own traffic file, end to end (import -> first predict -> cached predict).

    python tests/benchmarks/bench_own_traffic.py [--sources alpaca_eval,arena_hard,mt_bench,gsm8k]
        [--model llama-3.1-8b] [--workers 2]

Writes an OpenAI-format request log of the real Llama-3.1-8B-Instruct requests of the named
sources into a temporary folder (never into the repo), then times, in a fresh temporary cache:
`simkit traces import`, the first `simkit predict` on it (tokenized corpus in hand: warm
acceptance table over the whole corpus + n-gram table + the simulations) and a second one (tables
cached). Prints the request count, tokens, wall and CPU seconds of each step, the load average
(the machine may be shared) and the peak RSS; no assertion.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(args: list[str], env: dict) -> tuple[str, str]:
    """Run `simkit ARGS`; ("wall s / CPU s (all its processes)", stdout)."""
    t0, c0 = time.perf_counter(), _cpu()
    res = subprocess.run([sys.executable, "-m", "simkit", *args], env=env, capture_output=True,
                         text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if res.returncode != 0:
        sys.exit(f"simkit {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
    return f"{wall:6.1f} s wall / {cpu:6.1f} s CPU", res.stdout


def main() -> None:
    from user_traffic import write_openai_log

    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", default="alpaca_eval,arena_hard,mt_bench,gsm8k")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--workers", default="2")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "mytraffic.jsonl"
        n = write_openai_log(log, tuple(s for s in a.sources.split(",") if s))
        env = dict(os.environ, SIMKIT_CACHE_DIR=str(Path(tmp) / "cache"),
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        print(f"user file: {n} requests ({log.stat().st_size / 1e6:.1f} MB, sources {a.sources}), "
              f"{os.cpu_count()} CPU cores")
        wall, out = _timed(["traces", "import", str(log), "--format", "openai", "--model", a.model,
                            "--name", "mytraffic"], env)
        print(f"import:          {wall}   {out.splitlines()[0]}")
        predict = ["predict", "--model", a.model, "--corpus", "mytraffic", "--workers", a.workers]
        wall, out = _timed(predict, env)
        print(f"predict (first): {wall}   (warm acceptance table + n-gram table + "
              f"simulations, default ladder, 3 seeds)")
        wall2, out2 = _timed(predict, env)
        print(f"predict (again): {wall2}   (tables from the cache)")
        print("load average now (1, 5, 15 min):", " ".join(f"{x:.2f}" for x in os.getloadavg()))
        print("identical output both times:", out == out2)
        best = [line for line in out.splitlines() if line.startswith("best:")]
        print(best[0] if best else "")
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS of the simkit processes: {kids:.0f} MB")


if __name__ == "__main__":
    main()
