"""Ctrl-C on the README's longer commands: the command stops at once (not after the simulations
it had queued), prints one line saying how many simulations had finished, exits 130 and leaves
no worker behind; and every simulation a command runs is counted by one progress tracker, drawn
as a bar on a terminal's stderr (simkit.progress)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import one_line_error
from simkit.cli import main
from simkit.paths import traces_src_dir
from simkit.progress import is_phase_line

ROOT = Path(__file__).resolve().parents[2]


def test_tracker_counts_and_says_how_far_it_got():
    from simkit.progress import current, tracking

    assert current() is None
    with tracking(draw=False) as tracker:
        assert current() is tracker and tracker.summary() is None
        tracker.started(5)
        tracker.started(4, draw=False)
        tracker.finished(3)
        assert tracker.summary() == "3 of 9 simulation(s) had finished"
    assert current() is None


def test_ctrl_c_line_names_the_simulations_finished(capsys, monkeypatch):
    import simkit.app.predict
    from simkit.progress import current

    def interrupted(*a, **k):
        current().started(27)
        current().finished(12)
        raise KeyboardInterrupt

    monkeypatch.setattr(simkit.app.predict, "predict", interrupted)
    with pytest.raises(SystemExit) as exc:
        main(["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--seeds", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 130
    one_line_error(err, "interrupted (Ctrl-C)", "12 of 27 simulation(s) had finished")


def test_run_jobs_reports_to_the_command_tracker():
    from simkit.app.cells import load_workload
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import Cell, engine_config, run_ladder
    from simkit.engine.sim import ClosedLoop
    from simkit.progress import tracking

    cost = load_cost_model("llama-3.1-8b", "h200")
    cell = Cell(load_workload("llama-3.1-8b", "mix", "shipped", None), cost, engine_config(cost))
    with tracking(draw=False) as tracker:
        run_ladder(cell, parse_configs("vanilla,kpad:4"), seeds=2, num_requests=64,
                   load=ClosedLoop(8), workers=1)
    assert (tracker.done, tracker.total) == (4, 4)


SLOW = [
    pytest.param(["whatif", "capacity", "--target-rate", "20"], None, id="whatif-capacity"),
    pytest.param(["fleet", "plan", "--gpu-hour-price", "3.5"], "raw", id="fleet-plan"),
    pytest.param(["validate", "--vllm-version", "0.33"], "raw", id="validate"),
    # sweep: enough cells that the compiled engine loop is still at work when the signal comes
    pytest.param(["sweep", "--out", "sw", "--model", "llama-3.1-8b,qwen2.5-7b", "--corpus",
                  "chat,code,math,mix", "--source", "shipped", "--workers", "2", "--seeds", "9"],
                 None, id="sweep"),
]


@pytest.mark.parametrize("argv,needs", SLOW)
def test_ctrl_c_stops_a_slow_readme_command_at_once(argv, needs, tmp_path):
    """Ctrl-C to the whole process group, as a terminal sends it, once the command is into
    its simulations: one line, exit 130, within seconds (a hang guard, not a timing figure:
    before, fleet plan's workers ran their whole replica groups first), no process left."""
    if needs == "raw" and traces_src_dir() is None:
        pytest.skip("needs the raw traces (../shared/traces-src)")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("SIMKIT_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "simkit", *argv], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: (os.setpgrp(), signal.signal(signal.SIGINT, signal.SIG_DFL)))
    time.sleep(4)          # imports done (~1.5 s), into its work: tables, records or simulations
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=120)
    stopped_s = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # before the error only progress: validate's line of what it predicts, and the phase lines
    # a long command prints off a terminal ('PHASE: N of M UNITS done after S s[, ...]')
    progress = lines[:-1]
    assert all(ln.startswith(("predicting ", "refitting ")) or is_phase_line(ln)
               for ln in progress), err
    # how many simulations had finished is said once any started (on a busy machine the
    # command may still be building its tables at the signal)
    one_line_error(lines[-1], "interrupted (Ctrl-C)")
    assert stopped_s < 15, stopped_s
    with pytest.raises(ProcessLookupError):  # the group is gone: no worker survived
        os.killpg(proc.pid, 0)


def test_status_spinner_is_silent_off_a_terminal(capsys):
    from simkit.progress import status

    with status("fitting"):
        pass
    assert capsys.readouterr().err == ""


def test_a_what_if_draws_its_bar_on_a_terminal_stderr(tmp_path):
    """The what-ifs had no progress of their own: on a terminal the tracker draws a bar on
    stderr for each stated phase (each history here), nothing on stdout, which holds the
    result."""
    import pty

    env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(tmp_path / "cache"),
               COLUMNS="100")
    env.pop("SIMKIT_DEBUG", None)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "simkit", "whatif", "history", "--model", "llama-3.1-8b",
         "--corpus", "mix", "--shares", "0,1", "--configs", "vanilla,kpad:4", "--seeds", "1",
         "--no-warm"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:                      # the command closed its end
            break
        if not chunk:
            break
        drawn += chunk
    out = proc.stdout.read()
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    # each history a phase of its own: 2 configurations x 1 seed, "(1 of 2)" then "(2 of 2)"
    assert b"(2 of 2)" in drawn and b"2/2" in drawn, drawn[-300:]
    assert b"simulations" not in out and b"whatif history" in out
