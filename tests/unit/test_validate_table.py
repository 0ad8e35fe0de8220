"""`simkit validate`'s text table keeps whole run ids and aligned columns (issue 17)."""

from simkit.validation.table import render

LONG = "llama-3.1-70b_vanilla-tp2-unforced_chat_c32_n64"     # 47 characters


def _cell(run_id, stock, acc):
    return {"run_id": run_id, "measured_tok_s": 1395.2, "predicted_tok_s": 1238.0,
            "error": -0.112, "predicted_tok_s_stock_async": stock,
            "measured_accepted_per_step": acc, "predicted_accepted_per_step": acc,
            "measured_step_ms": 22.9, "predicted_step_ms": 25.8}


def test_run_ids_are_not_cut_and_missing_values_keep_their_column():
    doc = {"cells": [_cell(LONG, None, None), _cell("short_run", 5165.0, 0.264)],
           "mape": 5.1, "mape_calibration": None, "acceptance_replay": {},
           "table_ordering": "concurrent", "best_k_agreement": {"total": 0},
           "best_k_agreement_calibration": {"total": 0},
           "dynamic_k": {"status": "not measured", "why": "no run"}}
    lines = render(doc, wide=True).splitlines()
    head, rows = lines[0], lines[2:4]
    assert rows[0].startswith(LONG + " ")
    assert all(len(r) == len(head) for r in rows)
    # every column's right edge is where the header's is, "-" included
    for name in ("stock", "accM", "stepP"):
        edge = head.index(name) + len(name)
        assert all(r[edge - 1] != " " and (edge == len(r) or r[edge] == " ") for r in rows), name


def test_the_table_fits_100_columns_and_names_what_wide_adds():
    """A 63-character run id (the longest of the vLLM 0.33 records) with the stock column: the
    step columns, then stock, leave the default table, and one line says --wide has them."""
    rid = "llama-3.1-8b_dynamic-feedback12-v033-1203c_math_c32_n128_rep0.5"[:63]
    doc = {"cells": [_cell(rid, 5165.0, 0.264), _cell("short_run", None, 0.3)],
           "mape": 5.1, "mape_calibration": None, "acceptance_replay": {},
           "table_ordering": "concurrent", "best_k_agreement": {"total": 0},
           "best_k_agreement_calibration": {"total": 0},
           "dynamic_k": {"status": "not measured", "why": "no run"}}
    out = render(doc)
    assert max(len(line) for line in out.splitlines()) <= 100
    head = out.splitlines()[0]
    assert "accP" in head and "stepM" not in head and "stock" not in head
    assert "--wide shows 3 more column(s): stepM, stepP, stock" in " ".join(out.split())
    wide = render(doc, wide=True)
    assert all(c in wide.splitlines()[0] for c in ("stock", "stepM", "stepP"))
    assert "--wide shows" not in wide


def test_prose_wraps_at_100_and_a_column_of_dashes_is_left_out():
    doc = {"cells": [_cell("short_run", None, 0.264), _cell("other_run", None, 0.3)],
           "mape": 5.1, "mape_calibration": None, "acceptance_replay": {},
           "table_ordering": "concurrent", "best_k_agreement": {"total": 0},
           "best_k_agreement_calibration": {"total": 0},
           "dynamic_k": {"status": "not measured", "why": "no dynamic-K run " * 12}}
    lines = render(doc).splitlines()
    assert "stock" not in lines[0] and "stock:" not in render(doc)   # no run has the figure
    assert max(len(line) for line in lines) <= 100
    why = [ln for ln in lines if "dynamic-K" in ln or ln.startswith("  no dynamic")]
    assert len(why) > 1 and all(ln.startswith("  ") for ln in why[1:])   # wrapped, indented
    assert " ".join(" ".join(why).split()).endswith("no dynamic-K run )")   # every word kept


def test_mape_against_the_setting_mean_averages_repeats_and_skips_single_runs():
    """Two runs of one setting measured 90 and 110 tok/s, predicted 100 each: 10 % per run, 0 %
    against their mean; a setting run once and the calibration runs do not count."""
    import pytest

    from simkit.validation.report import setting_mean_mape

    def run(run_id, meas, pred, purpose="validation", corpus="chat"):
        return {"run_id": run_id, "purpose": purpose, "model": "m", "corpus": corpus,
                "concurrency": 32, "num_requests": 64, "config": "suffix-24",
                "measured_tok_s": meas, "predicted_tok_s": pred, "error": pred / meas - 1}

    cells = [run("a", 90.0, 100.0), run("b", 110.0, 100.0), run("c", 50.0, 100.0, corpus="math"),
             run("d", 200.0, 100.0, purpose="calibration"), run("e", 200.0, 100.0, "calibration")]
    got = setting_mean_mape(cells)
    assert got == {"mape_pct": pytest.approx(0.0), "settings": 1, "runs": 2}
    got = setting_mean_mape([run("a", 90.0, 120.0), run("b", 110.0, 120.0)])
    assert got["mape_pct"] == pytest.approx(20.0)
    assert setting_mean_mape([run("c", 50.0, 100.0)])["mape_pct"] is None


def test_repeated_settings_that_differ_only_in_history_are_told_apart():
    """A cold and a hot setting of the same runs are two lines with two labels (they were
    printed under one)."""
    group = {"model": "llama-3.1-8b", "corpus": "chat", "concurrency": 32, "num_requests": 64,
             "max_tokens_cap": 1024, "forcing": "overlapped", "config": "suffix-24",
             "measured_tok_s": [2485.0, 3860.0], "spread": 0.553}
    doc = {"cells": [_cell("short_run", None, 0.3)], "mape": 5.1, "mape_calibration": None,
           "acceptance_replay": {}, "table_ordering": "concurrent",
           "best_k_agreement": {"total": 0}, "best_k_agreement_calibration": {"total": 0},
           "dynamic_k": {"status": "not measured", "why": "no run"},
           "repeatability": {"groups": [dict(group, history="cold"),
                                        dict(group, history="hot", measured_tok_s=[17820.0,
                                                                                   19563.0])],
                             "mean_spread": 0.3, "max_spread": 0.553}}
    labels = [ln.split(":")[0].strip() for ln in render(doc).splitlines()
              if ln.startswith("  llama-3.1-8b chat c32 n64 suffix-24")]
    assert labels == ["llama-3.1-8b chat c32 n64 suffix-24 (overlapped, cold)",
                      "llama-3.1-8b chat c32 n64 suffix-24 (overlapped, hot)"]
