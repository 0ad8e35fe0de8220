"""Write a user traffic file from real traces, at test time, into a temporary folder.

Tests and benchmarks of the "own traffic" path need a realistic user file; it is made here from
the raw traces in ../shared/traces-src (never committed): the real Llama-3.1-8B-Instruct
conversations and outputs of the named sources, written in the format a user would import."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from simkit.paths import traces_src_dir
from traces.sources import SOURCES

PRODUCER = "Llama-3.1-8B-Instruct"


def real_records(sources: tuple[str, ...] = ("alpaca_eval", "mt_bench"), limit: int | None = None):
    """TextRecords (conversation so far + real output) of the sources, in source order."""
    src = traces_src_dir()
    if src is None:
        raise FileNotFoundError("raw traces not found (SIMKIT_TRACES_SRC)")
    out = []
    for name in sources:
        out += SOURCES[name].load(src, PRODUCER, Counter())
    return out[:limit] if limit else out


def write_openai_log(path: Path, sources: tuple[str, ...] = ("alpaca_eval", "mt_bench"),
                     limit: int | None = None) -> int:
    """An OpenAI-style request log (`messages` + `response.choices`) of real requests; returns
    how many lines were written."""
    recs = real_records(sources, limit)
    with open(path, "w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps({
                "model": "llama-3.1-8b-instruct", "temperature": 0 if r.greedy else 0.7,
                "messages": [{"role": role, "content": text} for role, text in r.messages],
                "response": {"choices": [{"message": {"role": "assistant",
                                                      "content": r.output}}]}}) + "\n")
    return len(recs)


def write_vllm_log(path: Path, family: str = "llama3", limit: int = 20) -> int:
    """A vLLM server log (--enable-log-requests --enable-log-outputs, older INFO layout) of real
    requests: templated prompt text with its token ids, output text with its token ids."""
    from traces.tokenize import prompt_text
    from traces.tokenizers import encode_output, encode_prompt

    recs = real_records(("mt_bench",), limit)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("INFO 12-01 06:00:00 [api_server.py:1] vLLM API server version 0.26.0\n")
        for i, r in enumerate(recs):
            text = prompt_text(family, r)
            rid = f"chatcmpl-{i:04d}"
            fh.write(f"INFO 12-01 06:00:01 [logger.py:43] Received request {rid}: prompt: "
                     f"{text!r}, params: SamplingParams(n=1, temperature=0.0, max_tokens=2048), "
                     f"prompt_token_ids: {encode_prompt(family, text)}, prompt_embeds shape: "
                     "None, lora_request: None.\n")
            fh.write(f"INFO 12-01 06:00:02 [logger.py:70] Generated response {rid}: output: "
                     f"{r.output!r}, output_token_ids: {encode_output(family, r.output)}, "
                     "finish_reason: stop\n")
    return len(recs)
