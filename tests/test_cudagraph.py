"""CUDA-graph capture sizes and dispatch follow vLLM 0.26's rules (facts sheet values by hand)."""

import pytest

from simkit.costmodel.batch import GraphMode
from simkit.engine.cudagraph import CudagraphMode, Dispatcher, capture_sizes, max_capture_size

FAP = CudagraphMode.FULL_AND_PIECEWISE


def test_vanilla_capture_list_is_vllm_default():
    sizes = capture_sizes(1024, 0, 8192, FAP)
    assert sizes[:5] == [1, 2, 4, 8, 16]
    assert sizes[-3:] == [480, 496, 512]
    assert 248 in sizes and 256 in sizes and 264 not in sizes   # step 8 below 256, 16 above
    assert len(sizes) == 3 + 31 + 17


def test_max_size_is_min_of_seqs_and_512_and_budget():
    assert max_capture_size(1024, 0, 8192) == 512
    assert max_capture_size(32, 0, 8192) == 64          # 32 * 1 * 2
    assert max_capture_size(32, 4, 8192) == 320         # 32 * 5 * 2
    assert max_capture_size(1024, 4, 256) == 256        # capped at the token budget
    assert capture_sizes(32, 0, 8192, FAP)[-1] == 64


@pytest.mark.parametrize("k, largest", [(4, 500), (8, 504), (12, 507), (6, 497)])
def test_spec_decode_rounds_sizes_to_multiples_of_q(k, largest):
    sizes = capture_sizes(1024, k, 8192, FAP)
    q = 1 + k
    assert all(s % q == 0 for s in sizes)
    assert sizes[-1] == largest                 # facts: K=4 -> 500, K=8 -> 504
    assert sizes == sorted(set(sizes))


def test_piecewise_only_mode_does_not_round():
    sizes = capture_sizes(1024, 4, 8192, CudagraphMode.PIECEWISE)
    assert sizes[-1] == 512 and 1 in sizes
    assert capture_sizes(1024, 4, 8192, CudagraphMode.NONE) == []


def test_uniform_decode_batch_is_full_and_padded_to_next_size():
    d = Dispatcher.build(FAP, 1024, 4, 8192)
    assert d.dispatch(7 * 5, 7, 5) == (GraphMode.FULL, 35)
    assert d.dispatch(1 * 5, 1, 5) == (GraphMode.FULL, 5)
    # 33 requests x 5 = 165 -> next rounded size (168 rounds to 170)
    assert d.dispatch(33 * 5, 33, 5) == (GraphMode.FULL, 170)


def test_non_uniform_batch_falls_to_piecewise():
    d = Dispatcher.build(FAP, 1024, 4, 8192)
    # drafts of 2 and 4: 3 + 5 tokens, max query 5 but 8 != 2 * 5
    assert d.dispatch(8, 2, 5) == (GraphMode.PIECEWISE, 10)
    # a prefill chunk of 100 tokens plus one uniform decode
    assert d.dispatch(105, 2, 100) == (GraphMode.PIECEWISE, 105)


def test_above_largest_capture_size_runs_eagerly():
    d = Dispatcher.build(FAP, 1024, 4, 8192)
    assert d.max_size == 500
    assert d.dispatch(101 * 5, 101, 5) == (GraphMode.NONE, 505)
    assert d.dispatch(100 * 5, 100, 5) == (GraphMode.FULL, 500)


def test_vanilla_decode_is_full_and_prefill_piecewise():
    d = Dispatcher.build(FAP, 1024, 0, 8192)
    assert d.dispatch(32, 32, 1) == (GraphMode.FULL, 32)
    assert d.dispatch(33, 32, 2) == (GraphMode.PIECEWISE, 40)
    assert d.dispatch(513, 1, 513) == (GraphMode.NONE, 513)


def test_full_mode_covers_non_uniform_and_none_mode_never_pads():
    full = Dispatcher.build(CudagraphMode.FULL, 1024, 4, 8192)
    assert full.dispatch(8, 2, 5) == (GraphMode.FULL, 10)
    pw = Dispatcher.build(CudagraphMode.PIECEWISE, 1024, 4, 8192)
    assert pw.dispatch(10, 2, 5) == (GraphMode.PIECEWISE, 16)
    none = Dispatcher.build(CudagraphMode.NONE, 1024, 4, 8192)
    assert none.dispatch(10, 2, 5) == (GraphMode.NONE, 10)


def test_full_decode_keys_stop_at_q_times_max_num_seqs():
    # max_num_seqs 3, K=4: capture max min(3*5*2, 512) = 30; [1,2,4,8,16,24] rounded to 5s
    d = Dispatcher.build(FAP, 3, 4, 8192)
    assert d.sizes == (5, 10, 20, 25)
    assert d.dispatch(15, 3, 5) == (GraphMode.PIECEWISE, 20)  # padded 20 > 3*5: no FULL key
    assert d.dispatch(10, 2, 5) == (GraphMode.FULL, 10)
