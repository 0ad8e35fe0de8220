"""Engine against hand-computed cases: one request, uniform/non-uniform/eager batches, preemption."""

import pytest

from engine_doubles import LinearCost, make_table
from simkit.costmodel.batch import GraphMode
from simkit.engine.config import EngineConfig, kpad, suffix, vanilla
from simkit.engine.sim import ClosedLoop, OpenLoop, simulate
from simkit.engine.workload import Workload


def workload(prompts, outputs, acc=lambda r, t, k: 0, dr=lambda r, t, k: 0):
    return Workload.from_table(make_table(prompts, outputs, acc, dr))


def test_single_request_vanilla_times_by_hand():
    cost = LinearCost(base_s=1e-3, per_token_s=1e-5)
    res = simulate(workload([100], [5]), cost, EngineConfig(), vanilla(), load=ClosedLoop(1))
    modes = [(c.graph_mode, c.num_tokens, c.num_padded_tokens) for c in cost.calls]
    # prefill of 100 tokens: not uniform (q=1) -> PIECEWISE padded to 104; then 4 FULL decodes
    assert modes == [(GraphMode.PIECEWISE, 100, 104)] + [(GraphMode.FULL, 1, 1)] * 4
    m = res.metrics
    assert m.steps == 5 and m.output_tokens == 5
    assert m.ttft_ms_p50 == pytest.approx(1 + 1.04)
    assert m.tpot_ms_p50 == pytest.approx(1.01)
    assert m.itl_ms_p50 == pytest.approx(1.01)
    assert m.sim_time_s == pytest.approx(2.04e-3 + 4 * 1.01e-3)
    assert cost.calls[0].async_scheduling and cost.calls[1].num_drafting_reqs == 0


def test_single_request_suffix_advances_by_accepted_plus_one():
    # every position drafts 4 and accepts 2: steps emit 1 (prefill), 3, then the last 1 (capped)
    cost = LinearCost()
    w = workload([10], [5], acc=lambda r, t, k: 2, dr=lambda r, t, k: 4)
    res = simulate(w, cost, EngineConfig(), suffix(4), load=ClosedLoop(1))
    assert [c.num_tokens for c in cost.calls] == [10, 5, 5]
    assert [c.graph_mode for c in cost.calls] == [GraphMode.PIECEWISE, GraphMode.FULL,
                                                   GraphMode.FULL]
    assert cost.calls[1].num_spec_tokens == 4 and cost.calls[1].num_pad_drafts == 0
    assert not cost.calls[1].async_scheduling and cost.calls[1].drafter == "suffix"
    assert res.metrics.output_tokens == 5 and res.metrics.steps == 3
    assert res.metrics.mean_accepted == pytest.approx(2.0)


def test_uniform_kpad_batch_runs_full_graph():
    # 8 requests, drafts vary (0..4) but K-pad makes every decode request carry exactly 4 spec tokens
    cost = LinearCost()
    w = workload([16] * 8, [3] * 8, acc=lambda r, t, k: 0, dr=lambda r, t, k: r % 5)
    simulate(w, cost, EngineConfig(), kpad(4), load=ClosedLoop(8))
    decode = cost.calls[1]
    assert decode.num_reqs == 8 and decode.num_tokens == 40
    assert decode.graph_mode is GraphMode.FULL and decode.num_padded_tokens == 40
    assert decode.num_spec_tokens == 32
    assert decode.num_pad_drafts == 32 - sum(min(r % 5, 4) for r in range(8))


def test_variable_drafts_fall_to_piecewise():
    cost = LinearCost()
    w = workload([16, 16], [3, 3], acc=lambda r, t, k: 0, dr=lambda r, t, k: 2 + 2 * r)
    simulate(w, cost, EngineConfig(), suffix(4), load=ClosedLoop(2))
    decode = cost.calls[1]
    assert decode.num_tokens == 3 + 5
    assert decode.graph_mode is GraphMode.PIECEWISE and decode.num_padded_tokens == 10


def test_batch_above_largest_capture_size_runs_eagerly():
    # K=12 (q=13): largest FULL size 507 = 39 requests; 40 uniform requests = 520 tokens -> NONE
    cost = LinearCost()
    w = workload([8] * 40, [2] * 40, acc=lambda r, t, k: 0, dr=lambda r, t, k: 12)
    simulate(w, cost, EngineConfig(), kpad(12), load=ClosedLoop(40))
    decode = cost.calls[1]
    assert decode.num_tokens == 520 and decode.graph_mode is GraphMode.NONE
    assert decode.num_padded_tokens == 520


def test_token_budget_truncates_drafts_and_breaks_uniformity():
    cost = LinearCost()
    cfg = EngineConfig(max_num_batched_tokens=12)
    w = workload([4] * 3, [3] * 3, acc=lambda r, t, k: 0, dr=lambda r, t, k: 4)
    simulate(w, cost, cfg, kpad(4), load=ClosedLoop(3))
    decode = cost.calls[1]
    assert decode.num_tokens == 12 and decode.num_spec_tokens == 4 + 4 + 1
    assert decode.num_pad_drafts == 0
    # a cut batch fills the budget, which is above the largest capture size once sizes are
    # rounded to multiples of 5 (capture list capped at 12 -> [5, 10]): eager
    assert decode.graph_mode is GraphMode.NONE


def test_chunked_prefill_gives_no_token_until_the_last_chunk():
    cost = LinearCost()
    res = simulate(workload([10000], [2]), cost, EngineConfig(), vanilla(), load=ClosedLoop(1))
    assert [c.num_tokens for c in cost.calls] == [8192, 1808, 1]
    assert [c.num_drafting_reqs for c in cost.calls] == [0, 0, 0]
    assert res.metrics.steps == 3 and res.metrics.output_tokens == 2


def test_preemption_by_hand():
    # two requests (prompt 32, output 40), 6 KV blocks of 16 tokens. Prefill takes 2 blocks each;
    # at step 2 each takes a third; at step 18 A needs a 4th block: B (last scheduled) is
    # preempted, recomputes its 32 + 17 tokens once A finishes (step 40) and ends at step 63.
    cost = LinearCost()
    cfg = EngineConfig(kv_capacity_tokens=6 * 16)
    res = simulate(workload([32, 32], [40, 40]), cost, cfg, vanilla(), load=ClosedLoop(2))
    m = res.metrics
    assert m.preemptions == 1
    assert m.steps == 63 and len(cost.calls) == 63
    assert [c.num_reqs for c in cost.calls[:17]] == [2] * 17
    assert [c.num_reqs for c in cost.calls[17:40]] == [1] * 23
    resumed = cost.calls[40]
    assert resumed.num_prefill_tokens == 32 + 17 and resumed.num_prefill_reqs == 1
    assert m.output_tokens == 80 and m.requests_done == 2
    assert m.kv_usage_peak == pytest.approx(1.0)


def test_whole_batch_drafts_nothing_near_max_model_len():
    # request 1 (prompt 96 + 1 output) is within K=4 of max_model_len: the batch drafts nothing
    cost = LinearCost()
    cfg = EngineConfig(max_model_len=100)
    w = workload([10, 96], [3, 3], acc=lambda r, t, k: 0, dr=lambda r, t, k: 4)
    simulate(w, cost, cfg, suffix(4), load=ClosedLoop(2))
    later = [c for c in cost.calls if c.num_prefill_reqs == 0]
    assert later and all(c.num_spec_tokens == 0 for c in later)


def test_prompts_over_max_model_len_are_counted_and_skipped():
    res = simulate(workload([50, 200, 10], [5, 5, 0]), LinearCost(),
                   EngineConfig(max_model_len=100), vanilla(), load=ClosedLoop(2))
    assert res.skipped["prompt_over_max_model_len"] == 1
    assert res.skipped["empty_output"] == 1
    assert res.metrics.requests_done == 1


def test_max_tokens_truncates_outputs():
    res = simulate(workload([10], [50]), LinearCost(), EngineConfig(max_tokens=7), vanilla(),
                   load=ClosedLoop(1))
    assert res.metrics.output_tokens == 7


def test_open_loop_low_rate_has_no_queueing():
    cost = LinearCost(base_s=1e-3, per_token_s=0.0)
    res = simulate(workload([20] * 20, [4] * 20), cost, EngineConfig(), vanilla(),
                   load=OpenLoop(rate=1.0), seed=3)
    # arrivals ~1 s apart, each request takes 4 steps of 1 ms: TTFT is one step
    assert res.metrics.ttft_ms_p99 == pytest.approx(1.0)
    assert res.metrics.requests_done == 20


def test_itl_counts_streamed_chunks_and_tpot_divides_by_tokens():
    # suffix: prefill (1 token), then chunks of 3 and 1 tokens: two ITL gaps, TPOT over 4 tokens
    cost = LinearCost(base_s=1e-3, per_token_s=0.0)
    w = workload([10], [5], acc=lambda r, t, k: 2, dr=lambda r, t, k: 4)
    m = simulate(w, cost, EngineConfig(), suffix(4), load=ClosedLoop(1)).metrics
    assert m.itl_ms_p50 == pytest.approx(1.0) and m.itl_ms_p99 == pytest.approx(1.0)
    assert m.tpot_ms_p50 == pytest.approx(2.0 / 4)
    assert m.tokens_per_step == pytest.approx((3 + 1) / 2)


def test_open_loop_given_timestamps_are_used_as_arrivals():
    cost = LinearCost(base_s=1e-3, per_token_s=0.0)
    stamps = (0.0, 0.5, 0.5, 2.0)
    res = simulate(workload([20] * 4, [3] * 4), cost, EngineConfig(), vanilla(),
                   load=OpenLoop(timestamps=stamps), num_requests=4, keep_steps=True)
    # the two requests arriving together at 0.5 s share their prefill step
    assert [d.num_reqs for d, _ in res.step_log] == [1, 1, 1, 2, 2, 2, 1, 1, 1]
    assert res.metrics.sim_time_s == pytest.approx(2.003)
