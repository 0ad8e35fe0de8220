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
