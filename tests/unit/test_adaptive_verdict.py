"""Whether to turn adaptive verification on: the suffix-av row against the suffix row of the same
K (simkit.app.verdict.adaptive_verdict), the default 0.34 ladder that carries it, and its rows kept
out of the best fixed K."""

from __future__ import annotations

from simkit.app.verdict import adaptive_verdict, best_kpad, is_adaptive, is_exact_k
from simkit.catalog.vllm_versions import get_vllm_version
from simkit.engine.config import DEFAULT_CONFIGS, ladder_configs, parse_configs
from simkit.engine.summary import Row


def _row(config, k, tok_s, std=0.0, slots=None, share=None):
    return Row(config, k, tok_s, std, None, 1.0, 0.5, 0.0, 5.0, 20.0,
               mean_admitted_slots=slots, budget_share_of_k=share)


def test_turn_on_leave_off_or_either_by_the_tie_rule():
    base = [_row("vanilla", 0, 4000.0), _row("suffix", 8, 6000.0), _row("suffix-4", 4, 7000.0)]
    on = adaptive_verdict(base + [_row("suffix-av", 8, 7500.0, slots=1.4, share=0.175)], "0.34")
    assert "K=8: +25.0% tok/s against suffix (7,500 vs 6,000)" in on
    assert "verifying 1.4 of 8 slots per request-step (18% of K)" in on
    assert "turn it on" in on and "not yet measured" in on
    off = adaptive_verdict(base + [_row("suffix-av-4", 4, 6500.0, slots=3.0, share=0.75)], "0.34")
    assert "against suffix-4" in off and "leave it off" in off
    tie = adaptive_verdict(base + [_row("suffix-av", 8, 6030.0, slots=7.0, share=0.9)], "0.34")
    assert "either setting" in tie                  # +0.5 %: inside the 1 % drift
    assert adaptive_verdict(base, "0.34") == ""
    assert adaptive_verdict([_row("suffix-av-6", 6, 7000.0)], "0.34") == ""   # no suffix-6 row


def test_adaptive_rows_are_not_the_best_fixed_k():
    rows = [_row("suffix", 8, 6000.0), _row("suffix-av", 8, 9000.0), _row("suffix-av-4", 4, 9500.0)]
    assert best_kpad(rows, exact_k=True).config == "suffix"
    assert is_adaptive("suffix-av-4") and not is_exact_k("suffix-av")
    assert is_exact_k("suffix-4") and not is_adaptive("suffix-4")


def test_default_ladder_adds_suffix_av_on_034_only():
    v034, v033 = get_vllm_version("0.34"), get_vllm_version("0.33")
    names = [c.name for c in parse_configs(ladder_configs(DEFAULT_CONFIGS, v034), "0.34")]
    assert names[-1] == "suffix-av" and names.count("suffix-av") == 1
    assert ladder_configs(DEFAULT_CONFIGS, v033) == DEFAULT_CONFIGS
    assert ladder_configs("vanilla,suffix", v034) == "vanilla,suffix"   # what the user asked
