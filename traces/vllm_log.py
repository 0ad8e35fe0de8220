"""Import a running vLLM server's own request log (format `vllm-log`).

Start the server with `--enable-log-requests --enable-log-outputs` (and no `--max-log-len`, which
truncates what is logged) and keep its log; recent vLLM versions log prompts and token ids only
at DEBUG, so also set `VLLM_LOGGING_LEVEL=DEBUG`. The lines used (every other line is ignored):

- `Received request ID: prompt: 'TEXT', params: SamplingParams(...), prompt_token_ids: [...], ...`
  (older vLLM, INFO), or `Request ID details: prompt: 'TEXT', prompt_token_ids: [...], ...`
  (newer vLLM, DEBUG) with `Received request ID: params: SamplingParams(...)` beside it;
- `Generated response ID: output: 'TEXT', [output_token_ids: [...], ]finish_reason: R`
  (`--enable-log-outputs`; a streamed request logs deltas and then one
  `Generated response ID (streaming complete): ...` line with the whole text).

The prompt is what the engine saw (chat template applied), so its token ids are used as logged;
logged text is tokenized as it is (no template added). Outputs use the logged token ids, else the
text. `temperature=0` in the sampling params marks a request greedy. A request with no logged
output, or an output with no logged request, is skipped and counted."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import numpy as np

from simkit.errors import InputError
from traces.cache import TokenizedBlock, pack
from traces.sources.base import skip_empty

_STR = r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|None)"
_IDS = r"(?:\[[0-9,\s]*\]|None)"
_ID = r"(?P<id>[^\s:]+)"
_INPUT = re.compile(rf"(?:Received request|Request) {_ID}(?: details)?: prompt: (?P<prompt>{_STR})"
                    rf"(?:, params: (?P<params>.*?))?, prompt_token_ids: (?P<ids>{_IDS})")
_PARAMS = re.compile(rf"Received request {_ID}: params: (?P<params>.*)")
_OUTPUT = re.compile(rf"Generated response {_ID}(?P<stream> \(streaming (?:delta|complete)\))?: "
                     rf"output: (?P<out>{_STR})(?:, output_token_ids: (?P<ids>{_IDS}))?, "
                     r"finish_reason: ")
_TEMP = re.compile(r"temperature=([-+0-9.eE]+)")


def _literal(text: str, path: Path, line: int, field: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise InputError(f"unreadable logged value ({exc.__class__.__name__})", path=str(path),
                         line=line, field=field) from None


def _read_lines(path: Path):
    """(line number, text) of every line; a non-UTF-8 byte is an error naming its line."""
    from traces.sources.base import not_utf8

    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(path, raw, exc, line=lineno) from None


def parse_vllm_log(path: Path, family, default_model: str, skipped: Counter) -> TokenizedBlock:
    """Pair the logged inputs and outputs of a vLLM server log by request id (log order).
    `family`: a built-in tokenizer family, or a user's own tokenizer (an OwnTokenizer)."""
    from traces.tokenizers import encoder_for

    inputs: dict[str, dict] = {}
    outputs: dict[str, dict] = {}
    greedy: dict[str, bool] = {}
    for line, text in _read_lines(path):
        if "Received request" not in text and "Request " not in text and \
                "Generated response" not in text:
            continue
        m = _INPUT.search(text)
        if m:
            rid = m["id"]
            if rid in inputs:
                skipped["repeated request id (first kept)"] += 1
                continue
            ids = _literal(m["ids"], path, line, "prompt_token_ids")
            prompt = _literal(m["prompt"], path, line, "prompt")
            inputs[rid] = {"ids": ids or None, "text": prompt, "line": line}
            if m["params"]:
                greedy[rid] = _is_greedy(m["params"])
            continue
        m = _PARAMS.search(text)
        if m:
            greedy.setdefault(m["id"], _is_greedy(m["params"]))
            continue
        m = _OUTPUT.search(text)
        if m:
            rid, stream = m["id"], (m["stream"] or "").strip()
            ids = _literal(m["ids"], path, line, "output_token_ids") if m["ids"] else None
            out = _literal(m["out"], path, line, "output")
            if "delta" in stream:
                prev = outputs.setdefault(rid, {"text": "", "ids": None, "delta": True})
                if prev.get("delta"):
                    prev["text"] += out or ""
                continue
            if rid in outputs and not outputs[rid].get("delta"):
                skipped["further outputs of one request (n > 1; first kept)"] += 1
                continue
            outputs[rid] = {"text": out or "", "ids": ids or None, "delta": False}
    enc = encoder_for(family)
    rids, prompts, outs, greedy_flags = [], [], [], []
    for rid, inp in inputs.items():
        out = outputs.get(rid)
        if out is None:
            skipped["request without a logged output (start vLLM with --enable-log-outputs)"] += 1
            continue
        p = inp["ids"] or (enc.encode_prompts([inp["text"]])[0] if inp["text"] else [])
        o = out["ids"] or enc.encode_outputs([out["text"]])[0]
        if skip_empty(p, o, skipped):
            continue
        _check_vocab(p, enc.n_vocab, path, inp["line"], "prompt_token_ids")
        _check_vocab(o, enc.n_vocab, path, inp["line"], "output_token_ids")
        rids.append(rid)
        prompts.append(p)
        outs.append(o)
        greedy_flags.append(greedy.get(rid, False))
    for rid in outputs:
        if rid not in inputs:
            skipped["output without a logged request (start vLLM with --enable-log-requests)"] += 1
    p_tok, p_off = pack(prompts)
    o_tok, o_off = pack(outs)
    return TokenizedBlock(rids, p_tok, p_off, o_tok, o_off, np.array(greedy_flags, dtype=bool),
                          np.ones(len(rids), dtype=np.int32), [default_model] * len(rids),
                          dict(skipped), {"format": "vllm-log", "family": getattr(family, "label", family),
                                          "path": str(path)})


def _is_greedy(params: str) -> bool:
    m = _TEMP.search(params)
    try:
        return m is not None and float(m.group(1)) == 0.0
    except ValueError:
        return False


def _check_vocab(ids: list[int], n_vocab: int, path: Path, line: int, field: str) -> None:
    bad = [t for t in ids if t < 0 or t >= n_vocab]
    if bad:
        raise InputError(f"token id {bad[0]} outside the tokenizer's vocabulary (0..{n_vocab - 1});"
                         " was the log written by a model of another tokenizer?", path=str(path),
                         line=line, field=field)
