"""simkit fleet: traffic generators, routing, the fleet simulation against the engine's own
simulate, the per-replica history, the CLI's input checks and byte-identical output.

Real traces and the real suffix drafter throughout (the raw traces are needed: a fleet replays
each replica's own stream); small traffic, so the file runs in well under a minute."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.cli import app
from simkit.fleet import report
from simkit.fleet.router import route, route_sessions
from simkit.fleet.traffic import TrafficSpec, arrival_times, prompt_draws, reuse_summary, \
    session_ids
from simkit.paths import traces_src_dir

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")


def test_poisson_and_gamma_arrivals_have_the_stated_rate_and_burstiness():
    for cv in (1.0, 3.0):
        t = arrival_times(TrafficSpec(rate=50, duration_s=400, cv=cv, seed=1))
        gaps = np.diff(t)
        assert t.min() >= 0 and t.max() < 400 and np.all(gaps >= 0)
        assert abs(t.size / 400 / 50 - 1) < 0.1 * cv
        assert abs(gaps.std() / gaps.mean() - cv) < 0.12 * cv
    a = arrival_times(TrafficSpec(rate=50, duration_s=400, seed=1))
    assert np.array_equal(a, arrival_times(TrafficSpec(rate=50, duration_s=400, seed=1)))


def test_daily_cycle_moves_arrivals_to_the_peak():
    spec = TrafficSpec(rate=20, duration_s=1000, daily_amplitude=0.8, period_s=1000, seed=2)
    t = arrival_times(spec)
    first, second = (t < 500).sum(), (t >= 500).sum()   # sin > 0 in the first half-period
    assert first > 2.5 * second
    assert abs(t.size / (20 * 1000) - 1) < 0.05          # one whole period keeps the mean rate


def test_repeat_popularity_gives_the_stated_share_and_distance():
    spec = TrafficSpec(popularity="repeat", repeat_share=0.4, reuse_distance=50, seed=3)
    d = prompt_draws(spec, 20000, 100000)
    s = reuse_summary(d, np.arange(d.size, dtype=float))
    assert abs(s["repeat_share"] - 0.4) < 0.02
    assert 25 < s["reuse_arrivals_p50"] < 50             # geometric, mean 50: median ~ 35
    z = reuse_summary(prompt_draws(TrafficSpec(popularity="zipf", zipf_s=1.2), 5000, 3000),
                      np.arange(5000, dtype=float))
    assert z["repeat_share"] > 0.5


def test_sessions_and_session_affinity():
    ids = ["mt_bench/81/t1", "mt_bench/81/t2", "gsm8k/1", "gsm8k/1"]
    s = session_ids(ids, np.array([0, 1, 2, 3]))
    assert s == ["mt_bench/81", "mt_bench/81", "a2", "a3"]
    r = route_sessions(s, 7)
    assert r[0] == r[1]
    assert route("round-robin", [[1]] * 5, 2).tolist() == [0, 1, 0, 1, 0]


@pytest.fixture(scope="module")
def small_stream():
    """40 real code-reasoning requests, each served twice (reuse distance 9), with times."""
    from simkit.fleet.streams import repeat_stream
    from simkit.validation.requests import request_pool

    pool = request_pool("llama-3.1-8b", "code-reasoning", n=20)
    pool = [type(r)(r.prompt_ids, r.output_ids[:256]) for r in pool]
    order = repeat_stream(len(pool), 9)
    times = np.cumsum(np.random.default_rng(0).exponential(0.3, order.size))
    return [pool[i] for i in order.tolist()], order, times


@needs_traces
def test_one_replica_equals_the_engines_own_open_loop(small_stream):
    """run_replica is simkit.engine.sim.simulate(OpenLoop(timestamps), shuffle=False), figure
    for figure, so a fleet replica is today's engine."""
    import dataclasses

    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import engine_config
    from simkit.engine.sim import OpenLoop, simulate
    from simkit.fleet.replica import stream_workload
    from simkit.fleet.sim import run_replica

    reqs, _, times = small_stream
    cost = load_cost_model("llama-3.1-8b", "h200")
    cfg = engine_config(cost)
    wl = stream_workload(reqs, speculative=True)
    for spec in parse_configs("vanilla,suffix"):
        mine = run_replica(wl, cost, cfg, spec, times)
        ref = simulate(wl, cost, cfg, spec, load=OpenLoop(timestamps=tuple(times)),
                       shuffle=False, num_requests=len(reqs))
        assert dataclasses.asdict(mine.metrics) == dataclasses.asdict(ref.metrics)
        assert mine.prefix["hit_tokens"] == ref.prefix["hit_tokens"]
        assert mine.prefix["prefill_tokens"] == ref.prefix["prefill_tokens"]


@needs_traces
def test_in_loop_replica_is_the_engines_own_run_and_drafts_less_than_the_table(small_stream):
    """--ordering in-loop: the replica drafts on its own simulated steps (a fresh tree per
    engine), the same as simulate() drafting in the loop; with repeats in flight beside their
    earlier copy, each finds only what that copy has produced, never more than the sequential
    table (which holds every earlier response complete) gives it."""
    import dataclasses

    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import engine_config
    from simkit.engine.sim import OpenLoop, simulate
    from simkit.fleet.replica import stream_workload
    from simkit.fleet.sim import run_replica

    reqs, _, times = small_stream
    times = times / 20                            # many in flight, so repeats overlap
    cost = load_cost_model("llama-3.1-8b", "h200")
    cfg = engine_config(cost)
    loop = stream_workload(reqs, speculative=True, ordering="in-loop")
    assert not loop.tables
    spec, = parse_configs("suffix")
    mine = run_replica(loop, cost, cfg, spec, times)
    ref = simulate(loop, cost, cfg, spec, load=OpenLoop(timestamps=tuple(times)),
                   shuffle=False, num_requests=len(reqs))
    assert dataclasses.asdict(mine.metrics) == dataclasses.asdict(ref.metrics)
    seq = run_replica(stream_workload(reqs, speculative=True), cost, cfg, spec, times)
    assert 0 < mine.accepted < seq.accepted


@needs_traces
def test_a_repeat_on_its_own_replica_is_drafted_from_its_earlier_response(small_stream):
    """The replica's tree is its own: the same stream split so that every repeat meets its
    earlier copy (prefix-affinity) accepts more per step than a split that separates them."""
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.runner import engine_config
    from simkit.fleet.replica import ReplicaJob, run_group

    reqs, order, times = small_stream
    cost = load_cost_model("llama-3.1-8b", "h200")
    cfg = engine_config(cost)
    spec = parse_configs("suffix")
    out = {}
    for name, rep in (("pa", route("prefix-affinity", [r.prompt_ids for r in reqs], 2)),
                      ("apart", np.array([0 if i < 20 else 1 for i in _first_copy(order)]))):
        jobs = [ReplicaJob(k, [reqs[i] for i in np.flatnonzero(rep == k)],
                           order[rep == k].tolist(), times[rep == k].tolist(), spec, cost, cfg)
                for k in range(2)]
        res = run_group(jobs)
        acc = sum(r["runs"]["suffix"].accepted for r in res)
        dec = sum(r["runs"]["suffix"].decode_steps for r in res)
        share = sum(r["history"]["effective_repeat_share"] * r["history"]["requests"]
                    for r in res) / len(reqs)
        out[name] = (acc / dec, share)
    assert out["pa"][1] == pytest.approx(0.5)          # every second copy meets the first
    assert out["pa"][0] > 1.3 * out["apart"][0]


def _first_copy(order):
    """Per arrival: 0..19 for a first copy, 20.. for the second (so 'apart' splits the pair)."""
    seen, out = set(), []
    for u in order.tolist():
        out.append(u + 20 if u in seen else u)
        seen.add(u)
    return out


BAD = [(["--policies", "random"], "policies"), (["--cv", "0"], "cv"),
       (["--daily-amplitude", "1"], "daily-amplitude"), (["--repeat-share", "1.5"], "repeat-share"),
       (["--popularity", "pareto"], "popularity"), (["--plot", "/tmp/x.nope"], "plot"),
       (["--format", "csv"], "format"), (["--max-replicas", "0"], "max-replicas"),
       (["--gpu-hour-price", "-1"], "gpu-hour-price"), (["--ordering", "random"], "ordering"),
       (["--configs", "bogus"], "config")]


@pytest.mark.parametrize("args,field", BAD, ids=[a[0] for a, _ in BAD])
def test_bad_input_is_one_error_line_and_exit_2(args, field, capsys):
    from simkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fleet", "plan", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and field in err[0]


@needs_traces
def test_fleet_plan_end_to_end_is_byte_identical(tmp_path):
    args = ["fleet", "plan", "--corpus", "code-reasoning", "--rate", "4", "--duration", "12",
            "--max-replicas", "2", "--policies", "round-robin,prefix-affinity,least-outstanding",
            "--gpu-hour-price", "3", "--format", "json"]
    a = CliRunner().invoke(app, args)
    b = CliRunner().invoke(app, args + ["--plot", str(tmp_path / "p.png")])
    assert a.exit_code == 0, a.output
    assert b.exit_code == 0 and a.stdout == b.stdout
    assert b.stderr.splitlines()[-1] == f"wrote {tmp_path / 'p.png'}"   # says where it went
    import json

    doc = json.loads(a.output)
    assert {r["policy"] for r in doc["rows"]} == {"round-robin", "prefix-affinity",
                                                  "least-outstanding"}
    for r in doc["rows"]:
        assert r["per_replica"] and r["replicas"] >= 1
    assert (tmp_path / "p.png").stat().st_size > 0
    text = CliRunner().invoke(app, args[:-2])
    assert text.exit_code == 0 and "history per replica" in text.output
    assert max(len(line) for line in text.stdout.splitlines()) <= 100     # a terminal's width
    wide = CliRunner().invoke(app, args[:-2] + ["--wide"])
    header = next(line for line in wide.stdout.splitlines() if line.startswith("policy "))
    assert [h.strip() for h in header.split("┃")] == report.COLUMNS and "--wide shows" not in \
        wide.stdout
    loop = CliRunner().invoke(app, args[:-2] + ["--ordering", "in-loop"])
    assert loop.exit_code == 0, loop.output
    assert "drafting on the replica's simulated steps" in " ".join(loop.output.split())


def test_an_overloaded_replica_reports_the_latencies_of_its_window_requests():
    """A replica's TTFT/TPOT are those of the requests that arrived in its window, an overloaded
    window included; only a run without a window reports every request (an overloaded window
    used to report every request of the run)."""
    from types import SimpleNamespace

    from simkit.fleet.sim import _replica_run

    rec = SimpleNamespace(req_arrival=[0.0, 1.0, 2.0, 9.0], req_first=[0.1, 1.2, 2.3, 9.4],
                          req_done=[1.0, 2.0, 3.0, 10.0], req_out=[10, 10, 10, 10],
                          accepted=[0], decodes=[0])
    for kind, n in (("steady", 2), ("overloaded", 2), ("full-run", 4)):
        m = SimpleNamespace(window_kind=kind, window_start_s=1.0, window_end_s=2.0)
        assert len(_replica_run(m, rec, [], {}).ttft_ms) == n, kind
