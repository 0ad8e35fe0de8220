"""validate's runs on every core (simkit/validation/parallel.py): the results and the progress
lines come in the runs' order, the same as one process gives, and the command's tracker counts
each run once."""

from __future__ import annotations

import os

from simkit.progress import tracking
from simkit.validation.parallel import map_runs


def _slow_square(row):
    # later rows finish first on two workers, so an order bug would show
    import time

    time.sleep(0.02 * (5 - row["n"]))
    return {"run_id": row["run_id"], "square": row["n"] ** 2, "pid": os.getpid()}


def test_results_and_progress_in_run_order_whatever_the_workers():
    rows = [{"run_id": f"r{i}", "n": i} for i in range(6)]
    seen: dict[int, list[str]] = {}
    outs = {}
    for workers in (1, 2):
        seen[workers] = []
        with tracking(draw=False) as tracker:
            outs[workers] = map_runs(_slow_square, rows, seen[workers].append, workers=workers)
        assert (tracker.done, tracker.total) == (6, 6)
    strip = lambda out: [{k: v for k, v in r.items() if k != "pid"} for r in out]  # noqa: E731
    assert strip(outs[1]) == strip(outs[2]) == [{"run_id": f"r{i}", "square": i * i}
                                                for i in range(6)]
    assert seen[1] == seen[2] == [f"r{i}" for i in range(6)]
    assert {r["pid"] for r in outs[1]} == {os.getpid()}
    assert os.getpid() not in {r["pid"] for r in outs[2]}


def test_workers_take_the_longest_runs_first_ties_in_run_order():
    from simkit.validation.parallel import longest_first

    rows = [{"run_id": "a", "num_steps": 10}, {"run_id": "b", "num_steps": 300},
            {"run_id": "c"}, {"run_id": "d", "num_steps": 300}, {"run_id": "e", "num_steps": None},
            {"run_id": "f", "num_steps": float("nan")}]
    assert [rows[i]["run_id"] for i in longest_first(rows)] == ["b", "d", "a", "c", "e", "f"]


def test_longest_first_submission_still_returns_run_order():
    rows = [{"run_id": f"r{i}", "n": i, "num_steps": i} for i in range(6)]
    seen: list[str] = []
    out = map_runs(_slow_square, rows, seen.append, workers=2)
    assert [r["square"] for r in out] == [i * i for i in range(6)]
    assert seen == [f"r{i}" for i in range(6)]


def test_while_the_kernels_compile_the_vanilla_runs_go_first():
    """drafting_last: the runs that draft nothing (vanilla) are handed out first, each group
    longest first, so the workers do not wait for the drafter's compile."""
    from simkit.validation.parallel import longest_first

    rows = [{"run_id": "a", "config": "suffix", "num_steps": 900},
            {"run_id": "b", "config": "vanilla", "num_steps": 100},
            {"run_id": "c", "config": "kpad", "num_steps": 2000},
            {"run_id": "d", "config": "vanilla", "num_steps": 300}]
    order = [rows[i]["run_id"] for i in longest_first(rows, drafting_last=True)]
    assert order == ["d", "b", "c", "a"]
    assert [rows[i]["run_id"] for i in longest_first(rows)] == ["c", "a", "d", "b"]


def test_two_workers_are_not_handed_two_runs_of_one_table_at_once():
    """group + apart: a drafting run whose table the previous run reads waits behind the next
    longest of another table (vanilla runs read none: never held back); no run is lost."""
    from simkit.validation.parallel import longest_first

    rows = [{"run_id": "a1", "config": "kpad", "num_steps": 900, "t": "A"},
            {"run_id": "a2", "config": "suffix", "num_steps": 800, "t": "A"},
            {"run_id": "b1", "config": "kpad", "num_steps": 700, "t": "B"},
            {"run_id": "a3", "config": "kpad", "num_steps": 600, "t": "A"},
            {"run_id": "v", "config": "vanilla", "num_steps": 500, "t": "A"},
            {"run_id": "b2", "config": "kpad", "num_steps": 400, "t": "B"}]

    def ids(**kw):
        return [rows[i]["run_id"] for i in longest_first(rows, **kw)]

    assert ids() == ["a1", "a2", "b1", "a3", "v", "b2"]
    assert ids(group=lambda r: r["t"], apart=1) == ["a1", "b1", "a2", "v", "b2", "a3"]
    # where every waiting run's table is in use, the longest goes anyway
    assert ids(group=lambda r: r["t"], apart=2) == ["a1", "b1", "v", "a2", "a3", "b2"]
    assert sorted(ids(group=lambda r: r["t"], apart=3)) == sorted(r["run_id"] for r in rows)
