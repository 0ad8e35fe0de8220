"""Robustness of the importers: property-based fuzzing of every format, and the import CLI's
refusals (non-UTF-8 bytes, re-import over a name, contradicting --tokenizer/--model).

Property: whatever bytes a user file holds, import_file either returns a block (records + counted
skips) or raises InputError naming the file; never another exception. Tokenization uses the real
tokenizer files from the raw-trace folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkit.errors import InputError
from simkit.paths import traces_src_dir
from traces.importers import FORMATS, import_file

pytestmark = pytest.mark.skipif(traces_src_dir() is None,
                                reason="../shared/traces-src (tokenizer files) not present")

# field names of every format, so generated objects reach past the first missing-field check
KEYS = ["messages", "request", "response", "choices", "message", "content", "role", "text",
        "conversations", "from", "value", "prompt", "output", "prompt_ids", "output_ids", "model",
        "temperature", "id", "type"]
ROLES = ["user", "assistant", "system", "human", "gpt", "tool", ""]
scalars = (st.none() | st.booleans() | st.integers(-5, 200_000) | st.floats(allow_nan=True)
           | st.text(max_size=12) | st.sampled_from(ROLES))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner,
                                        max_size=5), max_leaves=20)
lines = st.one_of(values.map(json.dumps),
                  st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
                  st.sampled_from(["", "{", "[1, 2", "null", "\ufeff{}"]))
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _check(path: Path, fmt: str) -> None:
    try:
        block = import_file(path, fmt, "llama3", "unknown")
    except InputError as exc:
        assert str(path) in str(exc), f"error does not name the file: {exc}"
        assert "\n" not in str(exc)
        return
    assert len(block.request_ids) == len(block.prompt_offsets) - 1 == len(block.output_offsets) - 1
    assert all(len(block.prompt(i)) > 0 and len(block.output(i)) > 0 for i in range(len(block)))


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(rows=st.lists(lines, max_size=6))
def test_text_lines_never_escape_as_other_errors(tmp_path, fmt, rows):
    path = tmp_path / f"f.{fmt}"
    path.write_text("\n".join(rows), encoding="utf-8", errors="surrogatepass")
    _check(path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.binary(max_size=200))
def test_raw_bytes_never_escape_as_other_errors(tmp_path, fmt, data):
    path = tmp_path / f"b.{fmt}"
    path.write_bytes(data)
    _check(path, fmt)


@FUZZ
@given(doc=values)
def test_sharegpt_whole_json_documents(tmp_path, doc):
    path = tmp_path / "sg.json"
    path.write_text("[" + json.dumps(doc) + "]")
    _check(path, "sharegpt")


@FUZZ
@given(prompt=st.text(max_size=30), output=st.text(max_size=30) | st.none(),
       ids=st.lists(st.integers(-3, 300_000), max_size=5) | st.none())
def test_vllm_log_lines(tmp_path, prompt, output, ids):
    path = tmp_path / "server.log"
    out = "" if output is None else f"INFO x Generated response r1: output: {output!r}, " \
                                    f"output_token_ids: {ids}, finish_reason: stop\n"
    path.write_text(f"INFO x Received request r1: prompt: {prompt!r}, params: SamplingParams(), "
                    f"prompt_token_ids: {ids}, prompt_embeds shape: None\n" + out)
    _check(path, "vllm-log")


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"messages": [{"role": "user", "content": "hi"}], "response": "ok"}\n'
                     b'{"messages": [{"role": "user", "content": "h\xff"}], "response": "ok"}\n')
    with pytest.raises(InputError, match=re.escape(f"{path}, line 2: not UTF-8")):
        import_file(path, "openai", "llama3", "unknown")


def test_vllm_log_pairs_requests_and_counts_the_unpaired(tmp_path):
    from traces.tokenizers import encode_output, encode_prompt

    text = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    ids = encode_prompt("llama3", text)
    log = tmp_path / "server.log"
    log.write_text(
        "INFO start\n"
        f"INFO Received request a: prompt: {text!r}, params: SamplingParams(temperature=0.0), "
        f"prompt_token_ids: {ids}, prompt_embeds shape: None, lora_request: None.\n"
        "INFO Generated response a: output: 'Hello there.', output_token_ids: None, "
        "finish_reason: stop\n"
        "DEBUG Request b details: prompt: 'Tell me', prompt_token_ids: None, prompt_embeds "
        "shape: None.\n"
        "INFO Received request b: params: SamplingParams(temperature=0.7), lora_request: None.\n"
        "INFO Generated response b (streaming delta): output: ' a', finish_reason: None\n"
        "INFO Generated response b (streaming delta): output: ' story', finish_reason: stop\n"
        "INFO Received request c: prompt: 'x', params: SamplingParams(), prompt_token_ids: [87], "
        "prompt_embeds shape: None\n"
        "INFO Generated response d: output: 'orphan', output_token_ids: [1], finish_reason: x\n")
    block = import_file(log, "vllm-log", "llama3", "Llama-3.1-8B-Instruct")
    assert block.request_ids == ["a", "b"]
    assert block.prompt(0).tolist() == ids
    assert block.output(0).tolist() == encode_output("llama3", "Hello there.")
    assert block.output(1).tolist() == encode_output("llama3", " a story")
    assert block.prompt(1).tolist() == encode_prompt("llama3", "Tell me")
    assert block.greedy.tolist() == [True, False]
    assert sum(block.skipped.values()) == 2 and len(block.skipped) == 2   # c (no output), d


def test_vllm_log_of_real_requests_round_trips(tmp_path):
    from user_traffic import real_records, write_vllm_log
    from traces.tokenize import prompt_text
    from traces.tokenizers import encode_output, encode_prompt

    log = tmp_path / "server.log"
    n = write_vllm_log(log, limit=12)
    block = import_file(log, "vllm-log", "llama3", "Llama-3.1-8B-Instruct")
    recs = real_records(("mt_bench",), 12)
    assert len(block) == n == 12 and block.skipped == {}
    for i, r in enumerate(recs):
        assert block.prompt(i).tolist() == encode_prompt("llama3", prompt_text("llama3", r))
        assert block.output(i).tolist() == encode_output("llama3", r.output)
