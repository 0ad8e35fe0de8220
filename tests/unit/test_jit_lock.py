"""The background compile of the drafter's kernels (simkit.drafters.suffix.jit_lock): one lock,
held by the compiling process; a replay waits for it once per process; stopping it leaves no
process and no lock file; nothing starts where a parent's compile or the pure drafter applies;
a stage's lock, released before the whole compile ends, lets the replays that need only that
stage go on."""
import fcntl
import os
import threading
import time

import pytest

from simkit.drafters.suffix import jit_lock


@pytest.fixture
def held(monkeypatch, tmp_path):
    """LOCK_ENV set to a lock file this test holds, as a compiling process would (the open
    file: unlock it to end the 'compile'); this process has waited for nothing."""
    lock = tmp_path / "jit.lock"
    lock.write_text("")
    monkeypatch.setenv(jit_lock.LOCK_ENV, str(lock))
    monkeypatch.setattr(jit_lock, "_WAITED", [])
    fh = open(lock)
    fcntl.flock(fh, fcntl.LOCK_EX)
    yield fh
    fh.close()


def test_a_replay_waits_for_the_lock_once(held):
    lock = held.name                                  # the compiling process, still at work
    done = []
    waiter = threading.Thread(target=lambda: (jit_lock.wait_once(), done.append(time.monotonic())))
    waiter.start()
    time.sleep(0.3)
    assert not done                                   # blocked while the lock is held
    released = time.monotonic()
    fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(5)
    assert done and done[0] >= released
    with open(lock) as again:                        # held again: a second wait does not block
        fcntl.flock(again, fcntl.LOCK_EX)
        jit_lock.wait_once()


def test_stop_ends_the_compile_and_removes_its_lock(monkeypatch):
    monkeypatch.delenv(jit_lock.LOCK_ENV, raising=False)
    monkeypatch.delenv("SIMKIT_PURE_DRAFTER", raising=False)
    handle = jit_lock.start()
    assert handle is not None
    proc, path = handle
    assert os.environ[jit_lock.LOCK_ENV] == path and os.path.exists(path)
    jit_lock.stop(handle)
    assert proc.poll() is not None
    assert jit_lock.LOCK_ENV not in os.environ and not os.path.exists(path)


def test_nothing_starts_under_a_parents_compile_or_the_pure_drafter(monkeypatch):
    monkeypatch.setenv(jit_lock.LOCK_ENV, "/nonexistent/lock")
    assert jit_lock.start() is None
    monkeypatch.delenv(jit_lock.LOCK_ENV)
    monkeypatch.setenv("SIMKIT_PURE_DRAFTER", "1")
    assert jit_lock.start() is None
    monkeypatch.setattr(jit_lock, "_WAITED", [])
    jit_lock.wait_once()                                # no lock set: returns at once


def test_a_compile_that_cannot_start_is_no_error(monkeypatch):
    """No temporary folder or no process to spawn: nothing starts, the replays compile."""
    import tempfile

    monkeypatch.delenv(jit_lock.LOCK_ENV, raising=False)
    monkeypatch.delenv("SIMKIT_PURE_DRAFTER", raising=False)

    def no_tmp(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", no_tmp)
    assert jit_lock.start() is None and jit_lock.LOCK_ENV not in os.environ


def test_compiling_is_true_only_while_the_lock_is_held(monkeypatch, held):
    assert jit_lock.compiling()
    fcntl.flock(held, fcntl.LOCK_UN)
    assert not jit_lock.compiling()
    monkeypatch.delenv(jit_lock.LOCK_ENV)
    assert not jit_lock.compiling()                   # no background compile at all


def test_a_stage_released_early_lets_its_replays_go(held, tmp_path):
    (tmp_path / "jit.lock.concurrent").write_text("")  # the in-loop kernels still compile
    jit_lock.wait_once("concurrent")                  # its stage lock is free: no wait
    assert jit_lock.compiling()
    done = []
    waiter = threading.Thread(target=lambda: (jit_lock.wait_once(), done.append(True)))
    waiter.start()
    time.sleep(0.3)
    assert not done                                   # every stage: waits for the whole compile
    fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(5)
    assert done and not jit_lock.compiling()


def test_the_compile_holds_a_lock_per_stage_and_releases_each(monkeypatch, tmp_path):
    """A started compile holds a lock per stage but the last, and stop() removes them all; the
    compile's done(stage) (warmup._release_stages) releases that stage's inherited lock."""
    from simkit.drafters.suffix import warmup

    monkeypatch.delenv(jit_lock.LOCK_ENV, raising=False)
    monkeypatch.delenv("SIMKIT_PURE_DRAFTER", raising=False)
    handle = jit_lock.start()
    assert handle is not None
    path = handle[1]
    stages = [f"{path}.{s}" for s in jit_lock.STAGES[:-1]]
    assert all(os.path.exists(p) for p in stages)
    jit_lock.stop(handle)
    assert not any(os.path.exists(p) for p in [path, *stages])

    lock = tmp_path / "jit.lock.concurrent"
    lock.write_text("")
    fd = os.open(lock, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    monkeypatch.setenv(jit_lock.STAGE_FDS_ENV, f"concurrent={fd}")
    done = warmup._release_stages()
    done("sequential")                                # not a stage it holds: nothing happens
    with open(lock) as other:
        try:
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
            raise AssertionError("the stage lock was free before done()")
        except BlockingIOError:
            pass
        done("concurrent")
        fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)   # released


def _niceness_after_yield(conn) -> None:
    jit_lock.yield_to_compile()
    conn.send(os.nice(0))
    conn.close()


@pytest.mark.parametrize("compiling", [True, False])
def test_a_worker_yields_to_the_compile_only_while_it_runs(monkeypatch, tmp_path, compiling):
    """yield_to_compile lowers a forked worker's priority by YIELD_NICE while the compile holds
    its lock, and leaves it alone otherwise (run in a child: niceness cannot be raised back)."""
    import multiprocessing as mp

    lock = tmp_path / "jit.lock"
    lock.write_text("")
    monkeypatch.setenv(jit_lock.LOCK_ENV, str(lock))
    monkeypatch.setattr(jit_lock, "_WAITED", [])
    fh = open(lock)
    if compiling:
        fcntl.flock(fh, fcntl.LOCK_EX)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_niceness_after_yield, args=(child,))
    proc.start()
    got = parent.recv()
    proc.join(5)
    fh.close()
    assert got == os.nice(0) + (jit_lock.YIELD_NICE if compiling else 0)
