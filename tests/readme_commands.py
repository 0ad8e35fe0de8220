"""The README's commands, as a user would type them, and a folder to type them in.

The README's fenced blocks hold two kinds of command line: `simkit ...` lines of the tour and
walk-throughs (```bash blocks, a trailing `# comment` allowed) and `$ simkit ...` lines above
pasted output. `readme_commands()` returns them all, in README order, once each; comment lines
(`#   bash plan.sh`, the GPU host's part) are not commands to run here.

`user_folder()` prepares what those commands take as given: the user's own request log
(mytraffic.jsonl, written from real requests when the raw traces are present) and the records a
GPU returned for the calibration plan (calib-out, the committed vLLM 0.33 runs of that plan).
The benchmark (tests/benchmarks/bench_readme_commands.py) and the fresh-machine test
(tests/integration/test_readme.py) share both, so they run the same lines.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS_033 = ROOT / "calibrate" / "data" / "vllm-0.33"
# the README's pasted prediction: the command above it (its output is the README's example)
README_PREDICTION = ("simkit predict --model llama-3.1-8b --corpus mix "
                     "--plot docs/img/predict-llama-3.1-8b-mix.png")


def readme_commands(text: str | None = None) -> list[str]:
    """Every `simkit` command line of the README's fenced blocks, without its `$ ` prompt or
    trailing comment, in order, duplicates dropped."""
    text = (ROOT / "README.md").read_text() if text is None else text
    out: list[str] = []
    for lang, block in re.findall(r"```([a-z]*)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("$ simkit "):
                line = line[2:]
            elif lang != "bash" or not line.startswith("simkit "):
                continue                  # pasted output, or a comment line
            cmd = " ".join(shlex.split(line, comments=True))
            if cmd not in out:
                out.append(cmd)
    return out


def calibration_records(out: Path) -> Path:
    """calib-out: the committed vLLM 0.33 runs (first repeats only) the README's calibration
    plan asks for, as the records folder a GPU host would return."""
    import pandas as pd

    runs = pd.read_parquet(RECORDS_033 / "runs.parquet")
    mine = runs[(runs.corpus == "chat") & (runs.model == "llama-3.1-8b")
                & ~runs.run_id.str.contains("-rep")]
    steps = pd.read_parquet(RECORDS_033 / "steps.parquet")
    out.mkdir(parents=True, exist_ok=True)
    mine.to_parquet(out / "runs.parquet", index=False)
    steps[steps.run_id.isin(set(mine.run_id))].to_parquet(out / "steps.parquet", index=False)
    return out


def user_folder(folder: Path) -> Path:
    """`folder` made ready for the README's commands: docs/img for the --plot paths, calib-out,
    and mytraffic.jsonl: real requests when the raw traces are present, else a small made-up
    log (the import then needs the tokenizer files, which is what a fresh machine should meet)."""
    from simkit.paths import traces_src_dir

    (folder / "docs" / "img").mkdir(parents=True, exist_ok=True)
    calibration_records(folder / "calib-out")
    log = folder / "mytraffic.jsonl"
    if traces_src_dir() is not None:
        from user_traffic import write_openai_log

        write_openai_log(log, ("mt_bench", "alpaca_eval"), limit=360)
    else:
        log.write_text("".join(json.dumps({
            "messages": [{"role": "user", "content": f"Add {i} and {i + 1}."}],
            "response": {"choices": [{"message": {"role": "assistant",
                                                  "content": f"{i} + {i + 1} = {2 * i + 1}."}}]}})
            + "\n" for i in range(40)))
    return folder


def fresh_env(folder: Path) -> dict[str, str]:
    """The environment of a fresh clone working in `folder`: this checkout's simkit, a new cache
    in the folder, the raw traces hidden (SIMKIT_TRACES_SRC names a missing folder)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(folder / "cache"),
               SIMKIT_TRACES_SRC=str(folder / "no-raw-traces"))
    env.pop("SIMKIT_DEBUG", None)
    return env


def run_fresh(folder: Path, env: dict[str, str], cmd: str) -> subprocess.CompletedProcess:
    """A README command line run as the user runs it: its own process, in `folder`."""
    return subprocess.run([sys.executable, "-m", "simkit", *shlex.split(cmd)[1:]], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=900)


def clear(folder: Path) -> None:
    """Remove a folder user_folder() made (benchmark clean-up)."""
    shutil.rmtree(folder, ignore_errors=True)
