"""The searches' shared workers (simkit.engine.pool.JobPool): one fork for a whole capacity
search or concurrency sweep, the same results as a pool per batch; the capacity search stops a
rate at its first seed that misses either goal, and settles the printed binding goal of the
lowest failed rate afterwards, so every row is the one running every seed gives."""

from __future__ import annotations

import math
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from simkit.app.cells import load_cell
from simkit.app.options import Goals, RunOptions
from simkit.engine import pool as pool_mod
from simkit.engine.config import parse_configs
from simkit.engine.runner import Cell, Job, engine_config, run_jobs
from simkit.engine.sim import ClosedLoop, OpenLoop
from simkit.progress import tracking


@pytest.fixture(scope="module")
def cell() -> Cell:
    workload, cost = load_cell(RunOptions("llama-3.1-8b", "chat", source="shipped"))
    return Cell(workload, cost, engine_config(cost))


@pytest.fixture
def forks(monkeypatch):
    """Every process pool the JobPool starts."""
    made = []
    real = pool_mod.ProcessPoolExecutor

    def counting(*a, **kw):
        made.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(pool_mod, "ProcessPoolExecutor", counting)
    return made


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_a_job_pool_forks_once_and_gives_run_jobs_results(cell, forks):
    specs = parse_configs("vanilla,kpad:4")
    first = [Job(s, seed, OpenLoop(rate=6.0), 48) for s in specs for seed in (0, 1)]
    later = [Job(s, 0, ClosedLoop(8), 32) for s in specs]
    with tracking(draw=False) as tracker:
        with pool_mod.JobPool(cell, workers=2, width=4) as pool:
            got = pool_mod.results(pool, [pool.submit(j) for j in first])
            got += pool_mod.results(pool, [pool.submit(j) for j in later])   # same workers
    assert len(forks) == 1 and pool.forks == 1
    assert tracker.total == tracker.done == len(first) + len(later)
    want = run_jobs(cell, first, workers=1) + run_jobs(cell, later, workers=1)
    assert [repr(r.metrics) for r in got] == [repr(r.metrics) for r in want]
    from simkit.engine import runner

    assert runner._CELLS == {}                      # the pool dropped its cell


def test_one_worker_runs_at_submit_without_forking(cell, forks):
    spec = parse_configs("vanilla")[0]
    with pool_mod.JobPool(cell, workers=1) as pool:
        fut = pool.submit(Job(spec, 0, ClosedLoop(4), 16))
        assert fut.done()
    assert forks == [] and pool.forks == 0


def test_concurrency_levels_share_one_pool_and_match_their_own_ladders(cell, forks):
    from simkit.whatif.common import ladder_of, ladders_of

    run = RunOptions("llama-3.1-8b", "chat", source="shipped", seeds=2, workers=2)
    specs = parse_configs("vanilla,kpad:4")
    levels = [(2, 24), (8, 32)]
    together = ladders_of(run, cell.workload, cell.cost, specs, server=cell.engine,
                          levels=levels, phase="test")
    assert len(forks) == 1
    alone = [ladder_of(run, cell.workload, cell.cost, specs, server=cell.engine,
                       num_requests=n, concurrency=c) for c, n in levels]
    for a, b in zip(together, alone):
        assert [r.result_dict() for r in a.rows] == [r.result_dict() for r in b.rows]
        assert [repr(r.metrics) for r in a.runs] == [repr(r.metrics) for r in b.runs]
    # the default worker count: these few requests run here, no pool
    from dataclasses import replace

    here = ladders_of(replace(run, workers=None), cell.workload, cell.cost, specs,
                      server=cell.engine, levels=levels, phase="test")
    assert len(forks) == 1
    assert [[repr(r.metrics) for r in x.runs] for x in here] == \
        [[repr(r.metrics) for r in x.runs] for x in together]


# -- the capacity search's seeds, on made-up p99s (no simulation) ---------------------------
class _Made:
    """A stand-in JobPool whose runs' p99s come from `p99(rate, seed)`; counts the runs."""

    calls: list = []

    def __init__(self, cell, workers=None, width=None) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, job: Job) -> Future:
        ttft, tpot = self.p99(job.load.rate, job.seed)
        _Made.calls.append((job.load.rate, job.seed))
        fut: Future = Future()
        fut.set_result(SimpleNamespace(metrics=SimpleNamespace(ttft_ms_p99=ttft, tpot_ms_p99=tpot)))
        return fut

    def done(self, futures):
        return list(futures)


def _search(monkeypatch, cell, p99, early: bool):
    from simkit.whatif import capacity

    monkeypatch.setattr(capacity, "JobPool", type("P", (_Made,), {"p99": staticmethod(p99)}))
    _Made.calls = []
    rows = capacity.max_sustainable_rates(
        cell.workload, cell.cost, parse_configs("vanilla"), Goals(ttft_ms_p99=1000, tpot_ms_p99=50),
        seeds=3, min_requests=64, max_requests=100000, workers=1, rel_tol=0.02,
        cfg=cell.engine, start_rates=[1.0], early_stop=early)
    return rows, list(_Made.calls)


def test_a_tpot_miss_stops_the_rate_and_the_binding_is_settled_after(monkeypatch, cell):
    # seed 0 misses TPOT above 4 req/s, seed 1 misses TTFT above 4 req/s: the lowest failed
    # rate's seed 0 stops it on TPOT, and only its seeds left tell that TTFT binds too
    def p99(rate, seed):
        return (250.0 * rate if seed == 1 else 100.0, 12.5 * rate if seed == 0 else 10.0)

    (early, n_early), (full, n_full) = (_search(monkeypatch, cell, p99, True),
                                        _search(monkeypatch, cell, p99, False))
    assert all(_same(a[k], b[k]) for a, b in zip(early, full) for k in a), (early, full)
    assert full[0]["binding"] == "ttft" and 3.9 < full[0]["max_rate_per_replica"] <= 4.0
    assert len(n_early) < len(n_full)
    hi = full[0]["failed_rate"]
    # the settling ran seed 1 at the lowest failed rate (seed 0 alone had stopped it)
    assert (hi, 1) in n_early and (hi, 2) not in n_early
    failed_first_seed = [r for r, s in n_early if s == 0 and r > 4.0]
    assert all((r, 1) not in n_early for r in failed_first_seed if r != hi)


def test_a_tpot_binding_stays_when_no_seed_misses_ttft(monkeypatch, cell):
    def p99(rate, seed):
        return 100.0, 10.0 * rate + seed           # every seed misses TPOT alone, above ~4.8

    (early, n_early), (full, n_full) = (_search(monkeypatch, cell, p99, True),
                                        _search(monkeypatch, cell, p99, False))
    assert all(_same(a[k], b[k]) for a, b in zip(early, full) for k in a), (early, full)
    assert full[0]["binding"] == "tpot" and len(n_early) < len(n_full)


def test_run_jobs_runs_few_requests_here_and_many_on_workers(cell, monkeypatch):
    from simkit.engine import runner

    made = []
    real = runner.ProcessPoolExecutor

    def counting(*a, **kw):
        made.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(runner, "ProcessPoolExecutor", counting)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    spec = parse_configs("vanilla")[0]
    few = [Job(spec, seed, ClosedLoop(8), 32) for seed in range(3)]
    assert not runner.pool_pays(cell, few)
    here = run_jobs(cell, few)                              # default workers: no pool
    assert made == []
    assert [repr(r.metrics) for r in here] == [repr(r.metrics) for r in run_jobs(cell, few, 2)]
    assert made == [1]                                      # workers given: honoured
    many = [Job(spec, seed, ClosedLoop(8), runner.POOL_MIN_REQUESTS // 2) for seed in range(2)]
    assert runner.pool_pays(cell, many)
    run_jobs(cell, many)
    assert made == [1, 1]


def test_a_summary_over_a_window_slice_is_the_masked_one(monkeypatch):
    """summarize takes a window's steps as a slice (their ends only grow): the same metrics as
    the boolean mask it replaced, also for a mask that is not one run (then used as is)."""
    import numpy as np

    from simkit.engine import metrics

    rng = np.random.default_rng(3)
    rec = metrics.Recorder()
    n = 997
    rec.step_s = rng.exponential(0.02, n)
    rec.step_end = np.cumsum(rec.step_s)
    rec.host_s = rec.step_s * rng.uniform(0, 1, n)
    for name in ("tokens", "padded", "pad_drafts", "emitted", "decodes", "decode_tokens", "reqs",
                 "accepted", "k"):
        setattr(rec, name, rng.integers(0, 64, n))
    rec.mode = rng.integers(0, 3, n).astype(np.int8)
    rec.kv_used = rng.uniform(0, 1, n)
    m = 300
    rec.req_arrival = np.sort(rng.uniform(0, rec.step_end[-1], m))
    rec.req_first = rec.req_arrival + rng.exponential(0.1, m)
    rec.req_done = rec.req_first + rng.exponential(2.0, m)
    rec.req_out, rec.req_preempt = rng.integers(1, 400, m), np.zeros(m, np.int64)
    rec.itl = rng.exponential(0.02, 5000)
    rec.itl_time = rng.uniform(0, rec.step_end[-1], 5000)
    window = (float(rec.step_end[100]) + 1e-9, float(rec.step_end[800]))
    sliced = metrics.summarize(rec, window, 0)
    assert isinstance(metrics._run_of((rec.step_end > window[0]) & (rec.step_end <= window[1])),
                      slice)
    monkeypatch.setattr(metrics, "_run_of", lambda sel: sel)         # the mask, as before
    assert repr(metrics.summarize(rec, window, 0)) == repr(sliced)
    gappy = np.array([True, False, True])
    assert metrics._run_of(gappy) is gappy
