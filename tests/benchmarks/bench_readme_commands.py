"""README commands as a new user meets them: each `simkit` line of the README run as its own
process, in README order, in one fresh folder with a fresh cache (so the first command pays for
what the later ones reuse, as on a new machine). Prints each command's wall time, peak RSS and
exit status, and flags those over 30 s (the README's promise for 2 cores). Prints figures;
asserts nothing.

    python tests/benchmarks/bench_readme_commands.py [--no-traces] [--only SUBSTRING]

--no-traces hides the raw traces (SIMKIT_TRACES_SRC points at a missing folder): a fresh clone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from readme_commands import ROOT, readme_commands  # noqa: E402

SLOW_S = 30.0


def run_one(cmd: str, cwd: Path, env: dict) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak RSS MiB, exit status, last stderr line) of one command run as a
    process; CPU counts its worker processes too (user + system), which on a shared machine is
    the steadier figure: on 2 idle cores the wall time is at least CPU / 2."""
    import shlex

    argv = [sys.executable, "-m", "simkit", *shlex.split(cmd)[1:]]
    with open(cwd / ".stdout", "w") as out, open(cwd / ".stderr", "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [ln for ln in (cwd / ".stderr").read_text().splitlines() if ln.strip()]
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, proc.returncode, (lines[-1] if lines else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-traces", action="store_true", help="hide the raw traces")
    ap.add_argument("--only", default=None, help="run only commands containing this text")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="simkit-readme-") as tmp:
        folder = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(folder / "cache"))
        env.pop("SIMKIT_DEBUG", None)
        if args.no_traces:
            env["SIMKIT_TRACES_SRC"] = str(folder / "no-traces")
        # prepared in a process of its own: a child's peak RSS starts from its parent's, so
        # this one stays small (no pandas) for the figures to be the commands' own
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "from readme_commands import user_folder; "
                        "from pathlib import Path; user_folder(Path(sys.argv[2]))",
                        str(Path(__file__).resolve().parents[1]), str(folder)],
                       env=env, check=True)
        print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}, "
              f"raw traces {'hidden' if args.no_traces else 'present'}")
        slow = []
        for cmd in readme_commands():
            if args.only and args.only not in cmd:
                continue
            wall, cpu, rss, code, last = run_one(cmd, folder, env)
            flag = "  SLOW (> 30 s)" if wall > SLOW_S else ""
            print(f"{wall:7.1f} s wall {cpu:7.1f} s CPU {rss:6.0f} MiB  exit {code:3d}  {cmd}{flag}",
                  flush=True)
            if code != 0:
                print(f"{'':30s}{last[:160]}", flush=True)
            if wall > SLOW_S:
                slow.append(cmd)
        print(f"{len(slow)} command(s) over {SLOW_S:.0f} s" + "".join(f"\n  {c}" for c in slow))


if __name__ == "__main__":
    main()
