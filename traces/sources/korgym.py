"""KORGym game-reasoning benchmark, level 4, nine text games x 50 instances: real sampled outputs of
the R1 distills (full thinking; source `korgym`, their reasoning corpus) and of Qwen2.5-Instruct
(no think block; source `korgym_instruct`, the puzzle corpus).

Files `korgym/results/<game>/<model>_<game>_level4.json` are JSON Lines; the prompt is `prompt`
(one user message, no system message: the server applied the model's chat template) and the
output is `response[0]`. Distill outputs that begin with "<think>" are cut after it: the R1
format's generation prompt (traces/chat.py r1_chat) already ends with "<think>\\n", which the
32B/70B runs' older template left to the model (the 7B run's outputs start after it). Empty
responses are the client's error path (it returns "" on an exception) and are skipped, counted.
Sampled with the server's defaults; generation capped only by max_model_len (15,000 tokens for
the 32B distill, 30,000 otherwise), see traces-src/SOURCES.md, ADDITIONS 2026-12-01, section 1.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.caps import SM, context
from traces.sources.base import Source, TextRecord, need, read_jsonl

GAMES = ("1-DateCount", "11-maze", "12-sokoban", "13-play_lines", "15-emoji_connect", "16-jiafa",
         "2-GuessWord", "4-SudoKu", "5-light_out_game")
_STEM = {"DeepSeek-R1-Distill-Qwen-7B": "DeepSeek-R1-Distill-Qwen-7B",
         "DeepSeek-R1-Distill-Qwen-32B": "DeepSeek-R1-Distill-Qwen-32B",
         "DeepSeek-R1-Distill-Llama-70B": "DeepSeek-R1-Distill-Llama-70B",
         "Qwen2.5-7B-Instruct": "Qwen2_5-7B-Instruct",
         "Qwen2.5-32B-Instruct": "Qwen2_5-32B-Instruct",
         "Qwen2.5-72B-Instruct": "Qwen2_5-72B-Instruct"}
THINK = "<think>"
_SEC = f"{SM} ADDITIONS 2026-12-01, section 1"
_CAPS = {
    "*": context(30000, "stated", f"{_SEC}: vLLM --max_model_len=30000 (KORGym README), no "
                                  "max_tokens sent"),
    "DeepSeek-R1-Distill-Qwen-32B": context(15000, "stated", f"{_SEC}: the 32B distill's script "
                                            "uses --max_model_len=15000; 17 outputs end at "
                                            "14,999-15,000 tokens without </think>"),
}


def _rel(producer: str, game: str) -> str:
    return f"korgym/results/{game}/{_STEM[producer]}_{game}_level4.json"


def _files(producer: str) -> tuple[str, ...]:
    """The games this producer has (Qwen2.5-7B: 3, Qwen2.5-32B: 7, the others: all 9)."""
    have = {"Qwen2.5-7B-Instruct": ("1-DateCount", "2-GuessWord", "5-light_out_game"),
            "Qwen2.5-32B-Instruct": ("1-DateCount", "11-maze", "13-play_lines",
                                     "15-emoji_connect", "2-GuessWord", "4-SudoKu",
                                     "5-light_out_game")}
    return tuple(_rel(producer, g) for g in have.get(producer, GAMES))


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    out = []
    for rel in _files(producer):
        path = src / rel
        game = rel.split("/")[2]
        for line, row in read_jsonl(path):
            prompt = need(row, "prompt", path, line)
            response = need(row, "response", path, line)
            if not isinstance(prompt, str):
                raise InputError("expected a string", path=str(path), line=line, field="prompt")
            if not isinstance(response, list) or len(response) != 1 \
                    or not isinstance(response[0], str):
                raise InputError("expected a one-element list of strings", path=str(path),
                                 line=line, field="response")
            if not prompt:
                skipped["missing prompt"] += 1
                continue
            output = response[0]
            if output.startswith(THINK):
                output = output[len(THINK):].lstrip("\n")
            if not output:
                skipped["empty response (client error)"] += 1
                continue
            out.append(TextRecord(f"korgym/{game}/{row.get('seed', line)}", [("user", prompt)],
                                  output, producer, greedy=False))
    return out


_THINKING = ("DeepSeek-R1-Distill-Qwen-7B", "DeepSeek-R1-Distill-Qwen-32B",
             "DeepSeek-R1-Distill-Llama-70B")
_INSTRUCT = ("Qwen2.5-7B-Instruct", "Qwen2.5-32B-Instruct", "Qwen2.5-72B-Instruct")
# Two sources over the same files, so that each corpus draws from one kind of output: the
# distills' full thinking (reasoning, for the distills themselves) and instruct answers without
# a think block (puzzle, for every model: its own where it exists, else a proxy).
THINKING = Source(name="korgym", corpus="reasoning", files={p: _files(p) for p in _THINKING},
                  loader=_load, caps=_CAPS,
                  note="KORGym level 4, 9 games; sampled (server defaults); full <think> traces")
INSTRUCT = Source(name="korgym_instruct", corpus="puzzle",
                  files={p: _files(p) for p in _INSTRUCT}, loader=_load, caps=_CAPS,
                  note="KORGym level 4 (Qwen2.5-7B: 3 games, -32B: 7, -72B: 9); sampled "
                       "(server defaults); answers without a think block")
