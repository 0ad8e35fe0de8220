"""ZeroEval (math: MATH level 5, GSM8K; code-reasoning: CRUXEval): exact vLLM prompts, greedy.

Prompt = `model_input` (the exact templated string fed to vLLM); for API runs (405B) it is "n/a"
and the prompt is `chat_history[0]` as one user turn, templated for the simulated model.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path

from simkit.errors import InputError
from traces.caps import SM, out
from traces.sources.base import Source, TextRecord, need, read_json


_CAPS = {
    "*": out(4096, "stated", f"{SM} section 2: vLLM configs max_tokens 4096"),
    "Llama-3.1-405B-Instruct": out(2048, "stated", f"{SM} section 2: 405B API runs max_tokens 2048"),
}
_MATH = {
    "Llama-3.1-8B-Instruct": "zeroeval/math-l5/Meta-Llama-3.1-8B-Instruct.json",
    "Llama-3.1-70B-Instruct": "zeroeval/math-l5/Meta-Llama-3.1-70B-Instruct.json",
    "Llama-3.1-405B-Instruct": "zeroeval/math-l5/Llama-3.1-405B-Inst@sambanova.json",
    "Qwen2.5-7B-Instruct": "zeroeval/math-l5/Qwen2.5-7B-Instruct.json",
    "Qwen2.5-32B-Instruct": "zeroeval/math-l5/Qwen2.5-32B-Instruct.json",
    "Qwen2.5-72B-Instruct": "zeroeval/math-l5/Qwen2.5-72B-Instruct.json",
}
_GSM = {
    "Llama-3.1-8B-Instruct": "zeroeval/gsm/Meta-Llama-3.1-8B-Instruct.json",
    "Llama-3.1-70B-Instruct": "zeroeval/gsm/Meta-Llama-3.1-70B-Instruct.json",
    "Llama-3.1-405B-Instruct": "zeroeval/gsm/Llama-3.1-405B-Instruct-Turbo.json",
}
_CRUX = {
    "Llama-3.1-8B-Instruct": "zeroeval/crux/Meta-Llama-3.1-8B-Instruct.json",
    "Llama-3.1-70B-Instruct": "zeroeval/crux/Meta-Llama-3.1-70B-Instruct.json",
    "Llama-3.1-405B-Instruct": "zeroeval/crux/Llama-3.1-405B-Inst-fp8.json",
    "Qwen2.5-7B-Instruct": "zeroeval/crux/Qwen2.5-7B-Instruct.json",
    "Qwen2.5-32B-Instruct": "zeroeval/crux/Qwen2.5-32B-Instruct.json",
    "Qwen2.5-72B-Instruct": "zeroeval/crux/Qwen2.5-72B-Instruct.json",
}


def _template_of(model_input: str) -> str | None:
    if model_input.startswith("<|begin_of_text|>"):
        return "llama3"
    if model_input.startswith("<|im_start|>"):
        return "qwen"
    return None


def _load(files: dict[str, str], task: str, src: Path, producer: str,
          skipped: Counter) -> list[TextRecord]:
    path = src / files[producer]
    rows = read_json(path)
    if not isinstance(rows, list):
        raise InputError("expected a JSON list", path=str(path))
    out = []
    for i, row in enumerate(rows):
        history = need(row, "chat_history", path)
        outputs = need(row, "output", path)
        model_input = need(row, "model_input", path)
        configs = need(row, "configs", path)
        if not history or not history[0]:
            skipped["missing prompt"] += 1
            continue
        output = outputs[0] if outputs else ""
        if not output:
            skipped["empty output"] += 1
            continue
        exact = model_input if model_input and model_input != "n/a" else None
        template = _template_of(exact) if exact else None
        if exact and template is None:
            raise InputError("model_input is neither a Llama-3 nor a ChatML prompt",
                             path=str(path), field=f"[{i}].model_input")
        out.append(TextRecord(
            f"{task}/{row.get('session_id', i)}", [("user", history[0])], output, producer,
            greedy=float(configs.get("temperature", 1.0)) == 0.0,
            exact_prompt=exact, exact_template=template))
    return out


MATH_L5 = Source(name="math_l5", corpus="math", files={k: (v,) for k, v in _MATH.items()},
                 loader=partial(_load, _MATH, "math_l5"), caps=_CAPS,
                 note="vLLM greedy (405B: SambaNova API, temperature 0)")
GSM = Source(name="gsm8k", corpus="math", files={k: (v,) for k, v in _GSM.items()},
             loader=partial(_load, _GSM, "gsm8k"), caps=_CAPS,
             note="vLLM greedy (405B: Together Turbo FP8 API, temperature 0)")
CRUX = Source(name="crux", corpus="code-reasoning", files={k: (v,) for k, v in _CRUX.items()},
              loader=partial(_load, _CRUX, "crux"), caps=_CAPS,
              note="vLLM greedy (405B: Together FP8 API, temperature 0)")
