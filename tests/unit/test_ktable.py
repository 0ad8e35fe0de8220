"""Batch-size K tables (simkit.whatif.ktable) and the settings line (simkit.report.deploy)."""

from __future__ import annotations

import json
import shlex

import pytest

from simkit.report.deploy import DeploySettings, serve_args, speculative_config, table_settings
from simkit.whatif.ktable import best_k_per_level, format_table, k_at, table_from_choices
from tests.vllm_oracle import dynamic_schedule_module


LEVELS = [8, 32, 64, 128]
TOK_S = {0: [900, 3000, 5200, 8000], 4: [1500, 3900, 5300, 7000], 8: [1700, 3800, 4900, 6000]}


def test_best_k_per_level_and_margins():
    got = best_k_per_level(LEVELS, TOK_S)
    assert [c.k for c in got] == [8, 4, 4, 0]
    assert got[0].runner_up_k == 4 and got[0].margin == pytest.approx(1700 / 1500 - 1)
    assert got[3].runner_up_k == 4 and got[3].margin == pytest.approx(8000 / 7000 - 1)


def test_ties_go_to_the_smaller_k():
    assert best_k_per_level([16], {4: [10.0], 8: [10.0]})[0].k == 4


def test_table_boundaries_sit_between_levels_and_cover_every_batch_size():
    table = table_from_choices(best_k_per_level(LEVELS, TOK_S), 1024)
    assert table == [(1, 16, 8), (17, 90, 4), (91, 1024, 0)]   # isqrt(8*32)=16, isqrt(64*128)=90
    assert format_table(table) == "1-16:8,17-90:4,91-1024:0"
    assert [k_at(table, b) for b in (1, 8, 16, 17, 64, 90, 91, 2000)] == [8, 8, 8, 4, 4, 4, 0, 0]


def test_one_k_everywhere_is_one_range():
    assert table_from_choices(best_k_per_level([8, 64], {4: [2, 2], 8: [1, 1]}), 256) == \
        [(1, 256, 4)]


@pytest.mark.parametrize("bad", [([], {}), ([8, 8], {4: [1, 1]}), ([0, 8], {4: [1, 1]}),
                                 ([8, 16], {4: [1]}), ([8], {-1: [1]})])
def test_bad_levels_are_refused(bad):
    levels, tok_s = bad
    with pytest.raises(ValueError):
        best_k_per_level(levels, tok_s)


def test_speculative_config_writes_only_what_differs_from_vllm():
    assert speculative_config(DeploySettings(None)) is None
    assert serve_args(DeploySettings(None)) == ""
    assert speculative_config(DeploySettings("suffix", 8)) == \
        {"method": "suffix", "num_speculative_tokens": 8}
    s = table_settings([(1, 16, 8), (17, 90, 4), (91, 1024, 0)], adaptive=True)
    cfg = speculative_config(s)
    assert cfg == {"method": "suffix", "num_speculative_tokens": 8,
                   "num_speculative_tokens_per_batch_size": [[1, 16, 8], [17, 90, 4], [91, 1024, 0]],
                   "enable_adaptive_verification": True}
    args = serve_args(s)
    flag, value = shlex.split(args)
    assert flag == "--speculative-config" and json.loads(value) == cfg
    assert table_settings([(1, 1024, 0)]).method is None
    with pytest.raises(ValueError):
        DeploySettings("suffix", 4, ((1, 8, 8),))


def test_derived_tables_pass_vllms_own_checks_and_expand_as_ours():
    """vLLM 0.34's own validation and dense expansion of the batch-size schedule (loaded from the
    installed wheel's pure-Python file) accept our tables and give our K at every batch size."""
    vllm_schedule = dynamic_schedule_module()
    for tok_s in (TOK_S, {4: [1, 2, 3, 4], 12: [4, 3, 2, 1]}, {2: [5, 5, 5, 5]}):
        table = table_from_choices(best_k_per_level(LEVELS, tok_s), 1024)
        top = max(k for *_, k in table) or 1
        dense = vllm_schedule.build_dynamic_sd_schedule_lookup([list(r) for r in table], 1024, top)
        assert dense[1:] == [k_at(table, b) for b in range(1, 1025)]
