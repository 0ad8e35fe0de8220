"""Prefix caching in predict's reports: --no-prefix-caching gives every figure of the code before
prefix caching; on, the hit rate is a column, a JSON/CSV key and a legend entry,
and 'n/a' (with the reason in the assumptions) when the profile has no block hashes.

tests/data/predict_llama-3.1-8b_code_before_prefix_caching.{json,csv} are the outputs of commit
410e447 (before prefix caching) for ARGS; regenerate them from that commit only. They were made
with the cost profile of that commit, kept as tests/data/h200-vllm026-410e447.json (the host terms
per accepted token added since are 0 there), which ARGS names so a refit does not move them, and
with the workload profile of the old evenly spaced 128-request sample, kept in
tests/data/profiles_even128 (the shipped llama-3.1-8b/code files of commit d890daf, derived
statistics only), which the golden comparison loads in place of today's shipped (stratified) one."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from simkit.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
ARGS = ["predict", "--model", "llama-3.1-8b", "--corpus", "code", "--configs", "vanilla,kpad:4",
        "--seeds", "2", "--num-requests", "96", "--source", "shipped", "--workers", "1",
        "--calibration", str(DATA / "h200-vllm026-410e447.json")]


def _run(*extra: str) -> str:
    res = CliRunner().invoke(app, [*ARGS, *extra])
    assert res.exit_code == 0, res.output
    return res.output


def test_no_prefix_caching_gives_the_figures_of_before(monkeypatch):
    """Every figure of the golden output is unchanged with --no-prefix-caching (on the workload
    profile the golden was made with). The report has gained fields since (the history it
    assumes, the steady-window flag), so the comparison is value by value over what the golden
    holds, not byte for byte."""
    from simkit.profiles import corpus_profile as profiles
    from simkit.app.cells import clear_loaded

    monkeypatch.setattr(profiles, "shipped_dir", lambda: DATA / "profiles_even128")
    clear_loaded()                                 # nothing loaded from today's profile
    try:
        _compare_with_before()
    finally:
        clear_loaded()                             # nor kept from the old one


def _compare_with_before() -> None:
    import csv
    import io

    before = json.loads((DATA / "predict_llama-3.1-8b_code_before_prefix_caching.json").read_text())
    now = json.loads(_run("--format", "json", "--no-prefix-caching"))
    assert len(now["results"]) == len(before["results"])
    for old, new in zip(before["results"], now["results"]):
        assert {k: new.get(k) for k in old} == old
    for key in ("best_config", "best_k", "model", "corpus", "hardware", "tp"):
        assert now[key] == before[key]
    rows = lambda text: list(csv.DictReader(io.StringIO(  # noqa: E731
        "".join(ln for ln in io.StringIO(text) if not ln.startswith("#")))))
    old_rows = rows((DATA / "predict_llama-3.1-8b_code_before_prefix_caching.csv").read_text())
    new_rows = rows(_run("--format", "csv", "--no-prefix-caching"))
    assert len(old_rows) == len(new_rows) > 0
    for old, new in zip(old_rows, new_rows):
        assert {k: new.get(k) for k in old} == old


def test_profile_without_hashes_says_not_modelled(tmp_path, monkeypatch):
    """An old shipped profile (no prefix table) gives n/a and the reason, not a silent 0."""
    import shutil

    from simkit.profiles import corpus_profile as profiles

    root = tmp_path / "profiles"
    src = profiles.shipped_dir() / "llama-3.1-8b"
    shutil.copytree(src, root / "llama-3.1-8b")
    (root / "llama-3.1-8b" / "code.prefix.npz").unlink()
    monkeypatch.setattr(profiles, "shipped_dir", lambda: root)
    from simkit.app.cells import clear_loaded

    clear_loaded()
    doc = json.loads(_run("--format", "json"))
    assert all(r["prefix_hit_rate"] is None for r in doc["results"])
    assert doc["assumptions"]["prefix_caching"]["value"]["modelled"] is False
    assert "NOT modelled" in doc["assumptions"]["prefix_caching"]["text"]
    assert "prefix_hit_rate" in doc["columns"]
    table = _run()
    assert "pfx hit" in table and "n/a" in table
    assert "pfx hit" not in _run("--no-prefix-caching")
    clear_loaded()


def test_shipped_profile_reports_the_hit_rate():
    doc = json.loads(_run("--format", "json"))
    hits = [r["prefix_hit_rate"] for r in doc["results"]]
    assert all(h is not None and 0 < h < 1 for h in hits)    # the chat-template header
    assert doc["assumptions"]["prefix_caching"]["value"]["modelled"] is True


def test_hit_rate_reported_when_modelled():
    """Every prompt starts with the same 2-block header, then its own blocks. Requests cycled
    past the sample are new prompts behind the shared header, so every admission but the very
    first hits exactly the header's 32 tokens."""
    import numpy as np

    from simkit.costmodel import load_cost_model
    from simkit.block_hash import pack
    from simkit.app.options import RunOptions
    from simkit.app.predict import predict
    from simkit.engine.workload import Workload
    from simkit.profiles.corpus_profile import load_profile
    from simkit.report.render import document, render_csv, render_table

    prof = load_profile("llama-3.1-8b", "code", source="shipped")
    w = Workload.from_profile(prof)
    plen = w.prompt_len.astype(np.int64)
    usable = (plen < 16384) & (w.output_len > 0)
    assert plen[usable].min() > 32                           # the header fits below the cap
    chains = [np.r_[np.array([1, 2], np.uint64),
                    np.arange(n // 16 - 2, dtype=np.uint64) + np.uint64(1 << 20) * np.uint64(i + 1)]
              for i, n in enumerate(plen.tolist())]
    w.block_hashes = pack(chains)
    cost = load_cost_model("llama-3.1-8b", "h200")
    n = int(usable.sum())
    pred = predict(RunOptions("llama-3.1-8b", "code-hashed", seeds=1, num_requests=2 * n,
                              workers=1), configs="vanilla", workload=w, cost=cost)
    hit = pred.rows[0].prefix_hit_rate
    from simkit.engine.sim import request_order

    order, _ = request_order(w, pred.engine, 2 * n, 0)     # drawn by the sample's weights
    assert len(order) == 2 * n and len(set(order)) > 1
    assert hit == (32 * (2 * n - 1)) / plen[order].sum()
    doc = document(pred)
    assert doc["results"][0]["prefix_hit_rate"] == round(hit, 6)
    assert doc["assumptions"]["prefix_caching"]["value"]["modelled"] is True
    assert f"{hit:.1%}" in render_table(pred, wide=True)
    assert "pfx hit" in render_table(pred, wide=True).split("━")[0]
    header = next(ln for ln in render_csv(pred).splitlines() if ln.startswith("model,"))
    assert header.endswith(",prefix_hit_rate")


def test_docs_report_explains_the_prefix_column_and_assumption():
    from simkit.report.legend import PREFIX_COLUMN

    doc = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    assert (f"| {PREFIX_COLUMN.header} | `{PREFIX_COLUMN.key}` | {PREFIX_COLUMN.meaning} |"
            in doc)
    assert "| `prefix_caching` |" in doc
