"""simkit.filelock.exclusive: the lock is held for the block, the block runs unlocked where no
lock can be had, and the block's own errors are not taken for an unavailable lock."""

from __future__ import annotations

import fcntl

import pytest

from simkit.filelock import exclusive


def _held_elsewhere(path) -> bool:
    with open(path, "a") as other:         # another open file description: flock conflicts
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


def test_the_lock_is_held_for_the_block_and_let_go_after(tmp_path):
    path = tmp_path / "x.lock"
    with exclusive(lambda: str(path)):
        assert _held_elsewhere(path)
    assert not _held_elsewhere(path)
    assert path.exists()                   # kept: a waiter may hold it open


def test_no_lock_to_be_had_runs_the_block_unlocked(tmp_path):
    ran = []
    with exclusive(lambda: str(tmp_path / "no-such-folder" / "x.lock")):
        ran.append(1)
    with exclusive(lambda: (_ for _ in ()).throw(KeyError("layout")), unavailable=(Exception,)):
        ran.append(2)
    assert ran == [1, 2]


def test_the_blocks_own_error_goes_through(tmp_path):
    with pytest.raises(OSError, match="inside"):
        with exclusive(lambda: str(tmp_path / "x.lock")):
            raise OSError("inside")
