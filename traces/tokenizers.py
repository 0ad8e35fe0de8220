"""Offline tiktoken encodings for the real tokenizers in traces-src/tokenizers (no network).

Families: "llama3" (Llama-3/3.1), "qwen" (Qwen2/2.5), "r1-qwen" (DeepSeek-R1-Distill-Qwen: Qwen
vocabulary, DeepSeek special-token names) and "r1-llama" (DeepSeek-R1-Distill-Llama: Llama-3
vocabulary, DeepSeek special-token names). Chat templates live in traces/chat.py.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from simkit.errors import InputError, UnknownNameError
from simkit.paths import traces_src_dir

# Pre-tokenizer patterns as published with each tokenizer (SOURCES.md §10): Llama-3 groups up to
# three digits, Qwen2 splits every digit on its own.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA3_BPE = "tokenizers/llama3/tokenizer.model"
QWEN_BPE = "tokenizers/qwen/qwen.tiktoken"
LLAMA3_N_BASE = 128000
QWEN_N_BASE = 151643


def _llama3_specials(named: dict[int, str]) -> dict[str, int]:
    """Ids 128000-128255: the given names, every other id <|reserved_special_token_N|>."""
    out: dict[str, int] = {}
    reserved = 0
    for tid in range(LLAMA3_N_BASE, LLAMA3_N_BASE + 256):
        if tid in named:
            out[named[tid]] = tid
        else:
            out[f"<|reserved_special_token_{reserved}|>"] = tid
            reserved += 1
    return out


# Llama-3.1 names (3.1 adds <|finetune_right_pad_id|>, <|eom_id|> and <|python_tag|>; the
# reserved tokens are numbered over the remaining ids, so 128255 = <|reserved_special_token_247|>).
LLAMA31_NAMED = {
    128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128004: "<|finetune_right_pad_id|>",
    128006: "<|start_header_id|>",
    128007: "<|end_header_id|>", 128008: "<|eom_id|>", 128009: "<|eot_id|>",
    128010: "<|python_tag|>",
}
# R1-Distill-Llama renames a few of the Llama-3.1 reserved ids. From memory of the HF
# tokenizer_config of deepseek-ai/DeepSeek-R1-Distill-Llama-8B; not byte-verified here.
R1_LLAMA_NAMED = {
    **LLAMA31_NAMED,
    128000: "<｜begin▁of▁sentence｜>", 128001: "<｜end▁of▁sentence｜>", 128011: "<｜User｜>",
    128012: "<｜Assistant｜>", 128013: "<think>", 128014: "</think>", 128015: "<｜▁pad▁｜>",
}

QWEN25_SPECIALS = {
    name: QWEN_N_BASE + i for i, name in enumerate([
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
        "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
        "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
        "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
        "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    ])
}
# R1-Distill-Qwen remaps 151643-151649 (checked against a published tokenizer.json excerpt); the
# ids above 151649 keep their Qwen2.5 names.
R1_QWEN_SPECIALS = {
    **{k: v for k, v in QWEN25_SPECIALS.items() if v > 151649},
    "<｜end▁of▁sentence｜>": 151643, "<｜User｜>": 151644, "<｜Assistant｜>": 151645,
    "<｜begin▁of▁sentence｜>": 151646, "<|EOT|>": 151647, "<think>": 151648, "</think>": 151649,
}

FAMILIES = ("llama3", "qwen", "r1-qwen", "r1-llama")

# Special tokens that appear inside generated text (the R1 think markers). Outputs are encoded
# with these allowed and every other special-token string treated as plain text, as vLLM's
# detokenised outputs never contain the structural markers.
OUTPUT_SPECIALS = {"llama3": set(), "qwen": set(), "r1-qwen": {"<think>", "</think>"},
                   "r1-llama": {"<think>", "</think>"}}


def _bpe_path(rel: str) -> Path:
    src = traces_src_dir()
    if src is None:
        raise InputError("tokenizer files not found: set SIMKIT_TRACES_SRC to the traces-src folder, "
                         "or give your model's own tokenizer file (--tokenizer PATH)", path=rel)
    path = src / rel
    if not path.is_file():
        raise InputError("tokenizer file missing", path=str(path))
    return path


@functools.lru_cache(maxsize=None)
def _ranks(rel: str) -> dict[bytes, int]:
    return load_tiktoken_bpe(str(_bpe_path(rel)))


def get_tokenizer_from_ranks(family: str, ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """A family's Encoding (its pattern and special tokens) over the given BPE ranks: the
    family's own file here, or the same file a user gives as their own tokenizer."""
    pat, specials = _pattern_and_specials(family)
    return tiktoken.Encoding(name=f"simkit-{family}", pat_str=pat, mergeable_ranks=ranks,
                             special_tokens=specials)


def _pattern_and_specials(family: str) -> tuple[str, dict[str, int]]:
    """A family's split pattern and special tokens (what its Encoding holds besides the ranks)."""
    if family == "llama3":
        pat, specials = LLAMA3_PATTERN, _llama3_specials(LLAMA31_NAMED)
    elif family == "r1-llama":
        pat, specials = LLAMA3_PATTERN, _llama3_specials(R1_LLAMA_NAMED)
    elif family == "qwen":
        pat, specials = QWEN2_PATTERN, dict(QWEN25_SPECIALS)
    elif family == "r1-qwen":
        pat, specials = QWEN2_PATTERN, dict(R1_QWEN_SPECIALS)
    else:
        raise UnknownNameError("tokenizer", family, list(FAMILIES))
    return pat, specials


@functools.lru_cache(maxsize=None)
def get_tokenizer(family: str) -> tiktoken.Encoding:
    """The tiktoken Encoding for a tokenizer family (cached per process)."""
    if family not in FAMILIES:
        raise UnknownNameError("tokenizer", family, list(FAMILIES))
    return get_tokenizer_from_ranks(family, _ranks(bpe_file_for(family)))


def bpe_file_for(family: str) -> str:
    """The traces-src relative path of the BPE file a family uses (for cache keys)."""
    if family not in FAMILIES:
        raise UnknownNameError("tokenizer", family, list(FAMILIES))
    return LLAMA3_BPE if family in ("llama3", "r1-llama") else QWEN_BPE


@functools.lru_cache(maxsize=None)
def tokenizer_fingerprint(family: str) -> str:
    """A short digest of everything that defines a family's encoding (file bytes, pattern,
    specials), read from what the Encoding is built from: building it (about a second of BPE
    parsing) is for encoding, which a cached corpus does not need."""
    pat, specials = _pattern_and_specials(family)
    h = hashlib.sha256()
    h.update(_bpe_path(bpe_file_for(family)).read_bytes())
    h.update(pat.encode())
    h.update(repr(sorted(specials.items())).encode())
    h.update(repr(sorted(OUTPUT_SPECIALS[family])).encode())
    return h.hexdigest()[:16]


def encode_prompt(family: str, text: str) -> list[int]:
    """Encode a chat-templated prompt: every special-token string becomes its special id."""
    return get_tokenizer(family).encode(text, allowed_special="all")


def encode_output(family: str, text: str) -> list[int]:
    """Encode generated text: only the family's in-text markers (R1 <think>) are special."""
    return get_tokenizer(family).encode(text, allowed_special=OUTPUT_SPECIALS[family],
                                        disallowed_special=())


class FamilyTokenizer:
    """A built-in family behind the interface of traces.own_tokenizer.OwnTokenizer (n_vocab,
    encode_prompts, encode_outputs), so that parsers take either."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._enc = get_tokenizer(family)
        self.n_vocab = self._enc.n_vocab

    def encode_prompts(self, texts: list[str]) -> list[list[int]]:
        return self._enc.encode_batch(texts, allowed_special="all")

    def encode_outputs(self, texts: list[str]) -> list[list[int]]:
        return self._enc.encode_batch(texts, allowed_special=OUTPUT_SPECIALS[self.family],
                                      disallowed_special=())


def encoder_for(family):
    """A family name as a FamilyTokenizer; an own tokenizer (OwnTokenizer) as it is."""
    return FamilyTokenizer(family) if isinstance(family, str) else family
