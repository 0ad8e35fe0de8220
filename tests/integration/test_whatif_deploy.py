"""The vLLM 0.34 deployment what-ifs on the shipped llama-3.1-8b / mix profile and the real cost
model: the derived batch-size table is simulated as the engine runs it (a one-range table is
that static K, figure for figure), concurrency names the best K of its set per level, and the
version what-if pairs each configuration with what the same words mean after the upgrade."""

from __future__ import annotations

import pytest

from simkit.app.options import RunOptions

SMALL = RunOptions("llama-3.1-8b", "mix", seeds=1, num_requests=128, source="shipped")


@pytest.fixture(scope="module")
def one_k_table():
    """K 4 beats no speculation at 8 and 32 clients, so the table is one range at K 4."""
    from simkit.whatif.batch_size_table import batch_size_table

    return batch_size_table(SMALL, levels="8,32", ks="0,4")


def test_a_one_range_table_is_that_static_k_figure_for_figure(one_k_table):
    res = one_k_table
    assert res.extra["table"] == [[1, 1024, 4]]
    assert [r["best_k"] for r in res.rows] == [4, 4] == [r["table_k"] for r in res.rows]
    assert res.extra["table_tok_s"] == res.extra["tok_s"]["4"]
    assert all(r["table_vs_best_k"] == 1.0 and r["static_k"] == 4 for r in res.rows)
    assert res.extra["serve_args"] == ("--speculative-config '{\"method\":\"suffix\","
                                       "\"num_speculative_tokens\":4,"
                                       "\"num_speculative_tokens_per_batch_size\":[[1,1024,4]]}'")
    assert any("transferred" in n for n in res.notes)


def test_ktable_is_refused_on_a_version_without_it():
    from simkit.errors import InputError
    from simkit.whatif.batch_size_table import batch_size_table

    with pytest.raises(InputError, match="not available on vLLM 0.33"):
        batch_size_table(SMALL.but(vllm_version="0.33"), levels="8", ks="0,4")


def test_concurrency_names_the_best_k_of_its_set_per_level_on_034():
    from simkit.whatif.concurrency import concurrency

    res = concurrency(SMALL.but(vllm_version="0.34"), levels="8", configs="vanilla", ks="0,4,16")
    names = {r["config"] for r in res.rows}
    assert names == {"vanilla", "suffix-4", "suffix-16"}
    tok = {r["config"]: r["output_tok_s"] for r in res.rows}
    best = max(((0, "vanilla"), (4, "suffix-4"), (16, "suffix-16")), key=lambda kn: tok[kn[1]])
    assert res.extra["best_k_per_concurrency"] == {"8": best[0]}
    assert any(n.startswith("best K of the set 0,4,16") for n in res.notes)


def test_version_whatif_pairs_each_config_with_its_meaning_after_the_upgrade():
    from simkit.whatif.vllm_version import vllm_version

    res = vllm_version(SMALL.but(num_requests=160), configs="vanilla,suffix,kpad:4")
    assert [(r["config"], r["to_config"]) for r in res.rows] == [
        ("vanilla", "vanilla"), ("suffix", "suffix"), ("kpad-4", "suffix-4")]
    for r in res.rows:
        assert r["vs_from"] == pytest.approx(r["to_tok_s"] / r["from_tok_s"])
        assert r["from_interval_pct"] > 0 and r["to_interval_pct"] is None   # 0.34: unmeasured
    van, suf = res.rows[0], res.rows[1]
    assert van["from_interval_pct"] < suf["from_interval_pct"]     # async band < synchronous
    assert res.extra["error"]["to"]["measured"] is False
    assert any(n.startswith("best after the upgrade (vLLM 0.34)") for n in res.notes)


def test_predict_on_034_prints_the_settings_of_its_recommendation():
    """End to end: predict fills Prediction.specs, so its report carries the settings line of
    the configuration it recommends, with the load it holds for."""
    import json

    from typer.testing import CliRunner

    from simkit.cli import app

    argv = ["predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--source", "shipped",
            "--vllm-version", "0.34", "--configs", "vanilla,suffix:4", "--seeds", "1",
            "--num-requests", "160", "--format", "json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)["recommendation"]
    settings = rec["settings"]
    assert settings["config"] == rec["config"] and settings["vllm_version"] == "0.34"
    if rec["config"] == "vanilla":
        assert settings["line"] == "run without --speculative-config"
    else:
        assert settings["speculative_config"] == {"method": "suffix", "num_speculative_tokens": 4}
    assert settings["holds_for"].startswith("this recommendation holds for concurrency 32")
