"""The settings to deploy, as vLLM takes them: the `--speculative-config` JSON of `vllm serve`
for a recommended configuration (vllm-0.34.0 `config/speculative.py`: method, num_speculative_tokens,
num_speculative_tokens_per_batch_size, enable_adaptive_verification, suffix_decoding_corpus_tokens).

Only settings that differ from vLLM's defaults are written, so the line says what to change.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Sequence

VLLM_DEFAULT_CORPUS_TOKENS = 1 << 20      # suffix_decoding_corpus_tokens (config/speculative.py:592)


@dataclass(frozen=True)
class DeploySettings:
    """One configuration as a vLLM server runs it (vanilla: method None)."""

    method: str | None                 # "suffix", "ngram", or None for no speculation
    k: int = 0                         # num_speculative_tokens (the table's largest K when a table)
    table: tuple[tuple[int, int, int], ...] = ()   # num_speculative_tokens_per_batch_size
    adaptive: bool = False             # enable_adaptive_verification
    corpus_tokens: int = VLLM_DEFAULT_CORPUS_TOKENS

    def __post_init__(self) -> None:
        if self.method is None:
            return
        if self.k < 1:
            raise ValueError("a speculative configuration needs K >= 1")
        if self.table and max(r[2] for r in self.table) > self.k:
            raise ValueError("a table's K above num_speculative_tokens would be clamped by vLLM")


def speculative_config(s: DeploySettings) -> dict | None:
    """The --speculative-config object (None: run without --speculative-config)."""
    if s.method is None:
        return None
    cfg: dict = {"method": s.method, "num_speculative_tokens": s.k}
    if s.table:
        cfg["num_speculative_tokens_per_batch_size"] = [list(r) for r in s.table]
    if s.adaptive:
        cfg["enable_adaptive_verification"] = True
    if s.method == "suffix" and s.corpus_tokens != VLLM_DEFAULT_CORPUS_TOKENS:
        cfg["suffix_decoding_corpus_tokens"] = s.corpus_tokens
    return cfg


def serve_args(s: DeploySettings) -> str:
    """The arguments to add to `vllm serve MODEL` ('' for none), quoted for a POSIX shell."""
    cfg = speculative_config(s)
    if cfg is None:
        return ""
    return "--speculative-config " + shlex.quote(json.dumps(cfg, separators=(",", ":")))


def table_settings(k_by_range: Sequence[tuple[int, int, int]], *, method: str = "suffix",
                   adaptive: bool = False) -> DeploySettings:
    """Settings for a batch-size table: num_speculative_tokens is the table's largest K (vLLM
    clamps every range to it). A table whose every K is 0 is no speculation at all."""
    top = max(k for _, _, k in k_by_range)
    if top == 0:
        return DeploySettings(None)
    return DeploySettings(method, top, tuple(tuple(r) for r in k_by_range), adaptive)


__all__ = ["DeploySettings", "VLLM_DEFAULT_CORPUS_TOKENS", "serve_args", "speculative_config",
           "table_settings"]
