"""`simkit traces import --tokenizer PATH`: one's own traffic with one's own tokenizer file (a
Hugging Face folder or tokenizer.json, a tiktoken file) or none for token ids, and the corpus
it makes used by predict and calibrate requests, with the benchmark trace folder hidden.

The Hugging Face tokenizer is trained here (tests/own_tokenizer_files.py); the tiktoken file is
the real Llama-3 one, copied from ../shared/traces-src at test time (never committed)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import one_line_error, run
from own_tokenizer_files import train_tokenizer, write_chat_log
from simkit.paths import traces_src_dir
from traces.chat import llama3_chat

LLAMA3_FILE = "tokenizers/llama3/tokenizer.model"
SRC = traces_src_dir()          # before the fixture hides it


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's folder: a chat log and a trained tokenizer; the trace folder hidden, own cache."""
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(tmp_path / "no-raw-traces"))
    monkeypatch.delenv("SIMKIT_DEBUG", raising=False)
    write_chat_log(tmp_path / "chat.jsonl")
    train_tokenizer(tmp_path / "my-tokenizer")
    return tmp_path


def _import(capsys, user: Path, *extra: str, name: str = "mine"):
    return run(capsys, "traces", "import", str(user / "chat.jsonl"), "--format", "openai",
               "--name", name, *extra)


@pytest.mark.parametrize("where", ["folder", "file"])
def test_hf_tokenizer_imports_with_the_models_template_and_no_trace_folder(capsys, user, where):
    from tokenizers import Tokenizer

    from traces.user import load_user_block, read_import_record

    path = user / "my-tokenizer" / ("tokenizer.json" if where == "file" else "")
    code, out, err = _import(capsys, user, "--tokenizer", str(path), "--model", "llama-3.1-8b")
    assert code == 0, err
    assert "imported 48 requests into corpus 'mine'" in out
    assert "huggingface" in out and "chat template: llama-3.1-8b's" in out
    block = load_user_block("mine")
    tok = Tokenizer.from_file(str(user / "my-tokenizer" / "tokenizer.json"))
    first = json.loads((user / "chat.jsonl").read_text().splitlines()[0])
    prompt = llama3_chat([(m["role"], m["content"]) for m in first["messages"]])
    assert block.prompt(0).tolist() == tok.encode(prompt, add_special_tokens=False).ids
    assert block.prompt(0)[0] == tok.token_to_id("<|begin_of_text|>")     # a special id
    answer = first["response"]["choices"][0]["message"]["content"]
    assert block.output(0).tolist() == tok.encode(answer, add_special_tokens=False).ids
    record = read_import_record("mine")
    assert record["tokenizer_file"] == str((user / "my-tokenizer" / "tokenizer.json").resolve())


def test_without_model_the_plain_template_is_used_and_said(capsys, user):
    from tokenizers import Tokenizer

    from traces.user import load_user_block

    code, out, err = _import(capsys, user, "--tokenizer", str(user / "my-tokenizer"))
    assert code == 0, err
    assert "chat template: plain" in out
    tok = Tokenizer.from_file(str(user / "my-tokenizer" / "tokenizer.json"))
    first = json.loads((user / "chat.jsonl").read_text().splitlines()[0])
    text = f"user: {first['messages'][0]['content']}\nassistant: "
    assert load_user_block("mine").prompt(0).tolist() == tok.encode(text).ids


@pytest.mark.skipif(SRC is None, reason="the real Llama-3 tokenizer file "
                    "(../shared/traces-src) not present")
def test_tiktoken_file_of_the_family_gives_the_builtin_families_ids(capsys, user, monkeypatch):
    from traces.user import load_user_block

    src = SRC
    own = user / "tokenizer.model"
    shutil.copy(src / LLAMA3_FILE, own)
    code, out, err = _import(capsys, user, "--tokenizer", str(own), "--model", "llama-3.1-8b")
    assert code == 0, err
    assert "the llama3 special tokens" in out
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(src))
    code, out, err = _import(capsys, user, "--model", "llama-3.1-8b", name="builtin")
    assert code == 0, err
    a, b = load_user_block("mine"), load_user_block("builtin")
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert np.array_equal(a.output_tokens, b.output_tokens)


def test_token_ids_need_no_tokenizer_and_are_checked_against_the_model(capsys, user):
    from traces.corpora import load_corpus

    f = user / "ids.jsonl"
    f.write_text(json.dumps({"prompt_ids": [1, 2, 3, 1, 2], "output_ids": [3, 1, 2]}) + "\n"
                 + json.dumps({"prompt_ids": [5, 140000], "output_ids": [7]}) + "\n")
    code, out, err = run(capsys, "traces", "import", str(f), "--format", "tokens", "--name", "ids")
    assert code == 0, err
    assert "imported 2 requests" in out and "tokenizer: none" in out
    code, out, err = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "ids",
                         "--configs", "vanilla", "--seeds", "1")
    assert code == 2
    one_line_error(err, "token id 140000", "llama-3.1-8b's vocabulary (0..128255)")
    assert len(load_corpus("ids", "qwen2.5-7b")) == 2                  # 152,064 tokens: fits


def test_imported_corpus_predicts_and_makes_calibration_requests(capsys, user):
    from traces.calibration_requests import read_requests
    from traces.user import load_user_block

    assert _import(capsys, user, "--tokenizer", str(user / "my-tokenizer"), "--model",
                   "llama-3.1-8b")[0] == 0
    code, out, err = run(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "mine",
                         "--configs", "vanilla,suffix", "--seeds", "1", "--num-requests", "48",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["config"] for r in doc["results"]} == {"vanilla", "suffix"}
    assert all(r["output_tok_s"] > 0 for r in doc["results"])
    code, out, err = run(capsys, "calibrate", "requests", "--model", "llama-3.1-8b", "--corpus",
                         "mine", "--out", str(user / "req"), "-n", "20")
    assert code == 0, err
    reqs = read_requests(user / "req" / "llama-3.1-8b__mine.jsonl")
    block = load_user_block("mine")
    firsts = {tuple(block.prompt(i).tolist()) for i in range(len(block))}
    assert len(reqs) == 20 and all(tuple(r.prompt_ids.tolist()) in firsts for r in reqs)


def test_damaged_corpus_is_reimported_with_the_same_tokenizer_file(capsys, user):
    from traces.user import import_command, load_user_block, read_import_record, user_corpus_path

    assert _import(capsys, user, "--tokenizer", str(user / "my-tokenizer"), "--model",
                   "llama-3.1-8b")[0] == 0
    before = load_user_block("mine").prompt_tokens.copy()
    cmd = import_command("mine", read_import_record("mine"))
    assert "--tokenizer" in cmd and "tokenizer.json" in cmd and "--model llama-3.1-8b" in cmd
    user_corpus_path("mine").write_bytes(b"not an npz")
    assert np.array_equal(load_user_block("mine").prompt_tokens, before)
    assert "re-importing it" in capsys.readouterr().err
    # the tokenizer file changed meanwhile: not re-imported with another tokenizer
    train_tokenizer(user / "my-tokenizer", vocab_size=280)
    user_corpus_path("mine").write_bytes(b"not an npz")
    code, out, err = run(capsys, "traces", "show", "mine")
    assert code == 2
    one_line_error(err, "damaged", "re-import it")


@pytest.mark.parametrize("case,needles", [
    ("missing", ("no such tokenizer file or folder",)),
    ("empty-folder", ("no tokenizer.json",)),
    ("bad-json", ("not a Hugging Face tokenizer.json",)),
    ("not-tiktoken", ("not a tiktoken file", "line 1")),
    ("too-big", ("more than llama-3.1-8b's vocabulary",)),
    ("text-without-tokenizer", ("give --tokenizer", "--model")),
])
def test_bad_tokenizer_is_one_error_before_any_work(capsys, user, case, needles):
    from traces.user import list_user_corpora

    arg = {"missing": str(user / "nope"), "empty-folder": str(user / "empty"),
           "bad-json": str(user / "bad.json"), "not-tiktoken": str(user / "vocab.txt"),
           "too-big": str(user / "big.tiktoken")}.get(case)
    (user / "empty").mkdir()
    (user / "bad.json").write_text('{"model": 3}')
    (user / "vocab.txt").write_text("hello world 1\n")
    import base64

    (user / "big.tiktoken").write_text("".join(
        f"{base64.b64encode(i.to_bytes(3, 'big')).decode()} {i}\n" for i in range(130000)))
    extra = ["--model", "llama-3.1-8b"] if case == "too-big" else []
    if case == "text-without-tokenizer":
        code, out, err = run(capsys, "traces", "import", str(user / "chat.jsonl"), "--format",
                             "openai", "--name", "mine")
    else:
        code, out, err = _import(capsys, user, "--tokenizer", arg, *extra)
    assert code == 2 and out == ""
    one_line_error(err, *needles)
    assert list_user_corpora() == []


def test_each_command_names_which_mean_output_it_prints(capsys, user):
    """The chat corpus's mean output read 503, 622 or 651 tokens depending on the command: each
    is a different mean (the whole corpus or the request file; as recorded or cut at the runs'
    1,024-token cap), so each command now says which, and each figure is that mean."""
    lengths = [2000, 100, 300, 1500]
    f = user / "ids.jsonl"
    f.write_text("".join(json.dumps({"prompt_ids": [1, 2, 3], "output_ids": [7] * n}) + "\n"
                         for n in lengths))
    assert run(capsys, "traces", "import", str(f), "--format", "tokens", "--name", "ids")[0] == 0
    recorded = sum(lengths) / len(lengths)                          # 975
    capped = sum(min(n, 1024) for n in lengths) / len(lengths)      # 612
    code, out, err = run(capsys, "traces", "show", "ids")
    assert code == 0, err
    assert "length (tokens, every request as recorded" in out
    assert re.search(rf"^output\s+│\s+{recorded:g}\s+│", out, re.M), out
    code, out, err = run(capsys, "calibrate", "plan", "--model", "llama-3.1-8b", "--corpus", "ids")
    assert code == 0, err
    assert (f"mean output {capped:.0f} tokens at the runs' 1,024-token cap, from its 4 requests"
            in re.sub(r"\s+", " ", out))
    code, out, err = run(capsys, "calibrate", "requests", "--model", "llama-3.1-8b", "--corpus",
                         "ids", "--out", str(user / "req"), "-n", "4")
    assert code == 0, err
    assert (f"mean output {recorded:.0f} tokens as recorded, {capped:.0f} at the runs' "
            "1,024-token cap") in err


def test_a_vllm_server_log_is_read_with_the_own_tokenizer(capsys, user):
    """A vLLM log's text (a prompt logged without ids, every output) is tokenized with the
    user's tokenizer; logged ids are kept as they are."""
    from tokenizers import Tokenizer

    from traces.user import load_user_block

    log = user / "server.log"
    log.write_text(
        "INFO Received request a: prompt: 'Four score and seven years ago', params: "
        "SamplingParams(temperature=0.0), prompt_token_ids: [5, 6, 7], prompt_embeds shape: "
        "None.\n"
        "INFO Generated response a: output: 'our fathers brought forth', output_token_ids: None, "
        "finish_reason: stop\n"
        "DEBUG Request b details: prompt: 'A stitch in time', prompt_token_ids: None, "
        "prompt_embeds shape: None.\n"
        "INFO Received request b: params: SamplingParams(temperature=0.7), lora_request: None.\n"
        "INFO Generated response b: output: 'saves nine.', output_token_ids: [9, 10], "
        "finish_reason: stop\n")
    code, out, err = run(capsys, "traces", "import", str(log), "--format", "vllm-log", "--name",
                         "prod", "--tokenizer", str(user / "my-tokenizer"))
    assert code == 0, err
    tok = Tokenizer.from_file(str(user / "my-tokenizer" / "tokenizer.json"))
    block = load_user_block("prod")
    assert block.prompt(0).tolist() == [5, 6, 7]
    assert block.output(0).tolist() == tok.encode("our fathers brought forth").ids
    assert block.prompt(1).tolist() == tok.encode("A stitch in time").ids
    assert block.output(1).tolist() == [9, 10]
