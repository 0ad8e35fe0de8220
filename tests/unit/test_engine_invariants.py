"""Engine invariants over random workloads: tokens produced once, FULL only when uniform, KV bounds,
throughput monotone in host time, determinism."""

import json

import numpy as np
import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_doubles import LinearCost, make_table, patterned_table
from simkit.costmodel.batch import GraphMode
from simkit.engine.config import EngineConfig, kpad, parse_configs, suffix, vanilla
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.workload import Workload

CONFIGS = {c.name: c for c in parse_configs("vanilla,suffix:4,kpad:3,8,dynamic:2,5")}


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 12))
    prompts = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**16))
    return Workload.from_table(patterned_table(prompts, outputs, seed))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 8),
       blocks=st.integers(40, 200), budget=st.sampled_from([64, 256, 8192]),
       seed=st.integers(0, 5))
def test_every_token_once_and_full_only_when_uniform(w, name, conc, blocks, budget, seed):
    spec = CONFIGS[name]
    cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                       max_num_seqs=16)
    cost = LinearCost()
    res = simulate(w, cost, cfg, spec, load=ClosedLoop(conc), seed=seed,
                   num_requests=2 * w.num_requests, keep_steps=True)
    m = res.metrics
    # every scheduled request finished with exactly its output length, no token twice
    assert m.requests_done == res.num_requests - 0
    skipped = sum(res.skipped.values())
    usable = [i for i in range(w.num_requests)
              if w.prompt_len[i] + w.output_len[i] <= cfg.kv_capacity_tokens]
    assert skipped == w.num_requests - len(usable)
    assert m.kv_usage_peak <= 1.0
    # uniform = every request has exactly q tokens (vLLM's test; a q-token prefill chunk counts)
    for c, _ in res.step_log:
        assert c.num_tokens <= budget
        assert c.num_reqs <= cfg.max_num_seqs
        assert c.num_padded_tokens >= c.num_tokens
        if c.graph_mode is GraphMode.FULL:
            q = c.num_tokens // c.num_reqs
            assert c.num_tokens == q * c.num_reqs
            assert c.num_spec_tokens <= (q - 1) * c.num_reqs
            assert (q - 1) in spec.k_values
        assert 0 <= c.num_pad_drafts <= c.num_spec_tokens
        assert 0 <= c.num_accepted_tokens <= c.num_spec_tokens - c.num_pad_drafts
        if not spec.pad:
            assert c.num_pad_drafts == 0


def _tokens_of_order(w, res, cfg):
    from simkit.engine.sim import request_order

    order, _ = request_order(w, cfg, res.num_requests, res.seed)
    return sum(min(int(w.output_len[i]), cfg.max_tokens) for i in order)


@settings(max_examples=25, deadline=None)
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 6))
def test_output_tokens_equal_sum_of_output_lengths(w, name, conc):
    cfg = EngineConfig(kv_capacity_tokens=4096)
    res = simulate(w, LinearCost(), cfg, CONFIGS[name], load=ClosedLoop(conc), seed=1)
    assert res.metrics.output_tokens == _tokens_of_order(w, res, cfg)


def _mixed():
    return Workload.from_table(make_table(
        [100 + 37 * (r % 11) for r in range(64)], [40 + 23 * (r % 7) for r in range(64)],
        lambda r, t, k: (r + t) % 4, lambda r, t, k: (r * 3 + t) % 7, kmax=12))


def test_throughput_rises_when_host_time_falls():
    w = _mixed()
    for spec in (vanilla(), suffix(8), kpad(6)):
        rates = [simulate(w, LinearCost(host_s=h), EngineConfig(), spec,
                          load=ClosedLoop(16), seed=0).metrics.output_tok_s
                 for h in (4e-3, 2e-3, 1e-3, 0.0)]
        assert rates == sorted(rates) and rates[-1] > rates[0] * 1.5


def test_host_share_is_reported_time_weighted():
    m = simulate(_mixed(), LinearCost(base_s=1e-3, per_token_s=0.0, host_s=1e-3),
                 EngineConfig(), vanilla(), load=ClosedLoop(8)).metrics
    # every step: 1 ms device + 1 ms host -> host-bound share 50%
    assert abs(m.host_frac - 0.5) < 1e-9


def test_same_seed_is_byte_identical_and_seeds_differ():
    w = _mixed()
    runs = [json.dumps(simulate(w, LinearCost(), EngineConfig(), spec, load=ClosedLoop(8),
                                seed=s).metrics.to_dict(), sort_keys=True)
            for spec in parse_configs("suffix,dynamic-goodput") for s in (4, 4, 5)]
    assert runs[0] == runs[1] and runs[3] == runs[4]
    assert runs[0] != runs[2]


def test_steady_window_excludes_warmup_and_drain():
    m = simulate(_mixed(), LinearCost(), EngineConfig(), vanilla(), load=ClosedLoop(8),
                 num_requests=64).metrics
    assert m.window_kind == "steady"
    assert 0 < m.window_start_s < m.window_end_s < m.sim_time_s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 6),
       seed=st.integers(0, 3), starts=st.lists(st.integers(1, 40), max_size=3))
def test_other_windows_equal_a_run_with_that_window(w, name, conc, seed, starts):
    """One simulation summarised over other windows gives, per window, exactly the metrics of a
    simulation run with that window (the window never changes the trajectory)."""
    def text(m) -> str:                  # NaN-safe equality (NaN figures on tiny runs)
        return json.dumps(m.to_dict(), sort_keys=True)

    kw = dict(load=ClosedLoop(conc), num_requests=24, seed=seed, shuffle=False)
    one = simulate(w, LinearCost(), EngineConfig(), CONFIGS[name], window_start_completion=1,
                   other_window_starts=starts, **kw)
    assert text(one.metrics) == text(simulate(w, LinearCost(), EngineConfig(), CONFIGS[name],
                                              window_start_completion=1, **kw).metrics)
    assert sorted(one.other_windows) == sorted(set(starts))
    for n in starts:
        alone = simulate(w, LinearCost(), EngineConfig(), CONFIGS[name], window_start_completion=n,
                         **kw)
        assert text(one.other_windows[n]) == text(alone.metrics), n


@settings(max_examples=20, deadline=None)
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 6),
       seed=st.integers(0, 3))
def test_accepted_tokens_priced_at_schedule_are_those_the_step_accepts(w, name, conc, seed):
    """The scheduler prices a step's per-accepted-token host work from the replayed table before
    the step runs; update() then applies the same table: the two counts agree step by step."""
    from simkit.engine.scheduler import Scheduler

    seen: list[tuple[int, int]] = []
    real_update = Scheduler.update

    def spy(self, plan, *args, **kwargs):
        out = real_update(self, plan, *args, **kwargs)
        seen.append((plan.desc.num_accepted_tokens, out[1]))
        return out

    Scheduler.update = spy
    try:        # the reference loop (the compiled one is compared with it in test_fast_engine)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SIMKIT_ENGINE_LOOP", "reference")
            simulate(w, LinearCost(), EngineConfig(), CONFIGS[name], load=ClosedLoop(conc),
                     seed=seed)
    finally:
        Scheduler.update = real_update
    assert seen and all(planned == applied for planned, applied in seen)


# -- vLLM 0.34: exactly K verified slots, async, request-keyed decode graphs --------------------
CONFIGS_034 = {c.name: c for c in parse_configs("vanilla,suffix:4,suffix,kpad:3,dynamic:2,5,"
                                                "ktable:1-2=6/3-4=3/5-8=1", "0.34")}


def _gpu_workload(prompts, outputs, seed):
    """A suffix_gpu table: accepted slots (fillers included) may exceed the real drafts."""
    t = patterned_table(prompts, outputs, seed)
    k = np.arange(1, t.kmax + 1, dtype=np.int64)
    rows = np.arange(t.accepted.shape[0], dtype=np.int64)[:, None]
    t.accepted = np.minimum((rows * 7 + seed + k) % 6, k).astype(np.uint8)
    t.drafter = "suffix_gpu"
    return Workload.from_table(t)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 10), seed=st.integers(0, 2**16), name=st.sampled_from(sorted(CONFIGS_034)),
       conc=st.integers(1, 8), blocks=st.integers(40, 200), budget=st.sampled_from([64, 256, 8192]),
       max_len=st.sampled_from([120, 400, 16384]))
def test_034_every_token_once_and_exactly_k_slots(n, seed, name, conc, blocks, budget, max_len):
    rng = np.random.default_rng(seed)
    w = _gpu_workload(rng.integers(1, 100, n).tolist(), rng.integers(1, 60, n).tolist(), seed)
    spec = CONFIGS_034[name]
    cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                       max_num_seqs=8, max_model_len=max_len, vllm_version="0.34")
    res = simulate(w, LinearCost(), cfg, spec, load=ClosedLoop(conc), seed=seed % 7,
                   num_requests=2 * n, keep_steps=True)
    from simkit.engine.sim import request_order

    order, _ = request_order(w, cfg, res.num_requests, res.seed)
    assert res.metrics.output_tokens == sum(                            # INV-1 (and INV-2)
        min(int(w.output_len[i]), cfg.max_tokens, max_len - int(w.prompt_len[i])) for i in order)
    assert res.metrics.kv_usage_peak <= 1.0
    for c, _ in res.step_log:
        assert c.async_scheduling and c.num_drafting_reqs == 0       # every config async, GPU drafts
        assert c.num_tokens <= budget and c.num_reqs <= cfg.max_num_seqs
        assert c.num_padded_tokens >= c.num_tokens
        assert 0 <= c.num_pad_drafts <= c.num_spec_tokens
        assert 0 <= c.num_accepted_tokens <= c.num_spec_tokens       # fillers count, slots cap
        if c.graph_mode is GraphMode.FULL:                            # INV-3 on 0.34's rule
            q = c.num_tokens // c.num_reqs
            assert c.num_prefill_reqs == 0 and c.num_tokens == q * c.num_reqs
            assert (q - 1) in spec.k_values and c.num_padded_tokens % q == 0
            if spec.speculative:                                      # exactly K slots each
                assert c.num_spec_tokens == (q - 1) * c.num_decode_reqs
        if not spec.speculative:
            assert c.num_spec_tokens == 0
