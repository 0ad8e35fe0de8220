"""simkit.validation.background: fn() computed in a forked child comes back as its value; a
child that fails leaves the parent to compute it (and raise what it raises); close() ends a
child still at work and removes its file."""

import os
import time

import pytest

from simkit.validation.background import Background


def _pid_and_rows() -> tuple[int, list[dict]]:
    return os.getpid(), [{"run_id": f"r{i}", "x": i * 0.5} for i in range(3)]


def test_the_childs_value_comes_back():
    job = Background(_pid_and_rows)
    pid, rows = job.result()
    assert pid != os.getpid()                       # computed in the child
    assert rows == _pid_and_rows()[1]


def test_a_failed_child_leaves_the_parent_to_compute_and_raise(monkeypatch):
    calls = []

    def flaky():
        calls.append(os.getpid())
        if len(calls) == 1 and os.getpid() != parent:
            raise RuntimeError("child failed")
        raise ValueError("the error the parent sees")

    parent = os.getpid()
    job = Background(flaky)
    with pytest.raises(ValueError, match="the error the parent sees"):
        job.result()
    assert calls == [parent]                        # the child's call happened in the child


def test_close_ends_a_child_still_at_work():
    job = Background(lambda: time.sleep(60))
    proc, folder = job._proc, job._dir.name
    job.close()
    assert proc.exitcode is not None and not os.path.exists(folder)
