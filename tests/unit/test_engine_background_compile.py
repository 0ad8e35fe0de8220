"""The engine loop's compile in the background (simkit.engine.fast.background, warmup.py): the
first compiled run of a process waits for the compiling process's lock, once; stopping it leaves
no process and no lock file; nothing starts under a parent's compile or the reference loop; the
warm-up's runs take the compiled loop (else it would compile nothing)."""
import fcntl
import os
import threading
import time

import pytest

from simkit.engine import fast
from simkit.engine.fast import background


@pytest.fixture
def held(monkeypatch, tmp_path):
    """LOCK_ENV set to a lock file this test holds, as the compiling process would."""
    lock = tmp_path / "engine-jit.lock"
    lock.write_text("")
    monkeypatch.setenv(background.LOCK_ENV, str(lock))
    monkeypatch.setattr(background, "_WAITED", [])
    fh = open(lock)
    fcntl.flock(fh, fcntl.LOCK_EX)
    yield fh
    fh.close()


def test_the_first_compiled_run_waits_for_the_compile_once(held, monkeypatch):
    import io

    from simkit import progress
    from simkit.engine.fast.warmup import tiny_workload
    from simkit.engine.config import parse_configs
    from simkit.engine.sim import ClosedLoop, simulate
    from simkit.costmodel import load_cost_model
    from simkit.engine.runner import engine_config

    cost = load_cost_model("llama-3.1-8b", "h200")
    args = (tiny_workload(), cost, engine_config(cost), parse_configs("kpad:4")[0])
    said = io.StringIO()
    monkeypatch.setattr(progress, "LINE_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "_CURRENT", [progress.Tracker(None, said)])
    done = []
    run = threading.Thread(target=lambda: (simulate(*args, load=ClosedLoop(2), num_requests=6),
                                           done.append(time.monotonic())))
    run.start()
    time.sleep(0.5)
    assert not done                                   # blocked while the compile holds it
    released = time.monotonic()
    fcntl.flock(held, fcntl.LOCK_UN)
    run.join(120)
    assert done and done[0] >= released
    assert said.getvalue().startswith("compiling the simulator's engine loop (once after "
                                      "install): 0 of 1 compile done")   # the wait is a phase
    with open(held.name) as again:                   # held again: a second run does not wait
        fcntl.flock(again, fcntl.LOCK_EX)
        simulate(*args, load=ClosedLoop(2), num_requests=6)


def test_stop_ends_the_compile_and_removes_its_lock(monkeypatch):
    monkeypatch.delenv(background.LOCK_ENV, raising=False)
    monkeypatch.delenv(fast.ENV, raising=False)
    monkeypatch.setattr(background, "cached", lambda: False)     # as on a fresh install
    handle = background.start()
    assert handle is not None
    proc, path = handle
    assert os.environ[background.LOCK_ENV] == path and os.path.exists(path)
    background.stop(handle)
    assert proc.poll() is not None
    assert background.LOCK_ENV not in os.environ and not os.path.exists(path)


def test_nothing_starts_under_a_parents_compile_or_the_reference_loop(monkeypatch):
    monkeypatch.setenv(background.LOCK_ENV, "/nonexistent/lock")
    assert background.start() is None
    monkeypatch.delenv(background.LOCK_ENV)
    monkeypatch.setenv(fast.ENV, "reference")
    assert background.start() is None


def test_the_warm_up_runs_every_policy_on_the_compiled_loop(monkeypatch):
    from simkit.engine.fast import loop, warmup

    taken = []
    real = loop.run
    monkeypatch.setattr(loop, "run", lambda *a, **k: taken.append(real(*a, **k)) or taken[-1])
    monkeypatch.delenv(fast.ENV, raising=False)
    monkeypatch.delenv(background.LOCK_ENV, raising=False)
    warmup.compile_kernels()
    assert len(taken) == 3 * len(warmup.CONFIGS.split(","))
    assert all(r is not None for r in taken)          # none fell back to the reference loop


def test_the_reference_switch_is_the_engines():
    assert background.REFERENCE_ENV == fast.ENV


def test_a_current_cache_starts_no_compile_and_a_stale_kernel_does(monkeypatch):
    """A warm install pays no compile process (it took seconds beside the command's own work
    on 2 cores); a kernel whose cache index is empty (its source changed) starts one."""
    from numba.core.registry import CPUDispatcher

    from simkit.engine.fast import kernel, warmup

    monkeypatch.delenv(fast.ENV, raising=False)
    monkeypatch.delenv(background.LOCK_ENV, raising=False)
    warmup.compile_kernels()                          # compiled and cached (or loaded) here
    assert background.cached() and background.start() is None
    stale = next(f for f in vars(kernel).values() if isinstance(f, CPUDispatcher))
    monkeypatch.setattr(stale._cache._cache_file, "_load_index", lambda: {})
    assert not background.cached()


def _compile_if_cold_logged(log: str) -> None:
    from simkit.engine.fast import warmup

    warmup.compile_if_cold()
    with open(log, "a") as fh:
        fh.write("done\n")


def test_compile_processes_that_find_the_cache_cold_together_compile_it_once(monkeypatch,
                                                                                tmp_path):
    """Two compile processes (of two commands, or of a command's forked workers) that find
    numba's cache cold at once: one compiles holding the cache's compile lock, the other waits
    for it and then finds the cache current, compiling nothing (both compiled, ~15 CPU-s
    each, before)."""
    import multiprocessing as mp

    from simkit.engine.fast import warmup

    cache = tmp_path / "cached"
    compiles = tmp_path / "compiles"

    def compile_kernels():
        with open(compiles, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(1.0)                   # long enough for the other process to find it cold
        cache.write_text("")

    monkeypatch.setattr(background, "cached", cache.exists)
    monkeypatch.setattr(background, "_compile_lock_path", lambda: str(tmp_path / "compile.lock"))
    monkeypatch.setattr(warmup, "compile_kernels", compile_kernels)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_compile_if_cold_logged, args=(str(tmp_path / "log"),))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert (tmp_path / "log").read_text() == "done\n" * 2   # both went on
    assert len(compiles.read_text().split()) == 1             # one of them compiled


def test_a_run_that_finds_the_cache_cold_waits_for_a_compile_process_once(monkeypatch,
                                                                            tmp_path):
    """No background compile (a forked worker of validate, a test): the first compiled run
    runs the compile process and waits for it, then reads the cache; its later runs, and a
    process whose cache is current, start none."""
    import subprocess
    import sys

    spawned = []

    def spawn():                          # a compile process: holds its lock for 0.5 s
        lock = tmp_path / f"lock{len(spawned)}"
        lock.write_text("")
        proc = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; "
                                 "fh = open(sys.argv[1]); fcntl.flock(fh, fcntl.LOCK_EX); "
                                 "open(sys.argv[1] + '.held', 'w'); time.sleep(0.5)",
                                 str(lock)])
        while not os.path.exists(f"{lock}.held"):
            time.sleep(0.01)
        spawned.append(proc)
        return proc, str(lock)

    monkeypatch.setattr(background, "_spawn", spawn)
    monkeypatch.setattr(background, "_CHECKED", [])
    monkeypatch.delenv(background.LOCK_ENV, raising=False)
    monkeypatch.setattr(background, "cached", lambda: False)
    background.wait_once()
    assert len(spawned) == 1 and spawned[0].returncode == 0   # waited for it to end
    background.wait_once()
    assert len(spawned) == 1
    monkeypatch.setattr(background, "_CHECKED", [])
    monkeypatch.setattr(background, "cached", lambda: True)
    background.wait_once()
    assert len(spawned) == 1


@pytest.mark.parametrize("version, compiles", [("0.33", True), ("0.34", False)])
def test_validate_compiles_the_engine_loop_in_the_background_where_its_runs_take_it(
        monkeypatch, capsys, version, compiles):
    """`simkit validate` starts the engine loop's background compile beside the drafter's where
    the version's runs take the compiled loop (without it each forked worker compiled the
    kernels, ~15 CPU-s each), and ends it with the command; 0.34's runs do not take it."""
    from simkit.commands import calibration
    from simkit.drafters.suffix import jit_lock
    from tests.cli_helpers import run

    events = []
    monkeypatch.setattr(jit_lock, "start", lambda: None)
    monkeypatch.setattr(background, "start", lambda: events.append("start") or "handle")
    monkeypatch.setattr(background, "stop", lambda handle: events.append(("stop", handle)))
    monkeypatch.setattr(calibration, "_validate", lambda *a, **k: events.append("validate"))
    code, _, err = run(capsys, "validate", "--vllm-version", version)
    assert code == 0, err
    assert events == (["start", "validate", ("stop", "handle")] if compiles
                      else ["validate", ("stop", None)])


@pytest.mark.parametrize("version, compiles", [(None, True), ("0.26", True), ("0.33", True),
                                               ("0.34", False)])
def test_predict_compiles_the_engine_loop_only_where_its_runs_take_it(monkeypatch, capsys,
                                                                      version, compiles):
    """vLLM 0.34's runs never take the compiled loop: a command on it starts no background
    compile (~15 CPU-s beside its own work on a fresh install, for nothing); the default
    version's do."""
    from simkit.app import predict as app_predict
    from simkit.errors import InputError
    from tests.cli_helpers import run

    events = []
    monkeypatch.delenv(fast.ENV, raising=False)
    monkeypatch.setattr(background, "start", lambda: events.append("start") or None)

    def stop_here(*a, **k):
        events.append("predict")
        raise InputError("stopped by the test", field="test")

    monkeypatch.setattr(app_predict, "predict", stop_here)
    argv = ["predict", "--model", "llama-3.1-8b", "--corpus", "chat"]
    code, _, err = run(capsys, *argv, *(["--vllm-version", version] if version else []))
    assert code == 2 and "stopped by the test" in err
    assert events == (["start", "predict"] if compiles else ["predict"])
    assert fast.may_take(version) is compiles
    monkeypatch.setenv(fast.ENV, "reference")        # the reference loop forced: none either
    assert not fast.may_take(version)


def test_nothing_to_compile_under_numbas_disable_jit(monkeypatch):
    """NUMBA_DISABLE_JIT (numba's debugging switch) compiles nothing: no compile process, not
    one per command and one per worker."""
    from numba import config

    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert background.cached()
