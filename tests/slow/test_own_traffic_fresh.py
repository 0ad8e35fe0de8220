"""A fresh clone without the benchmark trace folder (SIMKIT_TRACES_SRC names a missing folder,
a new cache): a user imports their chat log with their own tokenizer file, predicts on it, plans
calibration runs on it, makes the request file a GPU run forces, and fits and uses a calibration,
each command as its own process as the user types it. The tokenizer is a BPE trained here
(tests/own_tokenizer_files.py), so nothing of ../shared is read."""

from __future__ import annotations

import json
import shlex

from own_tokenizer_files import train_tokenizer, write_chat_log
from readme_commands import calibration_records, fresh_env, run_fresh


def test_own_traffic_with_own_tokenizer_on_a_fresh_clone(tmp_path):
    env = fresh_env(tmp_path)
    write_chat_log(tmp_path / "chat.jsonl")
    train_tokenizer(tmp_path / "my-tokenizer")
    calibration_records(tmp_path / "calib-out")

    def ok(cmd: str) -> str:
        proc = run_fresh(tmp_path, env, cmd)
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert "Traceback" not in proc.stderr
        return proc.stdout

    out = ok("simkit traces import chat.jsonl --format openai --tokenizer my-tokenizer "
             "--model llama-3.1-8b --name mytraffic")
    assert "imported 48 requests into corpus 'mytraffic'" in out
    doc = json.loads(ok("simkit predict --model llama-3.1-8b --corpus mytraffic --configs "
                        "vanilla,suffix --seeds 1 --num-requests 48 --format json"))
    assert [r["config"] for r in doc["results"]] == ["vanilla", "suffix"]
    assert all(r["output_tok_s"] > 0 for r in doc["results"])
    plan = ok("simkit calibrate plan --model llama-3.1-8b --corpus mytraffic --out plan.sh")
    assert "from its 48 requests" in " ".join(plan.split())
    ok("simkit calibrate requests --model llama-3.1-8b --corpus mytraffic -n 40")
    reqs = (tmp_path / ".gpu" / "requests" / "llama-3.1-8b__mytraffic.jsonl").read_text()
    assert len(reqs.splitlines()) == 40
    # the plan's first run reads that file; without vLLM here it stops at the one line saying so
    run_line = next(ln for ln in (tmp_path / "plan.sh").read_text().splitlines()
                    if ln.startswith("simkit calibrate run "))
    proc = run_fresh(tmp_path, env, run_line)
    assert proc.returncode == 0 or "vLLM is not installed" in proc.stderr, proc.stderr
    ok("simkit calibrate fit --records calib-out --vllm-version 0.33 --name my-gpu "
       "--out my-gpu.json")
    doc = json.loads(ok("simkit predict --model llama-3.1-8b --corpus mytraffic --configs "
                        "vanilla,suffix --seeds 1 --num-requests 48 --calibration my-gpu.json "
                        "--format json"))
    assert doc["assumptions"]["cost_model"]["value"]["label"] == "calibrated my-gpu"
    assert shlex.split(run_line)[:3] == ["simkit", "calibrate", "run"]
