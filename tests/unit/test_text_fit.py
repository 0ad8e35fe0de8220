"""simkit.report.fit: text tables that fit 100 columns without cutting a cell, and name every
column they leave out; the what-if renderer built on it."""

from __future__ import annotations

import json
from pathlib import Path

from simkit.report.fit import fit_columns, more_columns_line, render_text_table

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _table(n_cols: int, cell: str = "12,345", header: str = "a long header name"):
    headers = [f"{header} {i}" for i in range(n_cols)]
    rows = [[cell] * n_cols for _ in range(3)]
    return headers, rows


def test_columns_that_fit_are_kept_whole_and_the_rest_named():
    headers, rows = _table(20)
    kept = fit_columns(headers, rows, 100)
    assert 0 < len(kept) < 20 and kept == list(range(len(kept)))   # left to right by default
    text = render_text_table([headers[i] for i in kept], [[r[i] for i in kept] for r in rows])
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 100
    body = lines[[i for i, ln in enumerate(lines) if ln.startswith("━")][0] + 1:]
    assert len(body) == 3                                   # one line per row: no cell wrapped
    assert all([c.strip() for c in ln.split("│")] == ["12,345"] * len(kept) for ln in body)
    note = " ".join(" ".join(more_columns_line([h for i, h in enumerate(headers)
                                                if i not in kept])).split())
    assert note.startswith(f"--wide shows {20 - len(kept)} more columns: ")
    assert all(headers[i] in note for i in range(20) if i not in kept)


def test_a_table_that_fits_is_printed_unchanged_with_no_note():
    headers, rows = _table(3)
    assert fit_columns(headers, rows, 100) == [0, 1, 2]
    lines = render_text_table(headers, rows).splitlines()
    assert lines[0].split(" ┃ ") == headers                   # one header line, nothing wrapped
    assert more_columns_line([]) == []


def test_priority_decides_which_columns_stay_and_table_order_is_kept():
    headers = [f"col{i}" for i in range(10)]
    rows = [["x" * 20] * 10]
    kept = fit_columns(headers, rows, 70, priority=[9, 0, 5, 1, 2, 3, 4, 6, 7, 8])
    assert kept == [0, 5, 9]


def test_headers_wrap_at_their_words_before_a_column_is_left_out():
    headers = ["max rate per replica", "out tok s per replica", "ttft ms p99"] * 3
    rows = [["5.28", "2,087", "32.70"] * 3]
    kept = fit_columns(headers, rows, 90)
    assert len(kept) == 9
    lines = render_text_table(headers, rows, width=90).splitlines()
    assert max(len(ln) for ln in lines) <= 90 and lines[-1].split(" │ ")[0].strip() == "5.28"
    assert sum("┃" in ln for ln in lines) > 1                # the header block wrapped


def test_a_what_if_renders_in_100_columns_and_wide_keeps_every_column():
    from simkit.commands.whatif import render
    from simkit.whatif.common import WhatIfResult

    doc = json.loads((GOLDEN / "whatif-concurrency-json.out").read_text())
    cols = doc["columns"] + ["ttft_ms_p99", "kv_capacity_tokens", "host_frac"]
    rows = [dict(r, ttft_ms_p99=81.5, kv_capacity_tokens=824_304, host_frac=0.31)
            for r in doc["rows"]]
    res = WhatIfResult(doc["whatif"], doc["question"], cols, rows, doc["params"],
                       doc["notes"] + ["a very long note " * 12])
    out = render(res)
    assert max(len(ln) for ln in out.splitlines()) <= 100
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("━"))
    blocks = [[p.strip() for p in ln.split("┃")] for ln in lines[1:rule]]
    shown = [" ".join(w for w in col if w) for col in zip(*blocks)]
    assert shown == [c.replace("_", " ") for c in cols[:len(shown)]] and len(shown) < len(cols)
    note = " ".join(" ".join(ln for ln in lines if ln.startswith(("--wide", "  ("))).split())
    assert note.startswith(f"--wide shows {len(cols) - len(shown)} more column")
    assert note.split(": ", 1)[1].split(" (")[0].split(", ") == cols[len(shown):]
    wide = render(res, wide=True)
    header = next(ln for ln in wide.splitlines() if "┃" in ln)
    assert [h.strip() for h in header.split("┃")] == cols and "--wide shows" not in wide
    for note in doc["notes"]:                               # every note, wrapped but whole
        assert " ".join(note.split()) in " ".join(out.replace("\n  ", " ").split())


def test_fleet_validate_table_fits_100_columns_and_wide_has_every_column():
    from simkit.fleet.report import render_validation

    row = {"run_id": "llama-3.1-8b_fleet-prefix-affinity_r2", "policy": "prefix-affinity",
           "replica": 1, "config": "kpad-8", "requests": 412, "requests_match_records": True,
           "measured_accepted_per_step": 1.234, "predicted_accepted_per_step": 1.240,
           "accepted_error": 0.0049, "table_accepted_per_step": 1.5,
           "table_accepted_error": 0.21, "measured_tok_s": 3456.7, "predicted_tok_s": 3500.1,
           "tok_s_error": 0.0126}
    from simkit.fleet.validate import summary as summarise

    rows = [dict(row, within_goal=True), dict(row, replica=2, within_goal=True,
                                               policy="round-robin", accepted_error=-0.0146)]
    summary = summarise(rows)
    out = render_validation(rows, summary)
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "--wide shows" in out
    said = " ".join(out.split())
    assert "runs: 2 (2 speculative)" in said
    mean = f"{100 * (0.0049 + 0.0146) / 2:.2f}"
    assert f"mean |error| {mean} %, worst 1.46 %; within 2 % in 2 of 2 speculative runs" in said
    assert "prefix-affinity 1.234 / 1.240, round-robin 1.234 / 1.240; ranking agrees" in said
    assert "{" not in out and "0.0146" not in out      # words and rounded figures, not a dict
    wide = render_validation([row], summary, wide=True)
    header = next(ln for ln in wide.splitlines() if ln.startswith("run_id"))
    assert len(header.split("┃")) == 14 and "--wide shows" not in wide


def test_headers_wrap_into_the_fewest_lines_and_evenly():
    headers = ["max rate per replica", "out tok s per replica", "output tok s"]
    rows = [["5.28", "2,087", "714"]]
    lines = render_text_table(headers, rows, width=38).splitlines()
    head = lines[:[i for i, ln in enumerate(lines) if ln.startswith("━")][0]]
    assert len(head) == 2 and max(len(ln) for ln in lines) <= 38      # two lines suffice
    cols = [[p.strip() for p in ln.split("┃")] for ln in head]
    assert [c[2] for c in cols] == ["output", "tok s"]                 # not 'output tok' / 's'


def test_wrapped_fields_keep_their_label_column_and_the_width():
    from simkit.report.fit import wrap_field, wrap_prose

    value = "a value of many words, " * 12 + "https://example.org/" + "x" * 120
    lines = wrap_field("source", value, 10, width=60)
    assert lines[0].startswith("source    a value") and len(lines) > 5
    assert all(len(ln) <= 60 for ln in lines)
    assert all(ln.startswith(" " * 10) and ln[10] != " " for ln in lines[1:])
    squeeze = lambda t: "".join(t.split())
    assert squeeze("".join(lines)) == "source" + squeeze(value)        # nothing lost or added
    assert wrap_prose("", indent="  ") == [""]
    assert wrap_prose("short", width=100) == ["short"]
