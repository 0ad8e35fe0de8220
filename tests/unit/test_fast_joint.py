"""The fleet's load-aware joint run (simkit.fleet.sim.run_joint: N replicas on one clock, each
arrival to the replica with the fewest outstanding requests) on the compiled engine loop
(simkit.engine.fast.joint) returns, field for field, what its SimPy run returns: the replica
of every request and each replica's ReplicaRun (metrics, latencies, served requests, prefix
counts, accepted drafts, decode steps). Each case checks that the compiled run really ran (a
run it refuses would compare the reference with itself)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkit.engine import fast
from simkit.engine.config import EngineConfig, parse_configs
from simkit.fleet import sim as fleet_sim
from test_fast_engine import CONFIGS, _cost_models, _same, _shipped, workloads


def _spy(mp) -> list:
    """The results compiled_joint returned, in call order (None: it refused)."""
    calls: list = []
    real = fleet_sim.compiled_joint
    mp.setattr(fleet_sim, "compiled_joint", lambda *a: calls.append(real(*a)) or calls[-1])
    return calls


def _joint_both(mp, workload, cost, cfg, spec, times, replicas):
    """(reference, compiled) results of one run_joint call."""
    mp.setenv(fast.ENV, "reference")
    ref = fleet_sim.run_joint(workload, cost, cfg, spec, times, replicas)
    mp.delenv(fast.ENV)
    return ref, fleet_sim.run_joint(workload, cost, cfg, spec, times, replicas)


def _times(n: int, rate: float, seed: int) -> list[float]:
    return np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n)).tolist()


@pytest.mark.parametrize("caching", [True, False])
def test_shipped_fleets_equal_the_reference(monkeypatch, caching):
    """1-4 replicas of the default ladder's kinds on the shipped chat profile, a fleet the
    traffic overloads, and a KV cache a few requests wide (preemptions)."""
    from simkit.engine.runner import engine_config

    workload, cost = _shipped("chat", "0.33")
    cfg = engine_config(cost, prefix_caching=caching)
    calls = _spy(monkeypatch)
    n = workload.num_requests
    cases = [(spec, r, _times(n, 9.0 * r, r), cfg)
             for spec in parse_configs("vanilla,suffix,kpad:4,dynamic") for r in (1, 2, 3, 4)]
    cases.append((parse_configs("suffix")[0], 2, _times(n, 400.0, 7), cfg))        # overloaded
    small = dataclasses.replace(cfg, kv_capacity_tokens=24_000)
    cases += [(spec, 2, _times(n, 30.0, 5), small) for spec in parse_configs("vanilla,suffix")]
    preempted = all_used = 0
    kinds = set()
    for spec, replicas, times, c in cases:
        calls.clear()
        ref, new = _joint_both(monkeypatch, workload, cost, c, spec, times, replicas)
        assert calls[0] is None and calls[1] is not None, spec.name     # the compiled run ran
        _same(ref, new, f"{spec.name} x{replicas}")
        all_used += len(set(ref[0].tolist())) == replicas
        preempted += sum(r.metrics.preemptions for r in ref[1] if r is not None)
        kinds |= {r.metrics.window_kind for r in ref[1] if r is not None}
        assert all(r.prefix["modelled"] == caching for r in ref[1] if r is not None)
    assert all_used == len(cases) and preempted > 0
    assert "steady" in kinds and len(kinds) > 1                  # the overloaded fleet's windows


def test_equal_arrival_times_are_routed_before_a_replica_wakes(monkeypatch):
    """Requests arriving at one instant (time 0 among them) are all routed, each reading the
    others' outstanding counts, before an idle replica starts its step."""
    workload, cost = _shipped("chat", "0.33")
    from simkit.engine.runner import engine_config

    cfg = engine_config(cost)
    n = workload.num_requests
    calls = _spy(monkeypatch)
    # groups of five, the first at 0: every 0.25 s (busy replicas) and every 30 s (each group
    # finds the replicas idle: two of a group's requests wake one replica, and start together)
    for gap in (0.25, 30.0):
        times = [float(i // 5) * gap for i in range(n)]
        for replicas in (3, 4):
            calls.clear()
            ref, new = _joint_both(monkeypatch, workload, cost, cfg, parse_configs("suffix")[0],
                                   times, replicas)
            assert calls[1] is not None
            _same(ref, new)
            first = [r % replicas for r in range(5)]
            assert ref[0][:10].tolist()[:5 if gap < 1 else 10] == first * (1 if gap < 1 else 2)


def test_an_arrival_at_a_step_end_runs_the_reference(monkeypatch):
    """SimPy orders an arrival and a step end at the same instant by its event ids: the
    compiled run refuses it and run_joint's SimPy loop runs it, with the same figures."""
    workload, cost = _shipped("chat", "0.33")
    from simkit.engine.runner import engine_config

    cfg = engine_config(cost)
    spec = parse_configs("vanilla")[0]
    n = workload.num_requests
    # the end of the first step (two requests from time 0), to the last bit
    _, rec = fleet_sim.compiled_replica(workload, cost, cfg, spec, [0.0, 0.0] + [1e6] * (n - 2))
    end = float(rec.step_end[0])
    times = [0.0, 0.0] + [end] * (n - 2)
    later = [0.0, 0.0] + [end + 1e-3] * (n - 2)
    assert fleet_sim.compiled_joint(workload, cost, cfg, spec, later, 1) is not None
    calls = _spy(monkeypatch)
    ref, new = _joint_both(monkeypatch, workload, cost, cfg, spec, times, 1)
    assert calls == [None, None]
    _same(ref, new)


def test_refused_joint_runs_fall_back(monkeypatch):
    """SIMKIT_ENGINE_LOOP=reference, a configuration simulate's compiled loop refuses, times
    going back: the SimPy run."""
    workload, cost = _shipped("chat", "0.33")
    from simkit.engine.runner import engine_config

    cfg = engine_config(cost)
    spec = parse_configs("suffix")[0]
    times = _times(workload.num_requests, 20.0, 1)
    monkeypatch.setenv(fast.ENV, "reference")
    assert fleet_sim.compiled_joint(workload, cost, cfg, spec, times, 2) is None
    monkeypatch.delenv(fast.ENV)
    assert fleet_sim.compiled_joint(workload, cost, cfg, spec, times, 2) is not None
    assert fleet_sim.compiled_joint(workload, cost, cfg, spec, times[::-1], 2) is None
    v034 = dataclasses.replace(cfg, vllm_version="0.34")
    assert fleet_sim.compiled_joint(workload, cost, v034, spec, times, 2) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), replicas=st.integers(1, 4),
       blocks=st.integers(12, 200), budget=st.sampled_from([32, 256, 8192]),
       seed=st.integers(0, 5), caching=st.booleans(),
       cudagraph=st.sampled_from(["FULL_AND_PIECEWISE", "NONE", "PIECEWISE", "FULL"]),
       version=st.sampled_from(["0.26", "0.33"]), max_len=st.sampled_from([16384, 150]),
       stamps=st.booleans(), rate=st.floats(0.5, 400.0))
def test_random_fleets_equal_the_reference(w, name, replicas, blocks, budget, seed, caching,
                                           cudagraph, version, max_len, stamps, rate):
    from simkit.engine.cudagraph import CudagraphMode

    mp = pytest.MonkeyPatch()
    try:
        spec = CONFIGS[name]
        cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                           max_num_seqs=16, prefix_caching=caching, max_model_len=max_len,
                           cudagraph_mode=CudagraphMode(cudagraph), vllm_version=version)
        cost = _cost_models()[seed % 5]
        n = w.num_requests
        if stamps:                         # repeated stamps and time 0: requests arrive together
            times = [float(x) for x in np.round(np.cumsum(np.arange(n) % 3) / rate, 2)]
        else:
            times = _times(n, rate, seed)
        calls = _spy(mp)
        mp.setenv(fast.ENV, "reference")
        try:
            ref = fleet_sim.run_joint(w, cost, cfg, spec, times, replicas)
        except Exception as exc:          # the compiled run must fail the same way
            mp.delenv(fast.ENV)
            with pytest.raises(type(exc)):
                fleet_sim.run_joint(w, cost, cfg, spec, times, replicas)
            return
        mp.delenv(fast.ENV)
        new = fleet_sim.run_joint(w, cost, cfg, spec, times, replicas)
        _same(ref, new, name)
        if name.startswith("ngram") and version == "0.33":
            assert calls[-1] is None       # Model Runner V2 with async scheduling: reference
        elif fleet_sim.usable(w, cfg).all():
            assert calls[-1] is not None   # every other fleet ran compiled
    finally:
        mp.undo()


def test_full_output_buffers_are_handed_over(monkeypatch):
    """The engine hands over its step, price and gap buffers whenever one fills (FLUSH): with
    buffers a few rows long, simulate's closed and open loops and a joint fleet still equal the
    reference."""
    from simkit.engine.fast import kernel
    from simkit.engine.runner import engine_config
    from simkit.engine.sim import ClosedLoop, OpenLoop, simulate

    workload, cost = _shipped("chat", "0.33")
    cfg = dataclasses.replace(engine_config(cost), max_num_seqs=8)
    flushes = []
    real = kernel.Outputs.flush
    monkeypatch.setattr(kernel.Outputs, "flush", lambda self, ctl: flushes.append(
        (int(ctl[kernel.C_STEPS]), int(ctl[kernel.C_GAPS]))) or real(self, ctl))
    monkeypatch.setattr(kernel, "STEP_ROWS", 5)
    monkeypatch.setattr(kernel, "GAP_ROWS", 1)      # the floor: 4 steps' worth of gaps
    spec = parse_configs("suffix")[0]
    for load in (ClosedLoop(8), OpenLoop(rate=20.0)):
        monkeypatch.setenv(fast.ENV, "reference")
        ref = simulate(workload, cost, cfg, spec, load=load, seed=0, num_requests=64)
        monkeypatch.delenv(fast.ENV)
        flushes.clear()
        _same(ref, simulate(workload, cost, cfg, spec, load=load, seed=0, num_requests=64))
        assert len(flushes) > 10 and {s for s, _ in flushes[:-1]} >= {5}
        assert any(0 < s < 5 for s, _ in flushes[:-1])        # a gap buffer filled first
    flushes.clear()
    ref, new = _joint_both(monkeypatch, workload, cost, cfg, spec, _times(128, 24.0, 2), 3)
    _same(ref, new)
    assert len(flushes) > 30


def test_chain_ids_follow_first_appearance():
    """The prefix-cache keys the compiled loop gives prompt hashes (numpy, no per-hash Python
    loop): numbered in order of first appearance, as a dict's setdefault numbers them, and a
    preloaded block no prompt holds gets the next free key."""
    from simkit.block_hash import pack
    from simkit.engine.fast.loop import _chain_index, _lru_ids

    rng = np.random.default_rng(4)
    chains = [rng.integers(0, 40, rng.integers(0, 9)).astype(np.uint64) * (2**61 + 3)
              for _ in range(30)]
    ids: dict[int, int] = {}
    want = [ids.setdefault(int(h), len(ids)) for c in chains for h in c]

    class Packed:                       # what _chain_index reads of a Workload
        def __init__(self):
            self._columns: dict = {}
            self.block_hashes = pack(chains)

    off, flat, lens, uniq, rank = _chain_index(Packed())
    assert flat.tolist() == want and lens.tolist() == [len(c) for c in chains]
    assert off.tolist() == np.r_[0, np.cumsum([len(c) for c in chains])].tolist()
    keys = [int(chains[3][0]) if len(chains[3]) else 7, 2**64 - 1, 5, int(next(iter(ids)))]
    got, new = _lru_ids(uniq, rank, keys)
    for h in keys:
        ids.setdefault(h, len(ids))
    assert got.tolist() == [ids[h] for h in keys] and len(ids) == uniq.size + new
