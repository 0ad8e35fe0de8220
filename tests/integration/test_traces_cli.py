"""`simkit traces list/show` on the real corpora (table and JSON)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from simkit.cli import app
from simkit.paths import traces_src_dir

pytestmark = pytest.mark.skipif(traces_src_dir() is None, reason="../shared/traces-src not present")

# Llama-3.1-8B request counts implied by SOURCES.md: chat = 805 alpaca + 750 arena + 160 mt_bench,
# code = 164 HumanEval + 1055 LCB, code-edit = 2 x 1055 LCB repairs - 504 empty outputs,
# math = 721 + 1319, summarization = 886 confident articles, reasoning = 500 R1-Distill-Llama-8B.
LLAMA_8B_COUNTS = {"chat": 1715, "code": 1219, "code-edit": 1606, "math": 2040,
                   "code-reasoning": 800, "summarization": 886, "translation": 2039,
                   "reasoning": 500}


def _run(*args: str):
    res = CliRunner().invoke(app, ["traces", *args])
    assert res.exit_code == 0, (res.output, res.exception)
    return res.output


def test_list_json_has_every_corpus_with_real_counts():
    data = json.loads(_run("list", "--format", "json"))
    rows = {r["corpus"]: r for r in data["corpora"]}
    assert {c: rows[c]["requests"] for c in LLAMA_8B_COUNTS} == LLAMA_8B_COUNTS
    assert rows["mix"]["requests"] == sum(LLAMA_8B_COUNTS.values())
    assert sum(rows["mix"]["proportions"].values()) == pytest.approx(1.0, abs=1e-3)
    for c in LLAMA_8B_COUNTS:
        assert rows[c]["prompt_tokens"] > rows[c]["requests"]
        assert rows[c]["output_tokens"] > 0 and rows[c]["proxy_note"]
    assert rows["code-reasoning"]["proxy_note"] == "own outputs"
    assert rows["code"]["producers"] == ["Llama-3.1-8B-Instruct", "Qwen2.5-7B-Instruct"]


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_list_table_shows_proxy_notes_for_proxy_model():
    out = _run("list", "--model", "deepseek-r1")
    assert "corpora for deepseek-r1" in out
    assert "proxy tokenizer r1-llama" in out.replace("\n", " ")


def test_show_json_percentiles_and_breakdown():
    d = json.loads(_run("show", "chat", "--format", "json"))
    for key in ("prompt_len", "output_len"):
        x = d[key]
        assert 0 < x["p50"] <= x["p90"] <= x["p99"] <= x["max"]
    assert sum(b["requests"] for b in d["breakdown"]) == d["requests"] == 1715
    assert sum(b["output_tokens"] for b in d["breakdown"]) == d["output_tokens"]
    assert d["turns"] == {"1": 1635, "2": 80}
    mt = next(b for b in d["breakdown"] if b["source"] == "mt_bench")
    assert mt["greedy_share"] == 0.5


def test_show_table_for_a_proxy_corpus():
    out = _run("show", "translation", "--model", "qwen2.5-72b")
    flat = " ".join(out.split())
    assert "proxy note: proxy outputs: wmt24 <- Qwen2.5-7B-Instruct" in flat
    assert "p99" in out and "wmt24" in out


def test_unknown_names_exit_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "simkit", "traces", "show", "poetry"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: unknown corpus 'poetry'; known: chat")
    assert len(proc.stderr.strip().splitlines()) == 1
