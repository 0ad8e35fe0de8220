"""A Ctrl-C that Python drops (raised inside a finaliser) or that lands while the main thread
waits on a worker still stops the command: simkit.interrupt remembers it and raises it again."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from concurrent.futures import Future

import pytest

from simkit import interrupt


@pytest.fixture
def handler(monkeypatch):
    monkeypatch.setattr(interrupt, "_SEEN", [False])
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt.install()
    assert signal.getsignal(signal.SIGINT) is interrupt._on_sigint
    yield
    signal.signal(signal.SIGINT, old)


class _SignalsInDel:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):          # bytecodes for the handler to run on, inside __del__
            pass


def test_a_ctrl_c_swallowed_by_a_finaliser_is_raised_again(handler, monkeypatch):
    lost: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))
    obj = _SignalsInDel()
    del obj                            # the KeyboardInterrupt dies as "Exception ignored"
    gc.collect()
    assert lost == [KeyboardInterrupt]    # Python dropped it: the command would run on
    assert interrupt.interrupted()
    with pytest.raises(KeyboardInterrupt):
        interrupt.check()


def test_a_wait_on_a_worker_sees_a_lost_ctrl_c_within_the_poll(handler):
    interrupt._SEEN[0] = True          # as after a KeyboardInterrupt lost elsewhere
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interrupt.result(Future())     # a worker result that never comes
    assert time.monotonic() - t0 < 5 * interrupt.POLL_S


def test_result_returns_the_value_without_a_ctrl_c(handler):
    fut = Future()
    fut.set_result(7)
    assert interrupt.result(fut) == 7 and not interrupt.interrupted()


def test_an_ignored_sigint_stays_ignored(monkeypatch):
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupt.install()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
