"""Every README command on a fresh clone: the raw traces hidden (SIMKIT_TRACES_SRC names a
missing folder), a new cache, a new folder holding the user's files (tests/readme_commands.py).
Each command, run as the user runs it (its own process), either prints a result or exits 2 with
exactly one `error:` line that says what it needs and where that comes from; no traceback.
NEEDS lists the commands that cannot work without the raw traces and what their line must say;
every other README command must work on the shipped data."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from readme_commands import ROOT, readme_commands, user_folder

# command prefix -> what its one error line must name (what is needed, where it comes from)
NEEDS = {
    "simkit traces list": ("needs the raw traces", "SIMKIT_TRACES_SRC"),
    "simkit traces import": ("tokenizer files", "SIMKIT_TRACES_SRC"),
    "simkit traces show mytraffic": ("unknown corpus 'mytraffic'", "simkit traces import"),
    "simkit validate": ("needs the raw traces", "SIMKIT_TRACES_SRC"),
    "simkit fleet plan --gpu": ("needs the raw traces", "SIMKIT_TRACES_SRC"),
    "simkit predict --model llama-3.1-8b --corpus mytraffic": ("unknown corpus 'mytraffic'",
                                                               "simkit traces import"),
    "simkit whatif concurrency --model llama-3.1-8b --corpus mytraffic": (
        "unknown corpus 'mytraffic'", "simkit traces import"),
    "simkit whatif hardware --model llama-3.1-8b --corpus mytraffic": (
        "unknown corpus 'mytraffic'", "simkit traces import"),
    # the tour plans calibration runs on the user's imported traffic, which a fresh clone has
    # not imported (the import above needs the tokenizer files)
    "simkit calibrate plan --model llama-3.1-8b --corpus mytraffic": (
        "unknown corpus 'mytraffic'", "simkit traces import"),
}


def _needs(cmd: str) -> tuple[str, ...] | None:
    return next((v for k, v in NEEDS.items() if cmd.startswith(k)), None)


@pytest.fixture(scope="session")   # not module: xdist may run other modules between these tests
def fresh(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fresh-clone")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(folder / "cache"),
               SIMKIT_TRACES_SRC=str(folder / "no-raw-traces"))
    env.pop("SIMKIT_DEBUG", None)
    old = os.environ.get("SIMKIT_TRACES_SRC")
    os.environ["SIMKIT_TRACES_SRC"] = env["SIMKIT_TRACES_SRC"]
    try:
        user_folder(folder)
    finally:
        if old is None:
            os.environ.pop("SIMKIT_TRACES_SRC")
        else:
            os.environ["SIMKIT_TRACES_SRC"] = old
    return folder, env


def test_needs_names_only_readme_commands():
    cmds = readme_commands()
    for prefix in NEEDS:
        assert any(c.startswith(prefix) for c in cmds), prefix


# the commands run in README order in one folder (a later one reads what an earlier one wrote,
# e.g. predict --calibration my-gpu.json after calibrate fit): one xdist worker runs them all
@pytest.mark.xdist_group("readme-fresh-clone")
@pytest.mark.parametrize("cmd", readme_commands())
def test_readme_command_on_a_fresh_clone(fresh, cmd):
    folder, env = fresh
    proc = subprocess.run([sys.executable, "-m", "simkit", *shlex.split(cmd)[1:]], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=900)
    assert "Traceback" not in proc.stderr, proc.stderr
    needs = _needs(cmd)
    if needs is None:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip(), "no result printed"
        return
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout[:300])
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for words in needs:
        assert words in lines[0], (words, lines[0])
