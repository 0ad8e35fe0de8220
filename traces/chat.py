"""Chat templates written as plain functions (no jinja), reproducing each model's default template.

Messages are (role, content) pairs. Each function returns the prompt text the model sees; encode it
with traces.tokenizers.encode_prompt so the marker strings become special ids.
"""

from __future__ import annotations

from collections.abc import Sequence

Message = tuple[str, str]

# Llama-3.1 default template: system header always present, with these two dated lines (the
# template's default date_string "26 Jul 2024"); every message content is trimmed. Verified
# byte-for-byte against ZeroEval's vLLM `model_input` for Llama-3.1-8B/70B (tests).
LLAMA31_DATE_HEADER = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def llama3_chat(messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """Llama-3.1 Instruct chat format (no tools)."""
    msgs = list(messages)
    system = ""
    if msgs and msgs[0][0] == "system":
        system = msgs[0][1].strip()
        msgs = msgs[1:]
    out = ["<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n",
           LLAMA31_DATE_HEADER, system, "<|eot_id|>"]
    for role, content in msgs:
        out.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{content.strip()}<|eot_id|>")
    if add_generation_prompt:
        out.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(out)


def qwen25_chat(messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """Qwen2.5 Instruct ChatML format; the default system prompt is inserted when none is given."""
    msgs = list(messages)
    out = []
    if not msgs or msgs[0][0] != "system":
        out.append(f"<|im_start|>system\n{QWEN25_DEFAULT_SYSTEM}<|im_end|>\n")
    for role, content in msgs:
        out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def r1_chat(messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """DeepSeek-R1(-Distill) format: BOS, system text bare, <｜User｜>/<｜Assistant｜> markers.

    Earlier assistant turns keep only the text after </think> (as the R1 template does); the
    generation prompt opens the think block ("<｜Assistant｜><think>\\n"), matching the stored
    R1-distill traces.
    """
    out = ["<｜begin▁of▁sentence｜>"]
    for role, content in messages:
        if role == "system":
            out.append(content)
        elif role == "user":
            out.append(f"<｜User｜>{content}")
        else:
            answer = content.split("</think>")[-1]
            out.append(f"<｜Assistant｜>{answer}<｜end▁of▁sentence｜>")
    if add_generation_prompt:
        out.append("<｜Assistant｜><think>\n")
    return "".join(out)


TEMPLATE_OF_FAMILY = {"llama3": "llama3", "qwen": "qwen", "r1-qwen": "r1", "r1-llama": "r1"}
_TEMPLATES = {"llama3": llama3_chat, "qwen": qwen25_chat, "r1": r1_chat}


def apply_template(family: str, messages: Sequence[Message],
                   add_generation_prompt: bool = True) -> str:
    """The prompt text for a tokenizer family's chat template."""
    return _TEMPLATES[TEMPLATE_OF_FAMILY[family]](messages, add_generation_prompt)


def plain_chat(messages: Sequence[Message]) -> str:
    """The template of a tokenizer with no known chat format (an own tokenizer file imported
    without --model): each turn as 'role: content' on its own lines, then 'assistant: '."""
    return "".join(f"{role}: {content}\n" for role, content in messages) + "assistant: "
