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


def test_capture_lists_equal_every_recorded_run_of_both_vllm_versions():
    """The lists simkit builds under each version's rule are the lists vLLM logged (runs.parquet
    `capture_sizes`), for every configuration and K measured with 0.26 and with 0.33."""
    import json
    from pathlib import Path

    import pandas as pd

    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.costmodel.step_records import version_of

    data = Path(__file__).resolve().parents[2] / "calibrate" / "data"
    runs = pd.concat([pd.read_parquet(p) for p in sorted(data.rglob("runs*.parquet"))])
    seen = set()
    for row in runs.drop_duplicates(["vllm_version", "config", "k"]).to_dict("records"):
        v = get_vllm_version(version_of(row["vllm_version"]))
        k = int(row["k"])
        mine = capture_sizes(int(row["max_num_seqs"]), k, int(row["max_num_batched_tokens"]),
                             uniform_decode_sizes=v.uniform_decode_sizes)
        assert mine == json.loads(row["capture_sizes"]), (v.key, row["config"], k)
        seen.add((v.key, k))
    assert {("0.26", 4), ("0.26", 12), ("0.33", 4), ("0.33", 12), ("0.33", 24)} <= seen


def test_vllm_033_adds_request_count_sizes_only_where_the_grid_had_gaps():
    old = capture_sizes(1024, 6, 8192)
    new = capture_sizes(1024, 6, 8192, uniform_decode_sizes=True)
    assert sorted(set(new) - set(old)) == [280, 392, 504] and old[-1] == 497
    assert capture_sizes(1024, 12, 8192, uniform_decode_sizes=True) == capture_sizes(1024, 12, 8192)
    assert capture_sizes(1024, 0, 8192, uniform_decode_sizes=True) == capture_sizes(1024, 0, 8192)


def test_unknown_vllm_version_is_one_error_naming_the_known_ones():
    import pytest

    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="0.26, 0.33"):
        get_vllm_version("0.30")
    assert get_vllm_version("0.33.0").key == get_vllm_version("v0.33").key == "0.33"
    assert get_vllm_version().key == "0.33"
