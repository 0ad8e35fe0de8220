"""CUDA-graph capture sizes and per-step runtime-mode dispatch, following vLLM's rules (0.26 and
0.33; what differs is a flag of simkit.catalog.vllm_versions.VllmVersion).

vLLM captures graphs for a list of token counts; a step runs the graph of the next captured size
(padding the batch) or eagerly above the largest size. FULL graphs exist only for uniform decode
batches under FULL_AND_PIECEWISE; everything else replays the PIECEWISE graph.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from enum import Enum

from simkit.costmodel.batch import GraphMode


class CudagraphMode(str, Enum):
    """The `cudagraph_mode` compilation setting (the subset simkit models)."""

    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    NONE = "NONE"

    @classmethod
    def parse(cls, text: str) -> "CudagraphMode":
        key = text.strip().upper().replace("-", "_")
        for mode in cls:
            if mode.value == key:
                return mode
        from simkit.errors import UnknownNameError

        raise UnknownNameError("cudagraph mode", text, [m.value for m in cls])


def max_capture_size(max_num_seqs: int, num_spec_tokens: int, max_num_batched_tokens: int) -> int:
    """vLLM's default max_cudagraph_capture_size: min(seqs*(1+K)*2, 512), capped at the token budget."""
    return min(max_num_seqs * (1 + num_spec_tokens) * 2, 512, max_num_batched_tokens)


def _request_counts(limit: int) -> list[int]:
    """vLLM 0.33's request counts for uniform-decode sizes: 1, 2, 4, 8..248 step 8, 256.. step 16,
    and the limit itself."""
    counts = {n for n in [1, 2, 4, *range(8, 256, 8), *range(256, limit + 1, 16)] if n <= limit}
    return sorted(counts | {limit})


def capture_sizes(max_num_seqs: int, num_spec_tokens: int, max_num_batched_tokens: int,
                  mode: CudagraphMode = CudagraphMode.FULL_AND_PIECEWISE,
                  uniform_decode_sizes: bool = False) -> list[int]:
    """Sorted token counts that get a captured graph ([] when mode is NONE).

    Sizes are [1, 2, 4] + range(8, 256, 8) + range(256, max+1, 16), cut at max. With speculative
    decoding, vLLM 0.33 (`uniform_decode_sizes`) also adds n x q for the request counts n of
    `_request_counts(min(max_num_seqs, 512))`, q = 1+K, up to max. With speculative decoding and
    FULL decode graphs each size is then rounded up to a multiple of q and sizes above max are
    dropped (K=4: largest 500; K=8: largest 504; K=6: 497 on 0.26, 504 = 72 x 7 on 0.33).
    """
    if mode is CudagraphMode.NONE:
        return []
    top = max_capture_size(max_num_seqs, num_spec_tokens, max_num_batched_tokens)
    sizes = [s for s in [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)] if s <= top]
    if uniform_decode_sizes and num_spec_tokens > 0:
        q = 1 + num_spec_tokens
        extra = [n * q for n in _request_counts(min(max_num_seqs, 512))]
        sizes = sorted(set(sizes) | {s for s in extra if s <= top})
    if num_spec_tokens > 0 and mode in (CudagraphMode.FULL_AND_PIECEWISE, CudagraphMode.FULL):
        q = 1 + num_spec_tokens
        sizes = sorted({-(-s // q) * q for s in sizes})
        sizes = [s for s in sizes if s <= top]
    return sizes


@dataclass(frozen=True)
class Dispatcher:
    """Resolves (runtime mode, padded token count) of a step for one K (one capture list)."""

    mode: CudagraphMode
    num_spec_tokens: int
    sizes: tuple[int, ...]
    max_num_seqs: int = 1024

    @classmethod
    def build(cls, mode: CudagraphMode, max_num_seqs: int, num_spec_tokens: int,
              max_num_batched_tokens: int, uniform_decode_sizes: bool = False) -> "Dispatcher":
        return cls(mode, num_spec_tokens,
                   tuple(capture_sizes(max_num_seqs, num_spec_tokens, max_num_batched_tokens, mode,
                                       uniform_decode_sizes)),
                   max_num_seqs)

    @property
    def max_size(self) -> int:
        return self.sizes[-1] if self.sizes else 0

    def dispatch(self, num_tokens: int, num_reqs: int, max_query_len: int) -> tuple[GraphMode, int]:
        """Mode and padded tokens of a batch of num_reqs requests, num_tokens scheduled tokens.

        Uniform decode: every request has exactly q = 1+K tokens (max_query_len == q and
        num_tokens == q * num_reqs), vLLM's test. Under FULL_AND_PIECEWISE the FULL decode keys
        cover capture sizes from q to q * max_num_seqs.
        """
        if self.mode is CudagraphMode.NONE or num_tokens > self.max_size or num_tokens <= 0:
            return GraphMode.NONE, num_tokens
        padded = self.sizes[bisect.bisect_left(self.sizes, num_tokens)]
        if self.mode is CudagraphMode.FULL:
            return GraphMode.FULL, padded
        if self.mode is CudagraphMode.FULL_AND_PIECEWISE:
            q = 1 + self.num_spec_tokens
            if (max_query_len == q and num_tokens == q * num_reqs
                    and q <= padded <= q * self.max_num_seqs):
                return GraphMode.FULL, padded
        return GraphMode.PIECEWISE, padded
