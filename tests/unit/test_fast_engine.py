"""The compiled engine loop (simkit.engine.fast) returns, float for float, what the SimPy loop
over simkit.engine.scheduler (the reference) returns: RunResult, metrics, other windows,
prefix-cache figures and kept trajectories, on the shipped profiles the goldens run (every
configuration of the default ladder, vLLM 0.26 and 0.33, prefix caching on and off, the hot
history, preemption) and on random small workloads. Each case also checks the compiled loop
really ran (a run it refuses would compare the reference with itself)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_doubles import LinearCost, patterned_table
from simkit.block_hash import pack, prompt_block_hashes
from simkit.engine import fast
from simkit.engine.config import DEFAULT_CONFIGS, EngineConfig, parse_configs
from simkit.engine.fast import loop as fast_run
from simkit.engine.sim import ClosedLoop, OpenLoop, simulate
from simkit.engine.workload import Workload


def _same(a, b, path: str = "result") -> None:
    """Assert a == b, recursing into dataclasses, dicts and arrays (NaN equals NaN)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), path
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


@pytest.fixture
def compiled_runs(monkeypatch):
    """Counts the runs the compiled loop finished (returned a result for)."""
    done = []
    real = fast_run.run

    def spy(*args, **kw):
        out = real(*args, **kw)
        if out is not None:
            done.append(out)
        return out

    monkeypatch.setattr(fast_run, "run", spy)
    return done


def _both(monkeypatch, *args, **kw):
    """(reference, compiled) results of one simulate call."""
    monkeypatch.setenv(fast.ENV, "reference")
    ref = simulate(*args, **kw)
    monkeypatch.delenv(fast.ENV)
    return ref, simulate(*args, **kw)


def _shipped(corpus: str, version: str, history: str | None = None):
    from simkit.app.cells import load_cell
    from simkit.app.options import RunOptions
    from simkit.choices import ProfileSource
    from simkit.history import parse_history

    return load_cell(RunOptions("llama-3.1-8b", corpus, source=ProfileSource.SHIPPED,
                                vllm_version=version,
                                history=parse_history(history) if history else None))


def _cell_run(monkeypatch, workload, cost, cfg, spec, **kw):
    from simkit.engine.runner import history_cached_prefixes, history_repeated

    kw.setdefault("cached_prefixes", history_cached_prefixes(workload, cfg))
    kw.setdefault("repeat_prompts", history_repeated(workload, cfg))
    return _both(monkeypatch, workload, cost, cfg, spec, **kw)


@pytest.mark.parametrize("version", ["0.26", "0.33"])
def test_default_ladder_on_mix_equals_the_reference(monkeypatch, compiled_runs, version):
    from simkit.engine.runner import engine_config

    workload, cost = _shipped("mix", version)
    cfg = engine_config(cost)
    specs = parse_configs(DEFAULT_CONFIGS)
    for spec in specs:
        ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec, load=ClosedLoop(32),
                             seed=1, num_requests=256)
        _same(ref, new, spec.name)
        assert ref.prefix["modelled"] and ref.metrics.window_kind == "steady"
    assert len(compiled_runs) == len(specs)          # dynamic-goodput priced in the loop too


def test_no_prefix_caching_short_runs_and_ngram(monkeypatch, compiled_runs):
    from simkit.engine.runner import engine_config

    workload, cost = _shipped("code", "0.26")
    cfg = engine_config(cost, prefix_caching=False)
    specs = parse_configs("vanilla,suffix:8,ngram,ngram-kpad:4,dynamic-feedback:4,8")
    for seed in (0, 1):
        for spec in specs:
            ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec, load=ClosedLoop(32),
                                 seed=seed, num_requests=40)
            _same(ref, new, spec.name)
            assert ref.prefix is None
    assert len(compiled_runs) == 2 * len(specs)


def test_hot_history_and_preemption(monkeypatch, compiled_runs):
    from simkit.engine.runner import engine_config

    workload, cost = _shipped("mix", "0.26", "hot")
    specs = parse_configs("vanilla,suffix,kpad:4,dynamic-table")
    cfg = engine_config(cost)
    preempted = 0
    for spec in specs:
        ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec, load=ClosedLoop(32),
                             seed=2, num_requests=192)
        _same(ref, new, spec.name)
        assert ref.prefix["preloaded_blocks"] > 0
        # a KV cache a few requests wide: requests are preempted and resume on cached blocks
        small = dataclasses.replace(cfg, kv_capacity_tokens=16_000)
        ref, new = _cell_run(monkeypatch, workload, cost, small, spec, load=ClosedLoop(32),
                             seed=2, num_requests=192)
        _same(ref, new, spec.name + " small KV")
        preempted += ref.metrics.preemptions
    assert preempted > 0
    assert len(compiled_runs) == 2 * len(specs)


def test_other_windows_and_kept_trajectories(monkeypatch, compiled_runs):
    from simkit.engine.runner import engine_config

    workload, cost = _shipped("mix", "0.33")
    cfg = engine_config(cost)
    for conc in (4, 16, 64):
        for spec in parse_configs("vanilla,kpad:4"):
            ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec, load=ClosedLoop(conc),
                                 seed=0, num_requests=160, window_start_completion=1,
                                 other_window_starts=(conc, 2 * conc), capture=True)
            assert ref.trajectory is not None and len(ref.other_windows) == 2
            _same(ref, new, f"{spec.name} c{conc}")
    assert len(compiled_runs) == 6


def test_open_loop_runs_equal_the_reference(monkeypatch, compiled_runs):
    """predict --request-rate (capped outputs extended) and the capacity search's rates."""
    from simkit.app.cells import load_cell
    from simkit.app.options import RunOptions
    from simkit.choices import CappedMode, ProfileSource
    from simkit.engine.runner import engine_config

    workload, cost = load_cell(RunOptions("qwen2.5-7b", "chat", source=ProfileSource.SHIPPED,
                                          vllm_version="0.26",
                                          capped_outputs=CappedMode.EXTEND))
    cfg = engine_config(cost)
    specs = parse_configs("vanilla,kpad:4,dynamic")
    for spec in specs:
        for rate in (6.0, 40.0):
            ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec,
                                 load=OpenLoop(rate=rate), seed=1, num_requests=96)
            _same(ref, new, f"{spec.name} at {rate}")
    workload, cost = _shipped("chat", "0.33")
    cfg = engine_config(cost)
    for spec in parse_configs("vanilla,suffix"):
        for rate in (10.0, 27.5, 80.0):
            ref, new = _cell_run(monkeypatch, workload, cost, cfg, spec,
                                 load=OpenLoop(rate=rate), seed=0, num_requests=300)
            _same(ref, new, f"{spec.name} at {rate}")
    assert len(compiled_runs) == 2 * len(specs) + 6


def test_refused_runs_fall_back(monkeypatch, compiled_runs):
    """What the compiled loop was not proven on runs the reference loop, unchanged: the
    goodput policy under a cost model it cannot price, kept step logs."""
    w = Workload.from_table(patterned_table([40, 70, 20], [12, 30, 9], 3))
    cfg = EngineConfig(kv_capacity_tokens=4096)
    goodput = parse_configs("dynamic-goodput:2,5")[0]
    ref, new = _both(monkeypatch, w, LinearCost(), cfg, goodput, load=ClosedLoop(2))
    _same(ref, new)
    ref, new = _both(monkeypatch, w, LinearCost(), cfg, parse_configs("kpad:4")[0],
                     load=ClosedLoop(2), keep_steps=True)
    assert new.step_log is not None
    _same(ref, new)
    assert compiled_runs == []
    from simkit.engine.scheduler import Scheduler

    def sched(c, s, **over):
        real = Scheduler(c, s, w, LinearCost())
        for name, value in over.items():
            setattr(real, name, value)
        return real

    assert fast.refusal(cfg, goodput, sched(cfg, goodput)) is None
    assert fast.refusal(cfg, goodput, sched(cfg, goodput, in_loop=object())) is not None
    v026 = dataclasses.replace(cfg, vllm_version="0.26")
    assert fast.refusal(v026, goodput, sched(v026, goodput)) is None
    # a method the version runs on Model Runner V2 (0.33's n-gram) is the reference loop's
    ngram = parse_configs("ngram:3")[0]
    wn = Workload(w.prompt_len, w.output_len, {"ngram": w.tables["suffix"]}, name="n")
    assert "Model Runner V2" in fast.refusal(cfg, ngram, Scheduler(cfg, ngram, wn, LinearCost()))
    assert fast.refusal(v026, ngram, Scheduler(v026, ngram, wn, LinearCost())) is None


CONFIGS = {c.name: c for c in parse_configs(
    "vanilla,suffix:4,kpad:3,8,dynamic-feedback:2,5,dynamic-table:2,5,dynamic-goodput:2,5,"
    "ngram:3")}


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 10))
    prompts = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**16))
    shared = draw(st.integers(0, 64))          # a common prompt header: prefix-cache hits
    tokens = [np.r_[np.arange(min(shared, p)), 1000 * (r + 1) + np.arange(p - min(shared, p))]
              for r, p in enumerate(prompts)]
    return Workload(np.asarray(prompts, np.int32), np.asarray(outputs, np.int32),
                    {"suffix": patterned_table(prompts, outputs, seed),
                     "ngram": patterned_table(prompts, outputs, seed + 1)},
                    name="t", block_hashes=pack(prompt_block_hashes(t) for t in tokens))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 8),
       blocks=st.integers(12, 200), budget=st.sampled_from([32, 256, 8192]),
       seed=st.integers(0, 5), caching=st.booleans(), repeat=st.sampled_from([0, 1, 2]),
       preload=st.integers(0, 3), cudagraph=st.sampled_from(["FULL_AND_PIECEWISE", "NONE",
                                                             "PIECEWISE", "FULL"]),
       version=st.sampled_from(["0.26", "0.33"]), max_len=st.sampled_from([16384, 150]),
       arrivals=st.sampled_from([None, "poisson", "stamps"]), rate=st.floats(0.5, 400.0))
def test_random_workloads_equal_the_reference(w, name, conc, blocks, budget, seed, caching,
                                              repeat, preload, cudagraph, version, max_len,
                                              arrivals, rate):
    from simkit.engine.cudagraph import CudagraphMode

    mp = pytest.MonkeyPatch()
    try:
        spec = CONFIGS[name]
        cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                           max_num_seqs=16, prefix_caching=caching, max_model_len=max_len,
                           cudagraph_mode=CudagraphMode(cudagraph), vllm_version=version)
        chains = w.hash_chains()
        kw = dict(load=ClosedLoop(conc), seed=seed, num_requests=3 * w.num_requests,
                  window_start_completion=1, other_window_starts=(conc, 2), capture=True)
        cost = LinearCost(host_s=2e-4, piecewise_s=1e-4) if seed % 2 else _cost_models()[seed % 5]
        if arrivals is not None:           # arrivals read the clock: priced in the loop
            cost = _cost_models()[seed % 5]
            stamps = None
            if arrivals == "stamps":       # repeated stamps and time 0: requests arrive together
                stamps = tuple(float(x) for x in
                               np.round(np.cumsum(np.arange(3 * w.num_requests) % 3) / rate, 2))
            kw = dict(load=OpenLoop(rate=rate, timestamps=stamps), seed=seed,
                      num_requests=3 * w.num_requests)
        if caching:
            kw["cached_prefixes"] = chains[:preload] or None
            kw["repeat_prompts"] = (False, True, frozenset(range(0, w.num_requests, 2)))[repeat]
        calls = []
        real = fast_run.run
        mp.setattr(fast_run, "run", lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
        mp.setenv(fast.ENV, "reference")
        try:
            ref = simulate(w, cost, cfg, spec, **kw)
        except Exception as exc:          # the compiled loop must refuse the same way
            mp.delenv(fast.ENV)
            with pytest.raises(type(exc)):
                simulate(w, cost, cfg, spec, **kw)
            return
        mp.delenv(fast.ENV)
        new = simulate(w, cost, cfg, spec, **kw)
        _same(ref, new, name)
        if name.startswith("ngram") and version == "0.33":
            # 0.33 runs n-gram on Model Runner V2 with async scheduling: the reference loop's
            assert not calls
            return
        # goodput prices candidates in the loop: only under a cost model the loop can price
        assert calls and (calls[-1] is None) == (name.startswith("dynamic-goodput")
                                                  and isinstance(cost, LinearCost))
    finally:
        mp.undo()


_PRICED = {}


def _cost_models():
    """Cost models whose constants exercise every branch of the price: dense and MoE (exp),
    sliding-window attention, analytic and calibrated (dispatch terms), vLLM 0.26 and 0.33."""
    if not _PRICED:
        from simkit.costmodel import load_cost_model

        for model, hw, version in (("llama-3.1-8b", "h200", "0.26"), ("llama-3.1-8b", "h200", "0.33"),
                                   ("qwen2.5-7b", "h200", "0.33"), ("deepseek-r1", "b200", None),
                                   ("k-exaone-236b", "h100", None)):
            _PRICED[(model, hw, version)] = load_cost_model(model, hw, vllm_version=version)
    return list(_PRICED.values())


@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, 4), reqs=st.integers(0, 300), spec=st.integers(0, 2000),
       extra=st.integers(0, 9000), ctx=st.integers(0, 2_000_000), pre=st.integers(0, 8192),
       pre_reqs=st.integers(0, 50), mode=st.integers(0, 2), acc=st.integers(0, 500),
       nd=st.integers(0, 300), asy=st.booleans(),
       drafter=st.sampled_from(["none", "suffix", "ngram"]))
def test_compiled_price_equals_step_cost(which, reqs, spec, extra, ctx, pre, pre_reqs, mode,
                                         acc, nd, asy, drafter):
    from simkit.costmodel.batch import BatchDescriptor, GraphMode
    from simkit.engine.fast import kernel
    from simkit.engine.fast.pricing import constants

    cost = _cost_models()[which]
    consts = constants(cost, drafter)
    assert consts is not None
    ntok = reqs + spec + pre
    padded = ntok + extra
    gm = (GraphMode.FULL, GraphMode.PIECEWISE, GraphMode.NONE)[mode]
    ref = cost.step_cost(BatchDescriptor(reqs, ntok, padded, pre, pre_reqs, reqs - pre_reqs, spec,
                                         0, nd, ctx, gm, asy, drafter, acc))
    dev, step = kernel.price(consts, padded, reqs, spec, ntok, ctx, pre, pre_reqs, mode, acc, nd,
                             asy)
    assert (dev, step) == (ref.device_s, ref.step_s)


def test_compiled_price_refuses_other_cost_models():
    from simkit.engine.fast.pricing import constants

    assert constants(LinearCost(), "suffix") is None
    cost = _cost_models()[0]

    class Wrapped:
        def step_cost(self, b):
            return cost.step_cost(b)

    assert constants(Wrapped(), "suffix") is None and constants(cost, "no-such") is None


@pytest.mark.parametrize("caching", [True, False])
def test_fleet_replica_equals_its_simpy_loop(monkeypatch, caching):
    """simkit.fleet.sim.run_replica takes the compiled loop: the same ReplicaRun."""
    from simkit.engine.runner import engine_config
    from simkit.fleet import sim as fleet_sim
    from simkit.fleet.sim import run_replica

    workload, cost = _shipped("chat", "0.33")
    cfg = engine_config(cost, prefix_caching=caching)
    times = np.cumsum(np.random.default_rng(3).exponential(1 / 12.0, workload.num_requests))
    calls: list = []
    real = fleet_sim.compiled_replica
    monkeypatch.setattr(fleet_sim, "compiled_replica",
                        lambda *a: calls.append(real(*a)) or calls[-1])
    for spec in parse_configs("vanilla,suffix,dynamic-goodput"):
        calls.clear()
        monkeypatch.setenv(fast.ENV, "reference")
        ref = run_replica(workload, cost, cfg, spec, times)
        monkeypatch.delenv(fast.ENV)
        new = run_replica(workload, cost, cfg, spec, times)
        assert calls[0] is None and calls[1] is not None
        _same(ref, new, spec.name)
