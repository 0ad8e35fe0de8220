"""The repeat floor: each repeated run predicted by the mean of its setting's other runs."""
import math

import pandas as pd
import pytest

from simkit.costmodel.step_records import forcing_regime, select_version
from simkit.validation.floor import floor_line, leave_one_out, repeat_floor, runner_class
from simkit.validation.measured import load_records


def _run(run_id, tok, start, config="vanilla", k=0, asynchronous=True, corpus="chat",
         purpose="validation", force="pinned-async"):
    return {"run_id": run_id, "purpose": purpose, "model": "m", "corpus": corpus,
            "config": config, "k": k, "concurrency": 32, "num_requests": 64,
            "max_tokens_cap": 1024, "force_copy": force, "history": "cold",
            "async_scheduling": asynchronous, "output_tok_s": tok, "started_utc": start}


def test_each_run_is_predicted_by_its_other_repeats_within_and_across_sittings():
    runs = pd.DataFrame([
        _run("a1", 100.0, "2026-01-01T10:00:00Z"), _run("a2", 110.0, "2026-01-01T10:10:00Z"),
        _run("a3", 120.0, "2026-01-02T10:00:00Z"),                        # another sitting
        _run("s1", 200.0, "2026-01-01T10:20:00Z", "suffix", 24, False),
        _run("s2", 300.0, "2026-01-02T10:05:00Z", "suffix", 24, False),
        _run("once", 50.0, "2026-01-01T10:30:00Z", corpus="math"),        # no repeat
        _run("fleet", 100.0, "2026-01-01T10:40:00Z", corpus="fleet-x"),
        _run("chk", 100.0, "2026-01-01T10:45:00Z", purpose="check")])
    rows = {r["run_id"]: r for r in leave_one_out(runs)}
    assert sorted(rows) == ["a1", "a2", "a3", "s1", "s2"]
    assert rows["a1"]["error"] == pytest.approx(115 / 100 - 1)
    assert rows["a1"]["error_within"] == pytest.approx(110 / 100 - 1)
    assert rows["a1"]["error_across"] == pytest.approx(120 / 100 - 1)
    assert rows["a3"]["error_within"] is None and rows["a3"]["others_across"] == 2
    assert rows["s1"]["runner"] == "synchronous" and rows["a1"]["runner"] == "async"
    floor = repeat_floor(runs)
    sync = [abs(300 / 200 - 1), abs(200 / 300 - 1)]
    asy = [0.15, 0.0, abs(105 / 120 - 1)]     # a2: the mean of 100 and 120 is its own 110
    assert floor["runs"] == 5 and floor["settings"] == 2
    assert floor["by_runner"]["synchronous"]["mape_pct"] == pytest.approx(100 * sum(sync) / 2)
    assert floor["by_runner"]["async"]["mape_pct"] == pytest.approx(100 * sum(asy) / 3)
    assert floor["mape_pct"] == pytest.approx(100 * sum(sync + asy) / 5)
    assert floor["within_sitting"]["synchronous"]["runs"] == 0
    assert floor["within_sitting"]["async"]["mape_pct"] == pytest.approx(
        100 * (0.10 + abs(100 / 110 - 1)) / 2)
    # one other run carries as much drift as the run itself: sqrt(2) is divided out
    assert floor["by_runner"]["synchronous"]["true_mean_mape_pct"] == pytest.approx(
        100 * sum(sync) / 2 / math.sqrt(2))
    line = floor_line(floor)
    assert "5 runs of 2 settings" in line and "synchronous runner (speculative) 41.7 %" in line


def test_a_synchronised_vanilla_run_is_of_the_synchronous_class():
    assert runner_class(_run("v", 1.0, "", force="pageable-sync")) == "synchronous"
    assert runner_class(_run("v", 1.0, "")) == "async"
    assert runner_class(_run("k", 1.0, "", "kpad", 4, False)) == "synchronous"


def test_no_repeat_no_floor_line():
    runs = pd.DataFrame([_run("a", 1.0, "2026-01-01T10:00:00Z")])
    assert repeat_floor(runs)["runs"] == 0 and floor_line(repeat_floor(runs)) is None


@pytest.mark.parametrize("version", ["0.26", "0.33"])
def test_the_committed_records_floor_matches_a_groupby_recomputation(version):
    _, runs = load_records()
    runs = select_version(runs, version)
    floor = repeat_floor(runs)
    sel = runs[runs["purpose"].isin(["calibration", "validation"])
               & ~runs["corpus"].astype(str).str.startswith("fleet-")].copy()
    sel["regime"] = sel["force_copy"].map(forcing_regime)
    sel["hist"] = sel["history"].fillna("cold").replace("", "cold")
    sel["cap"] = sel["max_tokens_cap"].fillna(0).astype(int)
    sel["kk"] = sel["k"].fillna(0).astype(int).where(sel["config"] != "vanilla", 0)
    keys = ["model", "corpus", "config", "kk", "concurrency", "num_requests", "cap", "regime",
            "hist"]
    g = sel.groupby(keys)["output_tok_s"]
    n, total = g.transform("size"), g.transform("sum")
    rep = sel[n >= 2]
    loo = ((total - sel["output_tok_s"]) / (n - 1) / sel["output_tok_s"] - 1)[n >= 2].abs()
    assert floor["runs"] == len(rep) > 20
    assert floor["mape_pct"] == pytest.approx(100 * loo.mean())
    # the synchronous runner exposes host speed; the async runner hides most of it
    assert floor["by_runner"]["synchronous"]["mape_pct"] > 2 * floor["by_runner"]["async"]["mape_pct"]
