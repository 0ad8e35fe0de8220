"""A user's own traffic end to end: the README's "Your own traffic" commands run verbatim on a
user file written (at test time, into a temporary folder) from real AlpacaEval and MT-Bench
requests, and an imported corpus works wherever a built-in one does (predict with --source
auto/raw, sweep, acceptance) with figures that come from its own requests."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from simkit.cli import main
from simkit.paths import traces_src_dir

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(traces_src_dir() is None,
                                reason="../shared/traces-src (raw traces) not present")


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    from user_traffic import write_openai_log

    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    n = write_openai_log(tmp_path / "mytraffic.jsonl", ("mt_bench", "alpaca_eval"), limit=360)
    assert n == 360
    return tmp_path


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own traffic", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_readme_own_traffic_walkthrough_runs_verbatim(user_dir, capsys):
    cmds = readme_commands()
    assert [c.split()[1] for c in cmds][:3] == ["traces", "traces", "predict"]
    assert any(c.startswith("simkit whatif") for c in cmds)
    outputs = {}
    for line in cmds:
        argv = shlex.split(line)
        assert argv[0] == "simkit"
        code, out, err = run(capsys, argv[1:])
        assert code == 0, (line, err)
        outputs[" ".join(argv[1:3])] = out
    assert "imported 360 requests into corpus 'mytraffic'" in outputs["traces import"]
    pred = outputs["predict --model"]
    assert "corpus mytraffic," in pred and "profile imported" in pred
    assert "NO steady window" not in pred and "steady_window" in pred     # the default count has one
    rows = [ln for ln in pred.splitlines() if ln.startswith(("vanilla", "suffix", "kpad-"))]
    assert len(rows) == 4
    assert "whatif concurrency" in outputs["whatif concurrency"]
    assert "failed" not in outputs["whatif hardware"]


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_imported_corpus_works_like_a_built_in(user_dir, capsys):
    code, _, err = run(capsys, ["traces", "import", "mytraffic.jsonl", "--format", "openai",
                                "--model", "llama-3.1-8b", "--name", "mine"])
    assert code == 0, err
    assert f"wrote {user_dir / 'cache'}" in err and err.rstrip().endswith("mine.npz")
    base = ["--model", "llama-3.1-8b", "--corpus", "mine", "--configs", "vanilla,suffix",
            "--seeds", "1", "--num-requests", "96", "--format", "json"]
    code, out, err = run(capsys, ["predict", *base])
    assert code == 0, err
    auto = json.loads(out)
    code, out, err = run(capsys, ["predict", *base, "--source", "raw"])
    assert code == 0, err
    assert json.loads(out) == auto                    # one profile, however it is asked for
    suffix = auto["results"][1]
    assert suffix["config"] == "suffix" and suffix["mean_accepted"] > 0
    code, _, err = run(capsys, ["predict", *base, "--source", "shipped"])
    assert code == 2 and "imported corpus" in err
    code, out, err = run(capsys, ["sweep", "--model", "llama-3.1-8b", "--corpus", "mine",
                                  "--configs", "vanilla,suffix", "--num-requests", "96",
                                  "--out", "sw"])
    assert code == 0, err
    frame = pd.read_parquet(user_dir / "sw" / "sweep.parquet")
    assert list(frame["corpus"]) == ["mine", "mine"] and frame["steady_window"].all()
    code, out, err = run(capsys, ["acceptance", "--model", "llama-3.1-8b", "--corpus", "mine",
                                  "--format", "json"])
    assert code == 0, err
    code, out, err = run(capsys, ["profiles", "build", "--model", "llama-3.1-8b", "--corpus",
                                  "mine", "--out", "prof"])
    assert code == 0, err
    prov = json.loads((user_dir / "prof" / "llama-3.1-8b" / "mine.json").read_text())
    assert {f"wrote {Path('prof') / 'llama-3.1-8b' / name}" for name in ("mine.npz", "mine.json")} \
        <= set(err.splitlines())
    assert prov["corpus_requests"] == 360 and prov["sources"]["openai"]["imported_from"]
    code, _, err = run(capsys, ["profiles", "build", "--model", "llama-3.1-8b", "--corpus",
                                "mine"])
    assert code == 2 and "imported corpora are not shipped" in err


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_too_few_requests_say_there_is_no_steady_window(user_dir, capsys):
    run(capsys, ["traces", "import", "mytraffic.jsonl", "--format", "openai", "--model",
                 "llama-3.1-8b", "--name", "mine"])
    args = ["predict", "--model", "llama-3.1-8b", "--corpus", "mine", "--configs",
            "vanilla,suffix", "--seeds", "1", "--concurrency", "32"]
    code, out, _ = run(capsys, [*args, "--num-requests", "32", "--format", "json"])
    doc = json.loads(out)
    assert code == 0 and doc["steady_window"] is False and doc["suggested_num_requests"] == 128
    assert [r["steady_window"] for r in doc["results"]] == [False, False]
    code, out, _ = run(capsys, [*args, "--num-requests", "32"])
    assert "NO steady window" in out and "--num-requests 128 gives one" in out
    assert "vanilla *" in out
    code, out, _ = run(capsys, [*args, "--num-requests", "128", "--format", "json"])
    assert json.loads(out)["steady_window"] is True


def test_reimport_and_contradictions(user_dir, capsys):
    args = ["traces", "import", "mytraffic.jsonl", "--format", "openai", "--name", "mine"]
    assert run(capsys, [*args, "--model", "llama-3.1-8b"])[0] == 0
    code, _, err = run(capsys, [*args, "--model", "llama-3.1-8b"])
    assert code == 2 and "already exists" in err and "--replace" in err
    code, out, _ = run(capsys, [*args, "--model", "llama-3.1-8b", "--replace"])
    assert code == 0 and "replaced the earlier import" in out
    code, _, err = run(capsys, [*args, "--model", "llama-3.1-8b", "--tokenizer", "qwen",
                                "--replace"])
    assert code == 2 and "contradicts" in err
