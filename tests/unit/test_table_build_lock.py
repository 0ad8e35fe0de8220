"""Two processes that need the same acceptance table at once build it once
(simkit.acceptance.cache.load_or_build's build lock): the second waits and loads the first's.
validate's workers used to build each shared table twice on a fresh cache (about a third of its
table-building CPU-seconds)."""

from __future__ import annotations

import multiprocessing as mp
import time
from types import SimpleNamespace

import numpy as np
import pytest

from simkit.acceptance import cache


def _build_once(folder: str, marks: str, out) -> None:
    import os

    os.environ["SIMKIT_CACHE_DIR"] = folder
    from simkit.acceptance.build import build_table

    reqs = [SimpleNamespace(prompt_ids=np.array([1, 2, 3, 1, 2], np.int32),
                            output_ids=np.array([3, 1, 2, 3, 1, 2], np.int32))]

    def build(step):
        with open(marks, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)                  # long enough for the other process to ask meanwhile
        return build_table(reqs, kmax=4, engine="python")

    path = cache.store_dir() / "suffix-lock-test"
    t = cache.load_or_build(path, build, total=6, label="t", model="m", corpus="c",
                            progress=False, use_cache=True)
    out.put(t.accepted.tobytes() + t.drafted.tobytes())


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_two_processes_build_a_shared_table_once(tmp_path):
    ctx = mp.get_context("fork")
    marks = tmp_path / "builds.txt"
    q = ctx.Queue()
    procs = [ctx.Process(target=_build_once, args=(str(tmp_path / "cache"), str(marks), q))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(marks.read_text().split()) == 1
    assert got[0] == got[1]
    assert sorted(p.name for p in (tmp_path / "cache" / cache.STORE).iterdir()) == [
        "suffix-lock-test"]
