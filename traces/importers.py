"""Parse user trace files (openai, sharegpt, vllm-custom, tokens) into a tokenized user corpus.

Formats (one request per record; field names are exact):
- openai: JSONL; `messages` (or `request.messages`) = the chat so far, output = `response` (a
  string, or an object with `choices[0].message.content`) or top-level `choices[0].message.content`.
- sharegpt: a JSON list (or JSONL) of `{"conversations": [{"from", "value"}, ...]}`; every
  gpt/assistant turn becomes a request whose prompt is the conversation before it.
- vllm-custom: JSONL as read by `vllm bench --dataset-name custom`: `prompt` (text, sent as one
  user turn through the chat template) and the output TEXT in `output` (our addition: vLLM's
  `output_tokens` is only a length, which cannot be replayed; a record without `output` is
  skipped and counted).
- tokens: JSONL `{"prompt_ids": [...], "output_ids": [...]}` already tokenized (ids checked
  against the tokenizer's vocabulary size; with no tokenizer given, against the model's when
  the corpus is used).
- vllm-log: a vLLM server's own log with `--enable-log-requests --enable-log-outputs`
  (traces/vllm_log.py says which lines and how to capture them).
Optional on any record: `model` (producing model, default "unknown") and `temperature`
(greedy when 0; default: not greedy).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from simkit.choices import TraceFormat, member
from simkit.errors import InputError
from traces.cache import TokenizedBlock, pack
from traces.sources.base import TextRecord, loads_json, read_jsonl, skip_empty

FORMATS = tuple(TraceFormat)     # the formats as their text, in --format's order
_ROLE = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
         "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "model": "assistant",
         "system": "system"}


def _fail(msg: str, path: Path, line: int | None, field: str | None = None):
    raise InputError(msg, path=str(path), line=line, field=field)


def _text(content, path: Path, line: int, field: str) -> str:
    """Message content as text: a string, or OpenAI content parts [{type: text, text}]."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    _fail("expected a string or a list of text parts", path, line, field)


def _meta(obj: dict, default_model: str) -> tuple[str, bool]:
    model = obj.get("model") if isinstance(obj.get("model"), str) else default_model
    temp = obj.get("temperature")
    if temp is None and isinstance(obj.get("request"), dict):
        temp = obj["request"].get("temperature")
    return model, isinstance(temp, (int, float)) and float(temp) == 0.0


def _messages(raw, path: Path, line: int, field: str) -> list[tuple[str, str]]:
    if not isinstance(raw, list) or not raw:
        _fail("expected a non-empty list of messages", path, line, field)
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or "role" not in m:
            _fail("message without 'role'", path, line, f"{field}[{i}].role")
        if "content" not in m:
            _fail("message without 'content'", path, line, f"{field}[{i}].content")
        out.append((str(m["role"]), _text(m["content"], path, line, f"{field}[{i}].content")))
    return out


def _openai_output(obj: dict, path: Path, line: int) -> str:
    resp = obj.get("response", obj if "choices" in obj else None)
    if resp is None:
        _fail("no output: expected 'response' or 'choices'", path, line, "response")
    if isinstance(resp, str):
        return resp
    if isinstance(resp, dict):
        choices = resp.get("choices")
        if not isinstance(choices, list) or not choices:
            _fail("expected a non-empty 'choices' list", path, line, "response.choices")
        choice = choices[0]
        if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
            return _text(choice["message"].get("content"), path, line,
                         "choices[0].message.content")
        if isinstance(choice, dict) and "text" in choice:
            return _text(choice["text"], path, line, "choices[0].text")
        _fail("choice without message.content", path, line, "choices[0].message")
    _fail("expected a string or an object", path, line, "response")


def parse_openai(path: Path, default_model: str, skipped: Counter) -> list[TextRecord]:
    out = []
    for line, obj in read_jsonl(path):
        if "messages" in obj:
            raw, field = obj["messages"], "messages"
        elif isinstance(obj.get("request"), dict) and "messages" in obj["request"]:
            raw, field = obj["request"]["messages"], "request.messages"
        else:
            _fail("missing field", path, line, "messages")
        messages = _messages(raw, path, line, field)
        output = _openai_output(obj, path, line)
        if messages[-1][0] != "user":
            skipped["prompt does not end with a user turn"] += 1
            continue
        if not output:
            skipped["empty output"] += 1
            continue
        model, greedy = _meta(obj, default_model)
        out.append(TextRecord(f"{path.name}:{line}", messages, output, model, greedy))
    return out


def _sharegpt_rows(path: Path) -> list[tuple[int | None, dict]]:
    raw = path.read_bytes()
    if raw.lstrip()[:1] == b"[":
        rows = loads_json(raw, path)
        if not isinstance(rows, list):
            raise InputError("expected a JSON list of conversations", path=str(path))
        return [(None, r) for r in rows]
    return read_jsonl(path)


def parse_sharegpt(path: Path, default_model: str, skipped: Counter) -> list[TextRecord]:
    out = []
    for index, (line, obj) in enumerate(_sharegpt_rows(path)):
        where = f"[{index}]" if line is None else ""
        if not isinstance(obj, dict) or "conversations" not in obj:
            _fail("missing field", path, line, f"{where}conversations")
        conv = obj["conversations"]
        if not isinstance(conv, list):
            _fail("expected a list", path, line, f"{where}conversations")
        model, greedy = _meta(obj, default_model)
        history: list[tuple[str, str]] = []
        turn = 0
        conv_id = obj.get("id", index)
        for i, msg in enumerate(conv):
            field = f"{where}conversations[{i}]"
            if not isinstance(msg, dict) or "from" not in msg:
                _fail("missing field", path, line, f"{field}.from")
            if "value" not in msg:
                _fail("missing field", path, line, f"{field}.value")
            role = _ROLE.get(str(msg["from"]).lower())
            if role is None:
                _fail(f"unknown speaker {msg['from']!r}", path, line, f"{field}.from")
            value = _text(msg["value"], path, line, f"{field}.value")
            if role == "assistant":
                turn += 1
                if not history or history[-1][0] != "user":
                    skipped["assistant turn without a preceding user turn"] += 1
                elif not value:
                    skipped["empty output"] += 1
                else:
                    out.append(TextRecord(f"{conv_id}/t{turn}", list(history), value, model,
                                          greedy, turn=turn))
            history.append((role, value))
    return out


def parse_vllm_custom(path: Path, default_model: str, skipped: Counter) -> list[TextRecord]:
    out = []
    for line, obj in read_jsonl(path):
        if "prompt" not in obj:
            _fail("missing field", path, line, "prompt")
        prompt = _text(obj["prompt"], path, line, "prompt")
        if not prompt:
            skipped["empty prompt"] += 1
            continue
        if "output" not in obj:
            skipped["no output text (field 'output')"] += 1
            continue
        output = _text(obj["output"], path, line, "output")
        if not output:
            skipped["empty output"] += 1
            continue
        model, greedy = _meta(obj, default_model)
        out.append(TextRecord(f"{path.name}:{line}", [("user", prompt)], output, model, greedy))
    return out


def _ids(obj: dict, key: str, n_vocab: int | None, path: Path, line: int) -> list[int]:
    if key not in obj:
        _fail("missing field", path, line, key)
    ids = obj[key]
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                            for t in ids):
        _fail("expected a list of integer token ids", path, line, key)
    if n_vocab is None:               # no tokenizer given: checked against the model's at use
        bad = [t for t in ids if t < 0]
        if bad:
            _fail(f"token id {bad[0]} is negative", path, line, key)
        return ids
    bad = [t for t in ids if t < 0 or t >= n_vocab]
    if bad:
        _fail(f"token id {bad[0]} outside the tokenizer's vocabulary (0..{n_vocab - 1})",
              path, line, key)
    return ids


def parse_tokens(path: Path, default_model: str, n_vocab: int | None,
                 skipped: Counter) -> tuple[list[str], list[list[int]], list[list[int]],
                                            list[str], list[bool]]:
    ids, prompts, outputs, models, greedy = [], [], [], [], []
    for line, obj in read_jsonl(path):
        p = _ids(obj, "prompt_ids", n_vocab, path, line)
        o = _ids(obj, "output_ids", n_vocab, path, line)
        if skip_empty(p, o, skipped):
            continue
        model, g = _meta(obj, default_model)
        ids.append(str(obj.get("id", f"{path.name}:{line}")))
        prompts.append(p)
        outputs.append(o)
        models.append(model)
        greedy.append(g)
    return ids, prompts, outputs, models, greedy


def tokenizer_label(family) -> str:
    """How a block names its tokenizer: a family, an own tokenizer's label, or NO_TOKENIZER."""
    if family is None:
        return NO_TOKENIZER
    return family if isinstance(family, str) else family.label


NO_TOKENIZER = "none (token ids as given)"


def import_file(path: Path, fmt: TraceFormat | str, family, default_model: str,
                template: str | None = None) -> TokenizedBlock:
    """Parse and tokenize a user trace file; skipped records are counted in block.skipped.
    `fmt`: a TraceFormat, or its text (an import record read back from the cache). `family`: a
    built-in tokenizer family, a user's own tokenizer (traces.own_tokenizer.OwnTokenizer, whose
    prompts get the `template` family's chat template, the plain one when None), or None for
    the token-id format (ids then checked against the model's vocabulary when used)."""
    from traces.tokenize import tokenize_records, tokenize_with_own
    from traces.tokenizers import encoder_for

    fmt = member(TraceFormat, fmt, "format", "format")
    if path.is_dir():
        raise InputError("is a folder; give a trace file", path=str(path))
    if not path.is_file():
        raise InputError("no such file", path=str(path))
    if family is None and fmt is not TraceFormat.TOKENS:
        raise InputError(f"the {fmt} format holds text: give --tokenizer (your model's "
                         "tokenizer file or folder) or --model", field="tokenizer")
    skipped: Counter = Counter()
    meta = {"format": str(fmt), "family": tokenizer_label(family), "path": str(path)}
    if fmt is TraceFormat.VLLM_LOG:
        from traces.vllm_log import parse_vllm_log

        return parse_vllm_log(path, family, default_model, skipped)
    if fmt is TraceFormat.TOKENS:
        ids, prompts, outputs, models, greedy = parse_tokens(
            path, default_model, None if family is None else encoder_for(family).n_vocab,
            skipped)
        p_tok, p_off = pack(prompts)
        o_tok, o_off = pack(outputs)
        return TokenizedBlock(ids, p_tok, p_off, o_tok, o_off, np.array(greedy, dtype=bool),
                              np.ones(len(ids), dtype=np.int32), models, dict(skipped), meta)
    parser = {TraceFormat.OPENAI: parse_openai, TraceFormat.SHAREGPT: parse_sharegpt,
              TraceFormat.VLLM_CUSTOM: parse_vllm_custom}[fmt]
    records = parser(path, default_model, skipped)
    if isinstance(family, str):
        return tokenize_records(family, records, dict(skipped), meta)
    meta["template"] = template or "plain"
    return tokenize_with_own(family, template, records, dict(skipped), meta)
