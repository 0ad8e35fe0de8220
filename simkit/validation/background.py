"""A part of `simkit validate` computed in a forked process beside the parent's work: the
unseen-day refits (fitted while the runs are predicted) and the fleet validation (beside the
refits' predictions, whose short phases each left a core idle at their end).

`Background(fn)` forks at once (where fork exists) and runs fn() there on one core, yielding
to the drafter's compile while it runs (jit_lock.yield_to_compile); `result()` returns what fn
returned (pickled through a temporary file) and, where the fork was missing or failed, calls
fn() in this process, so its errors are raised here as they would have been. `close()` ends a
child still running (Ctrl-C).
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Callable


class Background:
    """fn() in a forked child, its value read back by result() (else computed here)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        import multiprocessing as mp

        self.fn = fn
        self._proc = None
        self._dir = tempfile.TemporaryDirectory(prefix="simkit-background-")
        self._out = Path(self._dir.name) / "result.pickle"
        if "fork" in mp.get_all_start_methods():
            self._proc = mp.get_context("fork").Process(target=self._child, daemon=True)
            self._proc.start()

    def _child(self) -> None:
        from simkit import progress
        from simkit.drafters.suffix.jit_lock import yield_to_compile
        from simkit.engine.runner import ignore_sigint

        ignore_sigint()                           # the parent ends it (daemon) on Ctrl-C
        yield_to_compile()
        progress._CURRENT[:] = [None]             # the parent's progress is the parent's
        try:
            data = pickle.dumps(self.fn(), protocol=pickle.HIGHEST_PROTOCOL)
            part = self._out.with_suffix(".part")
            part.write_bytes(data)
            part.rename(self._out)
        except BaseException:                     # result() computes it again and raises there
            os._exit(1)

    def result(self) -> Any:
        """fn()'s value: the child's (waiting for it), else computed in this process."""
        try:
            if self._proc is not None:
                self._proc.join()
                ok, self._proc = self._proc.exitcode == 0, None
                if ok and self._out.is_file():
                    return pickle.loads(self._out.read_bytes())
            return self.fn()
        finally:
            self.close()

    def close(self) -> None:
        """End the child if it still runs and remove its file."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join()
            self._proc = None
        self._dir.cleanup()


__all__ = ["Background"]
