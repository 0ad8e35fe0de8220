"""vLLM 0.34's adaptive verification in the simulated engine (simkit.engine.adaptive_run) on
scripted suffix_gpu tables: drafts that are always rejected lose their slots once the counters
learn, always-accepted ones keep them, fillers are trimmed first, the budget reads confidences one
propose old, the varlen decode grid and the start-up cost table, the config syntax, invariants and
determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_doubles import LinearCost, make_table, patterned_table
from simkit.costmodel.batch import GraphMode
from simkit.engine import adaptive_run
from simkit.engine.adaptive import SOURCE_CORPUS, SOURCE_OWN
from simkit.engine.adaptive_run import AdaptiveVerifier, cost_table, profile_sizes, varlen_grid
from simkit.engine.config import EngineConfig, parse_configs
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.workload import DrafterUnavailable, Workload
from simkit.errors import InputError

K = 4
CFG = EngineConfig(kv_capacity_tokens=1 << 20, max_num_seqs=16, vllm_version="0.34")


def _gpu_table(prompts, outputs, accepted_fn, drafted_fn, source_fn, match_fn, kmax=8):
    """A suffix_gpu table with scripted a, d (fillers may be accepted: a is not capped at d),
    source and match length per (request, t, K)."""
    t = make_table(prompts, outputs, lambda r, tt, k: k, drafted_fn, kmax=kmax,
                   drafter="suffix_gpu")
    src = np.zeros_like(t.accepted)
    ml = np.zeros_like(t.accepted)
    for r, L in enumerate(outputs):
        for tt in range(L):
            row = int(t.offsets[r]) + tt
            for k in range(1, kmax + 1):
                t.accepted[row, k - 1] = min(k, accepted_fn(r, tt, k))
                src[row, k - 1] = source_fn(r)
                ml[row, k - 1] = match_fn(r)
    t.source, t.match_len = src, ml
    return t


def _admits(monkeypatch):
    """Record every admit() call: (request seqs, capacities, admitted)."""
    seen = []
    real = AdaptiveVerifier.admit

    def spy(self, seqs, capacities, *a):
        out = real(self, seqs, capacities, *a)
        seen.append((list(seqs), list(capacities), list(out)))
        return out

    monkeypatch.setattr(AdaptiveVerifier, "admit", spy)
    return seen


def _spec(text="suffix-av:4"):
    return parse_configs(text, "0.34")[0]


def test_rejected_drafts_lose_their_slots_accepted_ones_keep_them(monkeypatch):
    # one request at a time (a batch of one: no graph padding to fill with free slots).
    # Rejected: own-history drafts (match 1), never accepted. Accepted: corpus drafts (match 8),
    # always accepted in full. Verify cost 1 ms + 0.1 ms per token.
    def run(accept, source, match):
        t = _gpu_table([10], [300], lambda r, tt, k: accept(k), lambda r, tt, k: k,
                       lambda r: source, lambda r: match)
        seen = _admits(monkeypatch)
        res = simulate(Workload.from_table(t), LinearCost(base_s=1e-3, per_token_s=1e-4), CFG,
                       _spec(), load=ClosedLoop(1), seed=0, num_requests=1)
        return [a[0] for _, _, a in seen], res

    rejected, res = run(lambda k: 0, SOURCE_OWN, 1)
    assert rejected[0] == K                    # nothing learned yet: every slot is bought
    assert len(rejected) > 250 and set(rejected[20:]) == {0}
    assert res.adaptive["mean_admitted_slots"] < 0.1 and res.adaptive["budget_share_of_k"] < 0.03
    accepted, res = run(lambda k: k, SOURCE_CORPUS, 8)
    assert set(accepted[5:]) == {K}            # all K once the first verdicts are in
    assert res.adaptive["mean_admitted_slots"] > K - 0.1 and res.adaptive["budget_share_of_k"] > 0.97


def test_fillers_are_trimmed_first_and_cap_acceptance(monkeypatch):
    # 2 real drafts of 4 slots; the table accepts all 4 (fillers equal to the output), but
    # fillers have confidence 0: once the request's stale confidences are its own, the budget
    # never buys them, so it verifies (and accepts) 2 slots a step
    t = _gpu_table([10], [200], lambda r, tt, k: k, lambda r, tt, k: 2, lambda r: SOURCE_OWN,
                   lambda r: 3)
    seen = _admits(monkeypatch)
    simulate(Workload.from_table(t), LinearCost(base_s=1e-3, per_token_s=1e-4), CFG, _spec(),
             load=ClosedLoop(1), seed=0, num_requests=1)
    admitted = [a[0] for _, _, a in seen]
    assert admitted[0] == K                   # first step: stale confidences are 1.0 (new request)
    assert set(admitted[2:]) == {2}
    # without adaptive verification the same table accepts the fillers: 5 tokens a step
    plain = simulate(Workload.from_table(t), LinearCost(), CFG, _spec("suffix:4"),
                     load=ClosedLoop(1), seed=0, num_requests=1)
    av = simulate(Workload.from_table(t), LinearCost(), CFG, _spec(), load=ClosedLoop(1), seed=0,
                  num_requests=1)
    assert plain.metrics.tokens_per_step > av.metrics.tokens_per_step


class _FlatCost:
    def step_cost(self, desc):
        from simkit.costmodel.batch import StepCost

        return StepCost(device_s=1e-3 + 1e-6 * desc.num_padded_tokens, host_s=0.0,
                        step_s=1e-3 + 1e-6 * desc.num_padded_tokens)


def _verifier(source, match_len, compiled=True):
    from simkit.engine.pricing import dispatchers_for

    disp = dispatchers_for((K,), CFG.cudagraph_mode, 16, 8192, rule="v034-request-keyed")[K]
    return AdaptiveVerifier(K, source, match_len, _FlatCost(), disp, 16, 8192, 100.0,
                            "suffix_gpu", compiled=compiled)


def test_budget_reads_the_confidences_of_one_propose_earlier(monkeypatch):
    # rows 0 and 1: counter rows (own, 1) and (corpus, 1); teach (own, 1) that slot 0 fails.
    # The NumPy path, whose budget and allocation can be watched (the compiled one equals it)
    av = _verifier([SOURCE_OWN, SOURCE_CORPUS], [1, 1], compiled=False)
    for _ in range(50):
        av.counters.observe(0, K, 0, K)
    av.step()                                      # the confidences new drafts read
    got = {}

    def budget(stale, *a, **kw):
        got["stale"] = np.array(stale)
        return 0

    def alloc(cur, cap, b):
        got["current"] = np.array(cur)
        return np.zeros(len(cap), np.int64)

    monkeypatch.setattr(adaptive_run, "budget_from_table", budget)
    monkeypatch.setattr(adaptive_run, "allocate", alloc)
    av.admit([7], [K], 1, 1)                       # never proposed: 1.0 for both
    assert (got["stale"] == 1.0).all() and (got["current"] == 1.0).all()
    av.propose(7, 0, K)                            # a draft from the learned (own, 1) row
    av.admit([7], [K], 1, 1)
    assert (got["stale"] == 1.0).all()             # the host still sees the older copy
    assert got["current"][0, 0] < 0.05             # the GPU sees the new draft's confidence
    av.propose(7, 1, K)                            # next draft from the fresh (corpus, 1) row
    av.admit([7], [K], 1, 1)
    assert got["stale"][0, 0] < 0.05               # one propose late: the (own, 1) draft's
    assert (got["current"] == 0.5).all()           # (0 + 1) / (0 + 2)


def test_a_draft_without_valid_slots_records_no_observation():
    av = _verifier([SOURCE_OWN], [1])
    av.propose(3, 0, 0)
    av.observe(3, 0, K)
    av.step()
    assert av.counters.counts.sum() == 0
    av.propose(3, 0, 2)                            # 2 valid: positions 0..1 observed at most
    av.observe(3, 1, K)
    av.observe(3, 1, K)                            # one verdict per draft: the second is ignored
    assert av.counters.counts.sum() == 0           # folded in when the next propose step opens
    av.step()
    assert av.counters.counts[0, :, 1].tolist() == [1, 1, 0, 0]
    assert av.counters.counts[0, :, 0].tolist() == [1, 0, 0, 0]


def test_varlen_grid_and_profiled_cost_table():
    g = varlen_grid(504)
    assert g[:8] == [1, 2, 4, 8, 10, 12, 14, 16] and g[-4:] == [320, 384, 448, 504]
    assert varlen_grid(2048)[-3:] == [1792, 1920, 2048]
    assert profile_sizes([8, 16, 512], 8192) == [8, 16, 512, 768, 1024, 2048, 4096, 8192]
    table = cost_table([(8, 1.0), (16, 2.0), (32, 1.5), (64, 4.0)], 16, 80)
    assert table[1] == table[8] == 1.0 and table[9] == table[16] == 2.0   # step: graphs pad
    assert table[17] == 2.0 and table[48] == pytest.approx(3.0)          # above: interpolated
    assert table[80] == pytest.approx(4.0 + 16 * 2.0 / 32)                # extrapolated


def test_pure_decode_steps_replay_varlen_full_graphs():
    t = _gpu_table([10] * 3, [80] * 3, lambda r, tt, k: r, lambda r, tt, k: k, lambda r: SOURCE_OWN,
                   lambda r: 2)
    res = simulate(Workload.from_table(t), LinearCost(base_s=1e-3, per_token_s=1e-4), CFG,
                   _spec(), load=ClosedLoop(3), seed=0, num_requests=3, keep_steps=True)
    grid = varlen_grid(max(1, 16 * 5))
    decode_only = [c for c, _ in res.step_log if c.num_prefill_reqs == 0]
    assert decode_only and all(c.graph_mode is GraphMode.FULL and c.num_padded_tokens in grid
                               for c in decode_only)


def test_config_syntax_and_refusals():
    cfgs = parse_configs("suffix-av,suffix-av:4,6", "0.34")
    assert [(c.name, c.k, c.adaptive, c.drafter) for c in cfgs] == [
        ("suffix-av", 8, True, "suffix_gpu"), ("suffix-av-4", 4, True, "suffix_gpu"),
        ("suffix-av-6", 6, True, "suffix_gpu")]
    for version in ("0.26", "0.33"):
        with pytest.raises(InputError, match="V1 model runner"):
            parse_configs("suffix-av", version)


def test_a_table_without_sources_is_refused_by_name():
    t = _gpu_table([10], [20], lambda r, tt, k: 1, lambda r, tt, k: k, lambda r: 0, lambda r: 1)
    t.source = t.match_len = None
    with pytest.raises(DrafterUnavailable, match="source and match length"):
        simulate(Workload.from_table(t), LinearCost(), CFG, _spec(), load=ClosedLoop(1), seed=0)


def _random_workload(n, seed):
    rng = np.random.default_rng(seed)
    t = patterned_table(rng.integers(1, 100, n).tolist(), rng.integers(1, 60, n).tolist(), seed)
    k = np.arange(1, t.kmax + 1, dtype=np.int64)
    rows = np.arange(t.accepted.shape[0], dtype=np.int64)[:, None]
    t.accepted = np.minimum((rows * 7 + seed + k) % 6, k).astype(np.uint8)
    t.drafter = "suffix_gpu"
    t.source = ((rows + seed) % 2 + 0 * k).astype(np.uint8)
    t.match_len = ((rows * 5 + seed) % 30 + 0 * k).astype(np.uint8)
    return Workload.from_table(t)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 10), seed=st.integers(0, 2**16), name=st.sampled_from(["suffix-av:3",
                                                                                "suffix-av"]),
       conc=st.integers(1, 8), blocks=st.integers(40, 200), budget=st.sampled_from([64, 256, 8192]),
       max_len=st.sampled_from([120, 16384]))
def test_invariants_under_adaptive_verification(n, seed, name, conc, blocks, budget, max_len):
    w = _random_workload(n, seed)
    spec = _spec(name)
    cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                       max_num_seqs=8, max_model_len=max_len, vllm_version="0.34")
    res = simulate(w, LinearCost(base_s=1e-3, per_token_s=1e-4), cfg, spec,
                   load=ClosedLoop(conc), seed=seed % 7, num_requests=2 * n, keep_steps=True)
    from simkit.engine.sim import request_order

    order, _ = request_order(w, cfg, res.num_requests, res.seed)
    assert res.metrics.output_tokens == sum(
        min(int(w.output_len[i]), cfg.max_tokens, max_len - int(w.prompt_len[i])) for i in order)
    assert res.metrics.kv_usage_peak <= 1.0
    for c, _ in res.step_log:
        assert c.num_tokens <= budget and c.num_reqs <= cfg.max_num_seqs
        assert c.num_padded_tokens >= c.num_tokens
        assert 0 <= c.num_pad_drafts <= c.num_spec_tokens <= spec.k * c.num_decode_reqs
        assert 0 <= c.num_accepted_tokens <= c.num_spec_tokens
        if c.graph_mode is GraphMode.FULL:
            assert c.num_prefill_reqs == 0
    a = res.adaptive
    assert 0.0 <= a["budget_share_of_k"] <= 1.0 and 0.0 <= a["mean_admitted_slots"] <= spec.k


def test_same_seed_is_byte_identical():
    w = _random_workload(8, 3)
    cfg = EngineConfig(kv_capacity_tokens=4096, max_num_seqs=8, vllm_version="0.34")
    runs = [simulate(w, LinearCost(base_s=1e-3, per_token_s=1e-4), cfg, _spec(),
                     load=ClosedLoop(4), seed=2, num_requests=16) for _ in range(2)]
    dumps = [json.dumps([r.metrics.to_dict(), r.adaptive], sort_keys=True) for r in runs]
    assert dumps[0] == dumps[1]


def test_a_ladder_names_suffix_av_unavailable_without_sources():
    # an older table (no source arrays): the ladder runs suffix and names suffix-av unavailable
    from simkit.engine.runner import Cell, run_ladder

    t = _gpu_table([10, 12], [20, 30], lambda r, tt, k: 1, lambda r, tt, k: k, lambda r: 0,
                   lambda r: 1)
    t.source = t.match_len = None
    ladder = run_ladder(Cell(Workload.from_table(t), LinearCost(), CFG),
                        parse_configs("suffix:4,suffix-av:4", "0.34"), seeds=1, num_requests=4,
                        load=ClosedLoop(2), workers=1)
    assert [r.config for r in ladder.rows] == ["suffix-4"]
    assert "source and match length" in ladder.unavailable["suffix-av-4"]
    assert "simkit profiles build" in ladder.unavailable["suffix-av-4"]


def test_vectorised_steps_equal_the_pure_rules():
    # budget_from_table = choose_budget on the same table; the batched verdicts of a step = one
    # AcceptanceCounters.observe per request
    from simkit.engine.adaptive import AcceptanceCounters, choose_budget

    rng = np.random.default_rng(5)
    table = np.cumsum(rng.uniform(0.0, 0.3, 300))
    for _ in range(200):
        n = int(rng.integers(1, 12))
        conf = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], (n, K)).astype(np.float32)
        cap = rng.integers(0, K + 1, n)
        sampling, non_draft = int(rng.integers(0, n + 1)), int(rng.integers(0, 200))
        assert adaptive_run.budget_from_table(conf, cap, sampling, non_draft, table) == \
            choose_budget(conf, cap, sampling, non_draft, 0.0,
                          lambda t: float(table[min(t, table.size - 1)]))
    av = _verifier([SOURCE_OWN, SOURCE_CORPUS] * 10, list(range(1, 21)))
    ref = AcceptanceCounters(K)
    for step in range(30):
        for seq in range(6):
            row = int(rng.integers(0, 20))
            d = int(rng.integers(0, K + 1))
            a, v = int(rng.integers(0, K + 1)), int(rng.integers(0, K + 1))
            av.propose(seq, row, d)
            bucket = av.state[seq][6]
            assert bucket == (ref.bucket(row % 2, row + 1) if d > 0 else -1)
            av.observe(seq, a, v)
            ref.observe(bucket, d, a, v)
        av.step()
        ref.tick()
        assert np.array_equal(av.counters.counts, ref.counts), step


def test_compiled_steps_equal_the_numpy_path():
    # the numba kernels (fold, confidence table, gather + budget + allocate) against the NumPy
    # rules, step by step on random batches, and whole runs byte for byte
    pytest.importorskip("numba")
    rng = np.random.default_rng(9)
    src, ml = [int(x) for x in rng.integers(0, 2, 50)], [int(x) for x in rng.integers(0, 30, 50)]
    fast, slow = _verifier(src, ml), _verifier(src, ml, compiled=False)
    assert fast.kernels is not None
    for step in range(300):
        n = int(rng.integers(1, 10))
        seqs = [int(x) for x in rng.choice(15, n, replace=False)]
        caps = [int(x) for x in rng.integers(0, K + 1, n)]
        sampling, non_draft = n + int(rng.integers(0, 3)), int(rng.integers(0, 300))
        a, b = fast.admit(seqs, caps, sampling, non_draft), slow.admit(seqs, caps, sampling,
                                                                      non_draft)
        assert a == b, step
        for seq, slots in zip(seqs, a):
            verdict = (int(rng.integers(0, slots + 1)), slots)
            for av in (fast, slow):
                av.observe(seq, *verdict)
        for av in (fast, slow):
            av.step()
        assert np.array_equal(fast.counters.counts, slow.counters.counts)
        assert np.array_equal(fast.table, slow.table)
        for seq in seqs:
            row, d = int(rng.integers(0, 50)), int(rng.integers(0, K + 1))
            for av in (fast, slow):
                av.propose(seq, row, d)
        if rng.random() < 0.05:
            for av in (fast, slow):
                av.forget(seqs[0])
    assert fast.summary() == slow.summary()


def test_compiled_and_numpy_runs_are_byte_identical(monkeypatch):
    pytest.importorskip("numba")
    w = _random_workload(10, 4)
    cfg = EngineConfig(kv_capacity_tokens=4096, max_num_seqs=8, vllm_version="0.34")

    def run():
        r = simulate(w, LinearCost(base_s=1e-3, per_token_s=1e-4), cfg, _spec(),
                     load=ClosedLoop(6), seed=1, num_requests=30)
        return json.dumps([r.metrics.to_dict(), r.adaptive], sort_keys=True)

    compiled = run()
    monkeypatch.setattr(adaptive_run, "_kernels", lambda: None)
    assert run() == compiled


def test_piecewise_mode_has_no_varlen_full_graphs_and_none_mode_is_refused():
    from dataclasses import replace

    from simkit.engine.cudagraph import CudagraphMode
    from simkit.engine.runner import Cell, run_ladder

    t = _gpu_table([10] * 3, [60] * 3, lambda r, tt, k: r, lambda r, tt, k: k, lambda r: SOURCE_OWN,
                   lambda r: 2)
    piecewise = replace(CFG, cudagraph_mode=CudagraphMode.PIECEWISE)
    res = simulate(Workload.from_table(t), LinearCost(base_s=1e-3, per_token_s=1e-4), piecewise,
                   _spec(), load=ClosedLoop(3), seed=0, num_requests=3, keep_steps=True)
    assert all(c.graph_mode is not GraphMode.FULL for c, _ in res.step_log)
    assert res.adaptive["decode_request_steps"] > 0
    none = replace(CFG, cudagraph_mode=CudagraphMode.NONE)
    ladder = run_ladder(Cell(Workload.from_table(t), LinearCost(), none),
                        parse_configs("suffix:4,suffix-av:4", "0.34"), seeds=1, num_requests=3,
                        load=ClosedLoop(3), workers=1)
    assert [r.config for r in ladder.rows] == ["suffix-4"]
    assert "could not profile step costs" in ladder.unavailable["suffix-av-4"]
