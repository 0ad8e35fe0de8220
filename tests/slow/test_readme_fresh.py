"""Every README command on a fresh clone: the raw traces hidden (SIMKIT_TRACES_SRC names a
missing folder), a new cache, a new folder holding the user's files (tests/readme_commands.py).
Each command, run as the user runs it (its own process), either prints a result or exits 2 with
exactly one `error:` line that says what it needs and where that comes from; no traceback.
NEEDS lists the commands that cannot work without the raw traces and what their line must say;
every other README command must work on the shipped data."""

from __future__ import annotations

import os

import pytest

from readme_commands import README_PREDICTION, fresh_env, readme_commands, run_fresh, user_folder

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


# README commands that read what an earlier one writes (or would write), by prefix, with that
# earlier one: each chain runs in README order on one xdist worker, in that worker's fresh folder
# (predict --calibration my-gpu.json reads the file calibrate fit wrote; the commands on
# mytraffic read the corpus the import makes). Every other command reads only the shipped data
# and what user_folder() wrote, so they spread over the workers, each in its worker's own folder.
CHAINS = {
    "readme-fresh-own-gpu": ("simkit calibrate fit --records calib-out",
                             "simkit predict --model llama-3.1-8b --corpus mix --calibration my-gpu.json"),
    "readme-fresh-own-traffic": ("simkit traces import mytraffic.jsonl", "simkit traces show mytraffic",
                                 "simkit predict --model llama-3.1-8b --corpus mytraffic",
                                 "simkit whatif concurrency --model llama-3.1-8b --corpus mytraffic",
                                 "simkit whatif hardware --model llama-3.1-8b --corpus mytraffic",
                                 "simkit calibrate plan --model llama-3.1-8b --corpus mytraffic"),
}


def _needs(cmd: str) -> tuple[str, ...] | None:
    return next((v for k, v in NEEDS.items() if cmd.startswith(k)), None)


def _chain(cmd: str) -> str | None:
    return next((name for name, prefixes in CHAINS.items()
                 if any(cmd.startswith(p) for p in prefixes)), None)


# the README's pasted prediction (conftest readme_prediction, run once per pytest run) shares a
# worker with test_report's check of its output: no worker waits on the lock while the other runs it
README_PREDICTION_GROUP = "readme-prediction"


def _group(cmd: str) -> str | None:
    return README_PREDICTION_GROUP if cmd == README_PREDICTION else _chain(cmd)


def _params() -> list:
    """Every README command, those of a chain on its chain's xdist worker (and the pasted
    prediction on the worker of its other reader)."""
    return [pytest.param(cmd, marks=pytest.mark.xdist_group(_group(cmd))) if _group(cmd)
            else cmd for cmd in readme_commands()]


@pytest.fixture(scope="session")   # not module: xdist may run other modules between these tests
# one per xdist worker (one process each): a chain's commands all run in the folder of its worker
def fresh(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fresh-clone")
    env = fresh_env(folder)
    old = os.environ.get("SIMKIT_TRACES_SRC")
    os.environ["SIMKIT_TRACES_SRC"] = env["SIMKIT_TRACES_SRC"]
    try:
        user_folder(folder)
    finally:
        if old is None:
            os.environ.pop("SIMKIT_TRACES_SRC")
        else:
            os.environ["SIMKIT_TRACES_SRC"] = old
    return folder, env, set()


def _earlier_in_chain(cmd: str) -> list[str]:
    """The README commands of cmd's chain that come before it (what it may read)."""
    name = _chain(cmd)
    if name is None:
        return []
    cmds = readme_commands()
    first = [next(c for c in cmds if c.startswith(p)) for p in CHAINS[name]]
    return first[:next(i for i, c in enumerate(first) if c == cmd)]


def test_needs_names_only_readme_commands():
    cmds = readme_commands()
    for prefix in NEEDS:
        assert any(c.startswith(prefix) for c in cmds), prefix


def test_each_chain_is_readme_commands_in_readme_order():
    """A chain names README commands (one each), the one that writes first in the README."""
    cmds = readme_commands()
    for name, prefixes in CHAINS.items():
        where = []
        for prefix in prefixes:
            hits = [i for i, c in enumerate(cmds) if c.startswith(prefix)]
            assert len(hits) == 1, (name, prefix, hits)
            where += hits
        assert where[0] == min(where), (name, where)


def test_the_shared_prediction_is_a_readme_command():
    assert README_PREDICTION in readme_commands()


@pytest.mark.parametrize("cmd", _params())
def test_readme_command_on_a_fresh_clone(fresh, cmd, request):
    folder, env, done = fresh
    # the xdist group keeps a chain on one worker where the plugin honours it (pytest-xdist 3.8
    # under pytest 9 does not): an earlier command of the chain not yet run in this worker's
    # folder is run here first, so the command reads what the README's order would have written
    for earlier in _earlier_in_chain(cmd):
        if earlier not in done:
            first = run_fresh(folder, env, earlier)
            assert first.returncode == 0 or _needs(earlier), (earlier, first.stderr[-500:])
            done.add(earlier)
    # the README's pasted prediction ran once in a fresh clone of its own (the same command, raw
    # traces hidden, new cache), which test_report also reads: not again here
    proc = (request.getfixturevalue("readme_prediction") if cmd == README_PREDICTION
            else run_fresh(folder, env, cmd))
    done.add(cmd)
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
