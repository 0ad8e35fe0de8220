"""The planner's report (simkit.report): assumptions, legend, recommendation, and their table,
JSON, CSV and HTML renderings (issue 17). Built on a hand-made Prediction so every expected
figure is visible here; tests/integration/test_predict.py runs the real ladder through the CLI."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from simkit.engine.config import EngineConfig
from simkit.engine.cudagraph import capture_sizes, CudagraphMode
from simkit.app.options import RunOptions
from simkit.app.predict import Prediction
from simkit.engine.summary import DETAIL_KEYS, RESULT_KEYS, Row
from simkit.history import parse_history
from simkit.report.assumptions import build_assumptions
from simkit.report.legend import COLUMNS, key_meanings
from simkit.report.recommend import recommendation
from simkit.report.render import document, render_csv, render_table

PROV = {"tree": "warm", "tree_rule": "warm: sequential replay of the whole corpus",
        "drafter": {"max_tree_depth": 24, "max_spec_factor": 1.0, "min_token_prob": 0.1},
        "corpus_requests": 1000, "sample_indices": list(range(128)),
        "sources": {"gsm8k": {"producer": "Llama-3.1-8B-Instruct", "files": []}}}


def _row(name, k, tput, std, *, acc=0.0, host=0.0, step_ms=6.0, mean_k=None, ks=None):
    return Row(name, k, tput, std, None, 0.85, acc, host, 7.0, 20.0, ks=ks,
               tokens_per_step=1 + acc, piecewise_steps_frac=0.1, none_steps_frac=0.02,
               mean_k=float(k if mean_k is None else mean_k), itl_ms_p99=20.0,
               padded_token_waste=0.3 if k else 0.0, preemptions=0.0, tpot_ms_p99=9.0,
               ttft_ms_p99=80.0, mean_step_ms=step_ms)


def _pred(rows, *, tree="warm", calibration="h200-vllm026"):
    van = next(r for r in rows if r.config == "vanilla")
    for r in rows:
        r.speedup_vs_vanilla = r.output_tok_s / van.output_tok_s
    prov = dict(PROV, tree=tree, tree_rule=f"{tree}: rule text")
    run = RunOptions(model="llama-3.1-8b", corpus="math", hardware="h200", tp=1, concurrency=32,
                     num_requests=128, seeds=3, calibration=calibration,
                     history=parse_history(tree), prefix_caching=False)
    return Prediction(run=run, cost_label="calibrated h200-vllm026",
                      load="closed loop, concurrency 32", proxy_note="", origin="shipped",
                      rows=rows, unavailable={}, skipped={}, best_config=None, best_k=None,
                      dynamic_verdict="", why="",
                      engine=EngineConfig(max_tokens=4096, max_num_seqs=256,
                                          max_num_batched_tokens=2048, kv_capacity_tokens=800_000,
                                          cudagraph_mode=CudagraphMode.PIECEWISE),
                      tp_chosen=True, workload_provenance=prov)


def _spec_wins():
    return _pred([_row("vanilla", 0, 4000, 20, step_ms=6.0),
                  _row("suffix", 24, 4600, 30, acc=0.9, host=0.3, step_ms=9.0, mean_k=24),
                  _row("kpad-4", 4, 4400, 25, acc=0.8, host=0.3, step_ms=8.0),
                  _row("dynamic-table", 12, 4400, 25, acc=0.8, host=0.3, step_ms=8.0, mean_k=4,
                       ks="4,6,12")])


def _vanilla_wins():
    return _pred([_row("vanilla", 0, 4650, 53, step_ms=6.7),
                  _row("suffix", 24, 4156, 208, acc=0.67, host=0.36, step_ms=12.6, mean_k=24),
                  _row("kpad-4", 4, 4056, 93, acc=0.62, host=0.36, step_ms=12.7)])


# -- assumptions ------------------------------------------------------------------------------
def test_assumptions_state_what_decides_the_answer_from_the_inputs():
    a = build_assumptions(_pred(_spec_wins().rows, tree="cold"))
    assert a["suffix_tree"]["value"] == "cold"                        # the workload's history
    assert a["max_tokens"]["value"] == 4096 and "4,096" in a["max_tokens"]["text"]
    assert a["max_num_seqs"]["value"] == 256
    assert a["max_num_batched_tokens"]["value"] == 2048
    graphs = a["cudagraph"]["value"]
    assert graphs["mode"] == "PIECEWISE"
    # the prediction's engine follows the newest vLLM (0.33): its spec-decode size list
    assert graphs["capture_sizes"]["4"] == capture_sizes(256, 4, 2048, CudagraphMode.PIECEWISE,
                                                         uniform_decode_sizes=True)
    assert a["vllm"]["value"]["version"] == "0.33.0"
    assert set(graphs["capture_sizes"]) == {"0", "4", "6", "12", "24"}
    assert a["hardware"]["value"]["host_speed"] == 1.0
    assert "output" in a["tok_s"]["text"] and "ONE replica" in a["tok_s"]["text"]
    assert "not a validated forecast" in a["status"]["text"]
    assert "128 of its 1,000 requests" in a["workload"]["text"]


def test_cost_model_error_is_the_calibrations_recorded_figure():
    from simkit.costmodel.calibrations import read_calibration

    val = read_calibration("h200-vllm026")["validation"]
    cost = build_assumptions(_spec_wins())["cost_model"]
    assert cost["value"]["validation"] == val
    assert f"MAPE {val['held_out_mape_pct']:.1f} %" in cost["text"]
    assert f"{val['held_out_runs']} held-out runs" in cost["text"]
    analytic = build_assumptions(_pred(_spec_wins().rows, calibration="analytic"))["cost_model"]
    assert analytic["value"]["validation"] is None and "never measured" in analytic["text"]


def test_calibration_validation_figures_are_the_ones_docs_validation_quotes():
    """The machine-readable copy must not drift from the committed validation report."""
    from pathlib import Path

    from simkit.costmodel.calibrations import read_calibration

    val = read_calibration("h200-vllm026")["validation"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "validation.md").read_text()
    assert f"MAPE held-out ({val['held_out_runs']} validation runs): " \
           f"{val['held_out_mape_pct']:.1f} %** ({val['held_out_mape_pct']:.2f} %)" in doc
    assert f"calibration runs ({val['calibration_runs']}): {val['calibration_mape_pct']:.1f} %" in doc
    assert f"worst {val['worst_held_out_pct']:+.1f} %" in doc
    assert f"max **{val['repeat_spread_max_pct']:.1f} %**" in doc


# -- recommendation ---------------------------------------------------------------------------
def test_recommendation_names_the_winner_with_its_margin_and_reason():
    rec = recommendation(_spec_wins())
    assert rec["config"] == "suffix"
    assert rec["line"].startswith("run suffix: +15.0 % over vanilla (4,600 vs 4,000 tok/s)")
    assert "best fixed K = 4 (kpad-4, 4,400 tok/s, +10.0 % vs vanilla)" in rec["line"]
    # dynamic-table ran K=4 throughout: say so rather than print twin figures without a word
    assert "dynamic-table chose K=4 on every step" in rec["line"]
    assert "dynamic-table's figures are kpad-4's" in rec["line"]
    why = rec["reasons"][-1]
    assert "1.90 tokens per step against vanilla's 1.00 (x1.90)" in why
    assert "9.00 ms against 6.00 ms (x1.50)" in why


def test_vanilla_recommendation_quotes_the_best_speculative_loss():
    rec = recommendation(_vanilla_wins())
    assert rec["config"] == "vanilla"
    assert rec["line"].startswith("run vanilla (no speculation): the best speculative config, "
                                  "suffix, is -10.6 % (4,156 vs 4,650 tok/s)")
    assert "x1.88" in rec["reasons"][-1]          # 12.6 / 6.7 ms


def test_a_lead_inside_the_model_error_is_flagged():
    pred = _pred([_row("vanilla", 0, 4000, 5), _row("kpad-4", 4, 4100, 5, acc=0.8, step_ms=7)])
    assert "less than the cost model's held-out error (5.1 %)" in \
        recommendation(pred, model_error_pct=5.14)["reasons"][0]
    assert not any("held-out" in r for r in recommendation(pred)["reasons"])


def test_a_lead_inside_the_rerun_interval_is_a_tie_within_the_error():
    pred = _pred([_row("vanilla", 0, 4000, 5), _row("kpad-4", 4, 4400, 5, acc=0.8, step_ms=7),
                  _row("suffix", 24, 4600, 5, acc=0.9, step_ms=9, mean_k=24)])
    rec = recommendation(pred, model_error_pct=5.14, interval_pct=14.3)
    # suffix leads kpad-4 by 4.5 % and vanilla by 15.0 %: only kpad-4 is inside +-14.3 %
    assert "tie within the error with kpad-4 (4.5 % apart, inside the ±14.3 % interval)" in rec["line"]
    assert "suffix and kpad-4 are not told apart" in rec["reasons"][0]
    assert "90 % interval for a rerun is ±14.3 %" in rec["reasons"][0]
    wide = recommendation(pred, interval_pct=20.0)["line"]
    assert "2 of the 2 other configs are inside it, vanilla among them" in wide
    # a lead wider than the interval is a call; without an interval the MAPE rule stays
    assert "tie within" not in recommendation(pred, interval_pct=4.0)["line"]
    assert "tie within" not in recommendation(pred, model_error_pct=5.14)["line"]


def test_a_seed_spread_near_tie_still_states_the_rerun_interval():
    """The seed spread is the narrower test: a lead inside it is inside the interval too, and
    the line says so (it used to drop the interval whenever the seed spread had spoken)."""
    pred = _pred([_row("vanilla", 0, 4000, 5), _row("kpad-4", 4, 4550, 80, acc=0.8, step_ms=7),
                  _row("suffix", 24, 4600, 80, acc=0.9, step_ms=9, mean_k=24)])
    rec = recommendation(pred, interval_pct=17.5)
    assert any(r.startswith("near-tie: suffix leads kpad-4") for r in rec["reasons"])
    assert "tie within the error with kpad-4 (1.1 % apart, inside the ±17.5 % interval; " \
           "2 of the 2 other configs are inside it, vanilla among them)" in rec["line"]
    # a simpler config preferred inside the seed spread is tied with the faster one as well
    simpler = _pred([_row("vanilla", 0, 4550, 80), _row("suffix", 24, 4600, 80, acc=0.9,
                                                          step_ms=9, mean_k=24)])
    rec = recommendation(simpler, interval_pct=17.5)
    assert rec["config"] == "vanilla" and "tie within the error with suffix" in rec["line"]


# -- renderings -------------------------------------------------------------------------------
def _header(out: str) -> list[str]:
    """The table's column headers as printed (a header wrapped over lines joined again)."""
    lines = out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("━"))
    top = rule
    while top > 0 and "┃" in lines[top - 1]:
        top -= 1
    parts = [[p.strip() for p in line.split("┃")] for line in lines[top:rule]]
    return [" ".join(w for w in col if w) for col in zip(*parts)]


def test_table_puts_recommendation_and_ladder_first_and_every_assumption_after():
    pred = _spec_wins()
    out = render_table(pred)
    assert out.index("recommendation: run suffix") < out.index("config ") < out.index("Legend") \
        < out.index("Assumptions")
    for key in build_assumptions(pred):
        assert re.search(rf"^  {key} +\S", out[out.index("Assumptions"):], re.M), key
    assert max(len(line) for line in out.splitlines()) <= 100
    bare = render_table(pred, legend=False)
    assert "Legend" not in bare and "recommendation: run suffix" in bare


def test_default_table_fits_100_columns_and_names_the_columns_wide_adds():
    pred = _spec_wins()
    out = render_table(pred)
    shown = _header(out)
    assert shown[:3] == ["config", "K", "tok/s"] and "speedup" in shown and "acc/step" in shown
    left_out = [c.header for c in COLUMNS if c.header not in shown]
    assert left_out                                        # 17 columns never fit 100
    note = re.search(r"^--wide shows (\d+) more columns: (.*?) \(--format json", out.replace(
        "\n  ", " "), re.M)
    assert note and int(note.group(1)) == len(left_out)
    assert note.group(2).split(", ") == left_out
    legend = out[out.index("\nLegend\n"):out.index("Assumptions")]
    assert re.findall(r"^  (\S.*?)  ", legend, re.M) == shown
    wide = render_table(pred, wide=True)
    assert _header(wide) == [c.header for c in COLUMNS]
    assert "--wide shows" not in wide
    wide_legend = wide[wide.index("\nLegend\n"):]
    for col in COLUMNS:
        assert re.search(rf"^  {re.escape(col.header)} +\S", wide_legend, re.M), col.header
    for r in pred.rows:                                    # the same figures, fewer columns
        row = next(ln for ln in out.splitlines() if ln.startswith(r.config + " "))
        wide_row = next(ln for ln in wide.splitlines() if ln.startswith(r.config + " "))
        cells = dict(zip(_header(wide), (c.strip() for c in wide_row.split("│"))))
        assert [c.strip() for c in row.split("│")] == [cells[h] for h in shown]


def test_json_and_csv_carry_every_column_and_every_assumption():
    import pandas as pd

    pred = _spec_wins()
    doc = json.loads(json.dumps(document(pred)))
    assert list(doc["assumptions"]) == list(build_assumptions(pred))
    keys = [*RESULT_KEYS, *DETAIL_KEYS]
    assert all(list(r) == keys for r in doc["results"])
    assert set(keys) <= set(key_meanings()) and set(c.key for c in COLUMNS) <= set(keys)
    assert doc["recommendation"]["config"] == "suffix"
    text = render_csv(pred)
    frame = pd.read_csv(io.StringIO(text), comment="#")
    assert list(frame.columns) == ["model", "corpus", "hardware", "tp", *keys]
    assert frame["itl_ms_p99"].tolist() == [20.0] * 4
    assert frame["padded_token_waste"].tolist() == [0.0, 0.3, 0.3, 0.3]
    comments = [line for line in text.splitlines() if line.startswith("#")]
    for key in build_assumptions(pred):
        assert any(line.startswith(f"# assumption {key}: ") for line in comments), key
    assert any(line.startswith("# recommendation: run suffix") for line in comments)


class _Page(HTMLParser):
    """Collects what a reader of the page sees: ids, table cells, images, text."""

    def __init__(self):
        super().__init__()
        self.stack, self.cells, self.imgs, self.ids, self.text = [], {}, [], set(), []
        self.table = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self.table = a.get("id")
            self.cells.setdefault(self.table, [])
        if tag == "tr" and self.table:
            self.cells[self.table].append([])
        if tag == "img":
            self.imgs.append(a)
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        if tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.table and self.stack and self.stack[-1] in ("td", "th"):
            self.cells[self.table][-1].append(data.strip())
        self.text.append(data)


def test_html_report_is_one_self_contained_page(tmp_path):
    from simkit.report.html import render_html, write_html

    pred = _spec_wins()
    page = render_html(pred)
    assert page == render_html(pred)                         # byte-identical, plot included
    p = _Page()
    p.feed(page)
    ladder = p.cells["ladder"]
    assert ladder[0] == [c.header for c in COLUMNS]
    assert [row[0] for row in ladder[1:]] == [r.config for r in pred.rows]
    assert {"recommendation", "assumptions", "legend", "plot"} <= p.ids
    assert len(p.cells["legend"]) == len(COLUMNS)
    (img,) = p.imgs
    assert img["src"].startswith("data:image/png;base64,")
    png = base64.b64decode(img["src"].split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    text = " ".join(p.text)
    assert "run suffix: +15.0 % over vanilla" in text
    for entry in build_assumptions(pred).values():
        assert entry["text"] in text
    assert not re.search(r"(src|href)=\"(https?:|/)", page)     # nothing fetched from elsewhere
    out = write_html(pred, tmp_path / "r.html")
    assert out.read_text(encoding="utf-8") == page


def _css_rules(page: str) -> dict[str, dict[str, str]]:
    """The page's <style> rules: selector -> {property: value} (a selector list split)."""
    css = re.sub(r"/\*.*?\*/", "", page[page.index("<style>") + 7:page.index("</style>")], flags=re.S)
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        decls = dict((k.strip(), v.strip()) for k, v in
                     (d.split(":", 1) for d in body.split(";") if ":" in d))
        for sel in selectors.split(","):
            rules.setdefault(" ".join(sel.split()), {}).update(decls)
    return rules


class _Ancestors(HTMLParser):
    """For each element with an id: the (tag, class) of its open ancestors."""

    def __init__(self):
        super().__init__()
        self.stack, self.parents = [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.parents[a["id"]] = list(self.stack)
        if tag not in ("img", "meta", "br"):
            self.stack.append((tag, a.get("class", "")))

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()


def test_html_report_fits_a_1280_pixel_window():
    """Without a browser: the page is at most 1280 px wide, the plot scales to it, and the
    ladder and legend tables sit in a box that scrolls sideways (overflow-x: auto), so a wide
    table never widens the page."""
    from simkit.report.html import render_html

    page = render_html(_spec_wins())
    rules = _css_rules(page)
    width = re.fullmatch(r"(\d+)px", rules["body"]["max-width"])
    assert width and int(width.group(1)) <= 1280
    assert rules["img"]["max-width"] == "100%"
    tree = _Ancestors()
    tree.feed(page)
    for table in ("ladder", "legend"):
        tag, cls = tree.parents[table][-1]                   # the table's own container
        assert tag == "div" and rules[f"div.{cls}"]["overflow-x"] == "auto", table
        assert rules[f"div.{cls}"]["max-width"] == "100%"


def test_html_report_renders_in_headless_chromium(tmp_path):
    """Optional: a real browser draws the page (plot decoded, table laid out)."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no chromium on PATH (apt-get install chromium to run this check)")
    from simkit.report.html import write_html

    page = write_html(_spec_wins(), tmp_path / "r.html")
    shot = tmp_path / "r.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    assert shot.stat().st_size > 20000
    assert 'id="ladder"' in dom and "run suffix: +15.0 % over vanilla" in dom


def test_a_tie_inside_the_seed_spread_goes_to_the_simpler_config():
    pred = _pred([_row("vanilla", 0, 5145, 3),
                  _row("kpad-4", 4, 5630, 74, acc=1.1, host=0.38, step_ms=11.0),
                  _row("dynamic-goodput", 12, 5644, 83, acc=1.13, host=0.38, step_ms=11.0,
                       mean_k=4.2, ks="4,6,12")])
    rec = recommendation(pred)
    assert rec["config"] == "kpad-4"
    assert rec["line"].startswith("run kpad-4: +9.4 % over vanilla (5,630 vs 5,145 tok/s)")
    assert rec["reasons"][0].startswith("near-tie: dynamic-goodput is +0.2 % higher (14 tok/s), "
                                        "within the seed spread (±83)")
    pred.rows[1].output_tok_s = 5500                      # now outside the spread
    assert recommendation(pred)["config"] == "dynamic-goodput"


def test_docs_report_explains_every_column_and_assumption():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    for key, meaning in key_meanings().items():
        assert f"`{key}` | {meaning} |" in doc, key
    for key in build_assumptions(_spec_wins()):
        assert f"`{key}`" in doc, key


@pytest.mark.xdist_group("readme-prediction")    # with test_readme_fresh's run of the command
def test_readme_predict_example_is_what_the_command_prints(readme_prediction):
    """The README's worked example is pasted output; fail when the report drifts from it.
    The README shows a fresh machine (shipped profiles): the command above it, run as a fresh
    clone runs it (conftest readme_prediction: its own process, raw traces hidden), must print
    exactly those lines."""
    from pathlib import Path

    from readme_commands import README_PREDICTION

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    cmd = f"$ {README_PREDICTION}\n"
    start = readme.index(cmd) + len(cmd)
    shown = readme[start:readme.index("```\n", start)]
    assert readme_prediction.returncode == 0, readme_prediction.stderr
    assert readme_prediction.stdout == shown


def test_readme_example_and_the_text_goldens_fit_100_columns():
    """The README's prediction and the golden text outputs of predict and of every what-if (the
    golden tests check that each is what its command prints) are read in a terminal: no line
    over 100 characters; a JSON golden's what-if rendered as a table fits too."""
    from pathlib import Path

    from simkit.commands.whatif import render
    from simkit.whatif.common import WhatIfResult

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    cmd = "$ simkit predict --model llama-3.1-8b --corpus mix --plot "
    start = readme.index(cmd)
    shown = readme[start:readme.index("```\n", start)].splitlines()[1:]
    assert len(shown) > 40 and max(len(line) for line in shown) <= 100
    golden = root / "tests" / "golden"
    texts = sorted(p for p in golden.glob("*.out")
                   if p.name.startswith(("predict", "whatif")) and "csv" not in p.name
                   and not p.read_text(encoding="utf-8").startswith("{"))     # JSON: not text
    assert len(texts) >= 9
    for path in texts:
        widest = max(len(line) for line in path.read_text(encoding="utf-8").splitlines())
        assert widest <= 100, f"{path.name}: {widest} characters"
    doc = json.loads((golden / "whatif-concurrency-json.out").read_text())
    res = WhatIfResult(doc["whatif"], doc["question"], doc["columns"], doc["rows"], doc["params"],
                       doc["notes"])
    assert max(len(line) for line in render(res).splitlines()) <= 100


def test_workload_line_reads_the_proxy_note_without_repeating_its_label():
    pred = _spec_wins()
    pred.proxy_note = "proxy outputs: lcb_codegen <- Qwen2.5-7B-Instruct (other tokenizer family)"
    text = build_assumptions(pred)["workload"]["text"]
    assert "outputs written by another model for: lcb_codegen <- Qwen2.5-7B-Instruct" in text
    assert "proxy outputs" not in text
    pred.proxy_note = "own outputs"
    text = build_assumptions(pred)["workload"]["text"]
    assert text.endswith("; own outputs") and "another model" not in text


def test_a_transferred_calibration_says_its_error_was_measured_elsewhere_and_none_mode_says_eager():
    pred = _spec_wins()
    pred.run = pred.run.but(hardware="b200")
    text = build_assumptions(pred)["cost_model"]["text"]
    assert text.endswith("that error was measured on h200, never on b200")
    pred.engine = EngineConfig(cudagraph_mode=CudagraphMode.NONE)
    graphs = build_assumptions(pred)["cudagraph"]
    assert graphs["value"]["capture_sizes"]["4"] == []
    assert graphs["text"] == "NONE: no CUDA graph is captured, every step runs eagerly"


def test_every_format_carries_the_settings_to_paste():
    """predict's settings line (simkit.report.settings) in the text, JSON, CSV and HTML reports:
    the exact --speculative-config of the recommended config on its vLLM and the load it holds
    for; the text wraps the JSON so that the pasted lines parse to the same object."""
    import dataclasses
    import shlex

    from simkit.engine.config import parse_configs
    from simkit.report.html import render_html

    pred = _pred([_row("vanilla", 0, 4000, 20), _row("suffix", 8, 4300, 20, acc=0.9),
                  _row("suffix-4", 4, 4700, 20, acc=0.8)])
    pred = dataclasses.replace(pred, run=pred.run.but(vllm_version="0.34"),
                               specs=tuple(parse_configs("vanilla,suffix,suffix:4", "0.34")))
    want = {"method": "suffix", "num_speculative_tokens": 4}
    settings = document(pred)["recommendation"]["settings"]
    assert settings["config"] == "suffix-4" and settings["speculative_config"] == want
    assert "concurrency 32" in settings["holds_for"]
    text = render_table(pred, legend=False)
    block = text[text.index("settings on vLLM 0.34 for suffix-4"):]
    pasted = block[block.index("'"):block.index("'", block.index("'") + 1) + 1]
    assert json.loads(shlex.split(pasted)[0]) == want
    assert f"# settings on vLLM 0.34 for suffix-4: add to vllm serve: {settings['serve_args']}" \
        in render_csv(pred)
    p = _Page()
    p.feed(render_html(pred))
    assert "settings" in p.ids and any(settings["serve_args"] in t for t in p.text)
