"""The what-ifs on the real shipped/raw profiles and the real cost model: each answers with a
table and a plot, and moves in the direction the physics says."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

MODEL, CORPUS = "llama-3.1-8b", "mix"
BIG = "llama-3.1-70b"
SEARCH = dict(seeds=1, min_requests=64, max_requests=900, workers=2, rel_tol=0.15)


def run(model: str = MODEL, **settings):
    """The what-ifs' run settings here: one seed (the tests compare, they do not estimate)."""
    from simkit.app.options import RunOptions

    return RunOptions(model, CORPUS, **{"seeds": 1, **settings})


@pytest.fixture(scope="module")
def workload():
    """The real (model, corpus) workload (simkit.profiles.corpus_profile, issue 3)."""
    from simkit.app.cells import load_workload

    return load_workload(MODEL, CORPUS)


# -- capacity --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def capacity_search(workload, once_per_run):
    """Max sustainable rates for vanilla and kpad-4 under two TPOT goals (small, fast search).
    Llama-3.1-70B on H200 (TP2) keeps the rates low enough that the goals, not the request cap,
    bind with a few hundred requests per run. The goals are set relative to the single-request
    TPOT of the same cost model (2x and 1.3x), so the test does not depend on its coefficients."""
    from simkit.costmodel import load_cost_model
    from simkit.engine.config import parse_configs
    from simkit.engine.sim import ClosedLoop, simulate
    from simkit.whatif.capacity import Goals, max_sustainable_rates
    from simkit.engine.runner import engine_config

    cost = load_cost_model(BIG, "h200")
    specs = parse_configs("vanilla,kpad:4")
    alone = simulate(workload, cost, engine_config(cost), specs[0], load=ClosedLoop(1),
                     num_requests=8).metrics.tpot_ms_p99
    loose_goals, tight_goals = Goals(1000, 2.0 * alone), Goals(1000, 1.3 * alone)

    def searches():                  # once per pytest run, whichever workers these tests land on
        return (max_sustainable_rates(workload, cost, specs, loose_goals, **SEARCH),
                max_sustainable_rates(workload, cost, specs, tight_goals, **SEARCH))

    loose, tight = once_per_run("capacity-search", searches)
    return cost, specs, loose, tight, loose_goals, tight_goals


# the tests of the capacity searches (once per run) on one xdist worker, in turn: none waits on
# the run lock while another worker searches
CAPACITY_WORKER = pytest.mark.xdist_group("capacity-search")


@CAPACITY_WORKER
def test_capacity_tighter_goal_never_allows_more_rate(capacity_search):
    _, _, loose, tight, lg, tg = capacity_search
    for lo, ti in zip(loose, tight):
        assert lo["converged"] and lo["binding"] in ("tpot", "ttft"), lo
        assert ti["converged"] and ti["binding"] in ("tpot", "ttft"), ti
        assert ti["max_rate_per_replica"] < lo["max_rate_per_replica"], (lo, ti)
        assert lo["tpot_ms_p99"] <= lg.tpot_ms_p99 and lo["ttft_ms_p99"] <= lg.ttft_ms_p99
        assert ti["tpot_ms_p99"] <= tg.tpot_ms_p99


@CAPACITY_WORKER
def test_capacity_answer_meets_goals_and_next_step_fails(capacity_search, workload):
    """Re-simulate at the answer (must pass) and at the bracket's upper side (must fail)."""
    from simkit.engine.sim import OpenLoop, simulate
    from simkit.whatif.capacity import Goals, requests_for
    from simkit.engine.runner import engine_config
    from simkit.whatif.common import mean_output_tokens

    cost, specs, loose, _, goals, _ = capacity_search
    cfg = engine_config(cost)
    mean_out = mean_output_tokens(workload)
    for spec, row in zip(specs, loose):
        r = row["max_rate_per_replica"]
        n, fits = requests_for(r, goals, mean_out, span_factor=3.0, min_requests=64,
                               max_requests=SEARCH["max_requests"])
        assert fits and n == row["requests"]
        m = simulate(workload, cost, cfg, spec, load=OpenLoop(rate=r), seed=0,
                     num_requests=n).metrics
        assert m.tpot_ms_p99 <= goals.tpot_ms_p99 and m.ttft_ms_p99 <= goals.ttft_ms_p99
        hi = row["failed_rate"]
        assert r < hi <= r * (1 + SEARCH["rel_tol"]) * 1.0001
        n2, fits2 = requests_for(hi, goals, mean_out, span_factor=3.0, min_requests=64,
                                 max_requests=SEARCH["max_requests"])
        assert fits2
        m2 = simulate(workload, cost, cfg, spec, load=OpenLoop(rate=hi), seed=0,
                      num_requests=n2).metrics
        assert not (m2.tpot_ms_p99 <= goals.tpot_ms_p99 and m2.ttft_ms_p99 <= goals.ttft_ms_p99)


@CAPACITY_WORKER
def test_capacity_replicas_monotone_in_target(workload, capacity_search, tmp_path):
    from simkit.whatif.capacity import capacity, plot

    goals = capacity_search[4]
    kw = dict(configs="vanilla", goals=goals, min_requests=64, max_requests=600, rel_tol=0.2,
              workload=workload)
    big_h200 = run(BIG, hardware="h200", workers=2)
    small = capacity(big_h200, target_rate=5.0, **kw)
    big = capacity(big_h200, target_rate=200.0, **kw)
    tok = capacity(big_h200, target_tok_s=200.0 * small.params["mean_output_tokens"], **kw)
    r_small, r_big, r_tok = small.rows[0], big.rows[0], tok.rows[0]
    assert r_small["replicas"] >= 1 and r_big["replicas"] > r_small["replicas"]
    assert r_big["replicas"] == math.ceil(200.0 / r_big["max_rate_per_replica"] - 1e-9)
    assert r_tok["replicas"] == r_big["replicas"]          # same traffic stated in tok/s
    assert r_big["gpus"] == r_big["replicas"] * big.params["tp"] == r_big["replicas"] * 2
    plot(big, tmp_path / "cap.png")
    assert (tmp_path / "cap.png").stat().st_size > 1000


def test_capacity_needs_exactly_one_target(workload):
    from simkit.errors import InputError
    from simkit.whatif.capacity import capacity

    with pytest.raises(InputError):
        capacity(run(), workload=workload)
    with pytest.raises(InputError):
        capacity(run(), target_rate=1.0, target_tok_s=1.0, workload=workload)


# -- host ------------------------------------------------------------------------------------
def test_faster_host_never_lowers_throughput_and_sync_spec_is_more_host_bound(workload):
    from simkit.whatif.host import host

    res = host(run(hardware="b200", num_requests=96, workers=2), factors="0.5,1,2,4",
               configs="vanilla,suffix,kpad:4", workload=workload)
    for name in ("vanilla", "suffix", "kpad-4"):
        series = sorted((r["host_factor"], r["output_tok_s"]) for r in res.rows
                        if r["config"] == name)
        assert [f for f, _ in series] == [0.5, 1.0, 2.0, 4.0]
        tputs = [t for _, t in series]
        assert all(b >= a for a, b in zip(tputs, tputs[1:])), (name, tputs)
    el = {s["config"]: s["elasticity_1_to_2"] for s in res.extra["summary"]}
    # vanilla overlaps its host work with the GPU (async scheduling); suffix/K-pad cannot
    assert el["kpad-4"] > el["vanilla"] and el["suffix"] > el["vanilla"]
    assert any("HOST-BOUND" in n or "device-bound" in n for n in res.notes)


# -- quantization ----------------------------------------------------------------------------
def test_acceptance_scale_one_is_identity_and_lower_scale_lowers_acceptance(workload):
    from simkit.drafters.base import get_drafter
    from simkit.whatif.quantization import scale_acceptance

    same = scale_acceptance(workload, 1.0)
    for name, tab in workload.tables.items():
        assert np.array_equal(same.tables[name].accepted, tab.accepted)
        low = scale_acceptance(workload, 0.5).tables[name]
        assert (low.accepted <= tab.accepted).all()
        # accepted <= drafted, or <= K where filler slots are verified too (suffix_gpu)
        fills = get_drafter(name).fills_k_slots
        assert (low.accepted <= (np.arange(1, tab.kmax + 1) if fills else low.drafted)).all()
        ratio = low.accepted.sum() / max(1, tab.accepted.sum())
        assert 0.45 < ratio < 0.55                      # unbiased stochastic rounding


def test_quantization_moves_throughput_the_expected_way(workload, tmp_path):
    from simkit.whatif.quantization import CAUTION, plot, quantization

    res = quantization(run("llama-3.1-70b", hardware="b200", num_requests=96, workers=2),
                       acceptance_scale=0.7, configs="vanilla,kpad:4", workload=workload)
    rows = {r["config"]: r for r in res.rows}
    # less weight traffic and faster GEMMs: vanilla (no acceptance involved) speeds up
    assert rows["vanilla"]["gain_arithmetic"] > 0
    assert rows["vanilla"]["w4a4_tok_s"] == rows["vanilla"]["w4a4_same_acceptance_tok_s"]
    # lower acceptance costs the speculative config throughput against the same arithmetic
    assert rows["kpad-4"]["w4a4_tok_s"] < rows["kpad-4"]["w4a4_same_acceptance_tok_s"]
    assert rows["kpad-4"]["mean_accepted_w4a4"] < rows["kpad-4"]["mean_accepted_base"]
    assert res.params["kv_capacity_w4a4"] > res.params["kv_capacity_base"]
    assert res.notes[0] == CAUTION
    plot(res, tmp_path / "q.png")
    assert (tmp_path / "q.png").stat().st_size > 1000


def test_quantized_cost_model_scales_only_linear_layers():
    from simkit.costmodel import load_cost_model
    from simkit.costmodel.batch import BatchDescriptor, GraphMode
    from simkit.whatif.quantization import default_factors, quantized_cost_model

    base = load_cost_model("llama-3.1-70b", "b200")
    wbf, fs = default_factors(base)
    assert wbf == pytest.approx(0.5625 / 2) and fs == pytest.approx(9000 / 2250)
    h200 = load_cost_model("llama-3.1-70b", "h200")
    assert default_factors(h200)[1] == 1.0                   # no FP4 tensor cores
    q = quantized_cost_model(base)
    decode = BatchDescriptor(num_reqs=32, num_tokens=32, num_padded_tokens=32,
                             num_prefill_tokens=0, num_prefill_reqs=0, num_decode_reqs=32,
                             num_spec_tokens=0, num_pad_drafts=0, num_drafting_reqs=0,
                             context_tokens=32 * 2000, graph_mode=GraphMode.FULL,
                             async_scheduling=True, drafter="none")
    assert q.device_time(decode) < base.device_time(decode)
    assert q.host_time(decode).total == pytest.approx(base.host_time(decode).total)
    same = quantized_cost_model(base, 1.0, 1.0)
    assert same.step_cost(decode).step_s == pytest.approx(base.step_cost(decode).step_s)


# -- concurrency -----------------------------------------------------------------------------
def test_stops_paying_needs_every_later_point_at_or_below_vanilla():
    from simkit.whatif.concurrency import stops_paying

    rows = [{"config": "k", "concurrency": c, "speedup_vs_vanilla": s}
            for c, s in ((1, 2.0), (8, 0.9), (32, 1.1), (64, 0.95), (128, 0.8))]
    assert stops_paying(rows, "k") == 64
    assert stops_paying(rows[:3], "k") is None


def test_concurrency_throughput_rises_and_speculation_pays_less_at_high_load(workload, tmp_path):
    from simkit.whatif.concurrency import concurrency, plot

    res = concurrency(run(workers=2), levels="1,8,64", configs="vanilla,kpad:4",
                      min_requests=24, workload=workload)
    van = [r["output_tok_s"] for r in res.rows if r["config"] == "vanilla"]
    assert van[0] < van[1] < van[2]
    sp = [r["speedup_vs_vanilla"] for r in res.rows if r["config"] == "kpad-4"]
    assert sp[0] > 1.0 and sp[0] > sp[2]
    assert "kpad-4" in res.extra["stops_paying"]
    plot(res, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_concurrency_at_a_level_prints_what_predict_prints_there(workload):
    """At C=32 the what-if runs the requests predict runs at 32, so the two commands give
    the same figures and cannot name opposite configurations (with 4 x C the what-if drew 128
    requests of the mix and contradicted predict)."""
    from simkit.app.predict import predict
    from simkit.whatif.concurrency import concurrency

    res = concurrency(run(workers=2), levels="32", configs="vanilla,suffix", workload=workload)
    pred = predict(run(workers=2, concurrency=32), configs="vanilla,suffix")
    what = {r["config"]: r["output_tok_s"] for r in res.rows}
    said = {r.config: r.output_tok_s for r in pred.rows}
    assert what == said


# -- hardware --------------------------------------------------------------------------------
def test_hardware_bandwidth_order_at_fixed_tp(workload, tmp_path):
    from simkit.whatif.hardware import hardware, plot

    res = hardware(run(num_requests=96, workers=2), targets="h100,h200,b200", tps="1",
                   configs="vanilla,kpad:4", workload=workload)
    van = {r["hardware"]: r["output_tok_s"] for r in res.rows if r["config"] == "vanilla"}
    assert van["h100"] < van["h200"] < van["b200"]
    assert all(r["tp"] == 1 for r in res.rows)
    plot(res, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000


# -- CLI -------------------------------------------------------------------------------------
def test_cli_json_and_plot(workload, tmp_path):
    from simkit.cli import app

    png = tmp_path / "host.png"
    out = CliRunner().invoke(app, ["whatif", "host", "--model", MODEL, "--factors", "1,2",
                                   "--configs", "vanilla,kpad:4", "--num-requests", "64",
                                   "--workers", "2", "--format", "json", "--plot", str(png)])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)             # stderr says where the plot went
    assert doc["whatif"] == "host" and list(doc["rows"][0]) == doc["columns"]
    assert {r["config"] for r in doc["rows"]} == {"vanilla", "kpad-4"}
    assert png.stat().st_size > 1000 and out.stderr.splitlines() == [f"wrote {png}"]
    table = CliRunner().invoke(app, ["whatif", "quantization", "--num-requests", "48",
                                     "--configs", "vanilla,kpad:4", "--workers", "2"])
    assert table.exit_code == 0, table.output
    assert "CAUTION" in table.output and "output-equivalence gate" in table.output


def test_cli_bad_format_is_one_line_error_exit_2():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "simkit", "whatif", "host", "--format", "xml"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "'xml' is not one of 'table', 'json'" in proc.stderr and "Traceback" not in proc.stderr


def test_quant_corpus_route_replays_that_corpus(workload):
    """--quant-corpus replays the named corpus' tables: naming the base corpus itself must give
    exactly the arithmetic-only figures."""
    from simkit.whatif.quantization import quantization

    res = quantization(run(hardware="b200", num_requests=48, workers=2), quant_corpus=CORPUS,
                       configs="vanilla,kpad:4", workload=workload)
    for r in res.rows:
        assert r["w4a4_tok_s"] == r["w4a4_same_acceptance_tok_s"]
    assert res.params["acceptance_scale"] is None and res.params["quant_corpus"] == CORPUS


def test_whatif_json_is_byte_identical_across_worker_counts(workload):
    from simkit.whatif.host import host

    docs = [json.dumps(host(run(num_requests=48, workers=w), factors="1,2",
                            configs="vanilla,kpad:4", workload=workload).to_json_dict())
            for w in (1, 2)]
    assert docs[0] == docs[1]
