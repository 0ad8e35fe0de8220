"""CUDA-graph capture sizes and per-step runtime-mode dispatch, following vLLM's rules: one
graph-size rule per name in GRAPH_RULES, the name a simkit.catalog.vllm_versions.VllmVersion
gives (0.26 and 0.33: `Dispatcher`, token-keyed sizes rounded to multiples of 1+K; 0.34:
`RequestKeyedDispatcher`, FULL decode graphs keyed by request count).

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

    def dispatch(self, num_tokens: int, num_reqs: int, max_query_len: int,
                 num_prefill_reqs: int = 0) -> tuple[GraphMode, int]:
        """Mode and padded tokens of a batch of num_reqs requests, num_tokens scheduled tokens
        (`num_prefill_reqs`: not part of this rule's test).

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


def token_grid(max_num_seqs: int, num_spec_tokens: int, max_num_batched_tokens: int) -> list[int]:
    """vLLM 0.34's token-keyed sizes off SM100 (H200, H100), unrounded: [1, 2, 4] + 8..248 step 8
    + 256..max step 16, plus n x (1+K) for the request counts of `_request_counts` (with spec
    decode), all <= max = min(max_num_seqs x (1+K) x 2, 512, max_num_batched_tokens)
    (vllm/config/vllm.py:2398-2504)."""
    return capture_sizes(max_num_seqs, num_spec_tokens, max_num_batched_tokens,
                         CudagraphMode.PIECEWISE, uniform_decode_sizes=True)


def decode_request_counts(max_num_seqs: int, num_spec_tokens: int, max_num_batched_tokens: int,
                          max_reqs: int | None = None) -> list[int]:
    """vLLM 0.34's FULL decode graphs, as request counts n (captured as n x (1+K) tokens):
    ceil(s / q) for every token-grid size s with ceil(s / q) x q <= max, q = 1+K
    (vllm/config/vllm.py:2661-2671); `max_reqs` keeps those up to the widest batch size a K
    tier of a batch-size K table uses (config/vllm.py:677-706)."""
    q = 1 + num_spec_tokens
    top = max_capture_size(max_num_seqs, num_spec_tokens, max_num_batched_tokens)
    limit = max_num_seqs if max_reqs is None else min(max_num_seqs, max_reqs)
    counts = {-(-s // q) for s in token_grid(max_num_seqs, num_spec_tokens, max_num_batched_tokens)}
    return sorted(n for n in counts if n * q <= top and n <= limit)


@dataclass(frozen=True)
class RequestKeyedDispatcher:
    """vLLM 0.34 (Model Runner V2): uniform decode batches replay the FULL graph of the smallest
    captured request count n >= num_reqs (padded with dummy requests to n x q tokens); any other
    batch the smallest token-keyed graph >= its tokens (PIECEWISE; FULL in FULL mode); above the
    largest, eager (vllm/v1/worker/gpu/cudagraph_utils.py:154-164, 558-602)."""

    mode: CudagraphMode
    num_spec_tokens: int
    sizes: tuple[int, ...]                # token-keyed graphs (prefill and mixed batches)
    decode_reqs: tuple[int, ...]          # FULL decode graphs, as request counts

    @classmethod
    def build(cls, mode: CudagraphMode, max_num_seqs: int, num_spec_tokens: int,
              max_num_batched_tokens: int, max_reqs: int | None = None
              ) -> "RequestKeyedDispatcher":
        if mode is CudagraphMode.NONE:
            return cls(mode, num_spec_tokens, (), ())
        sizes = tuple(token_grid(max_num_seqs, num_spec_tokens, max_num_batched_tokens))
        reqs = () if mode is CudagraphMode.PIECEWISE else tuple(
            decode_request_counts(max_num_seqs, num_spec_tokens, max_num_batched_tokens, max_reqs))
        return cls(mode, num_spec_tokens, sizes, reqs)

    @property
    def max_size(self) -> int:
        return self.sizes[-1] if self.sizes else 0

    def dispatch(self, num_tokens: int, num_reqs: int, max_query_len: int,
                 num_prefill_reqs: int = 0) -> tuple[GraphMode, int]:
        """Mode and padded tokens. Uniform decode (vLLM's test, v1/worker/utils.py:986-1003): no
        prefill in the batch and every request q = 1+K tokens."""
        if self.mode is CudagraphMode.NONE or num_tokens <= 0:
            return GraphMode.NONE, num_tokens
        q = 1 + self.num_spec_tokens
        if (self.decode_reqs and num_prefill_reqs == 0 and max_query_len == q
                and num_tokens == q * num_reqs and num_reqs <= self.decode_reqs[-1]):
            n = self.decode_reqs[bisect.bisect_left(self.decode_reqs, num_reqs)]
            return GraphMode.FULL, n * q
        if num_tokens > self.max_size:
            return GraphMode.NONE, num_tokens
        padded = self.sizes[bisect.bisect_left(self.sizes, num_tokens)]
        return (GraphMode.FULL if self.mode is CudagraphMode.FULL else GraphMode.PIECEWISE), padded


def _rounded(uniform: bool):
    def build(mode: CudagraphMode, max_num_seqs: int, k: int, max_num_batched_tokens: int,
              max_reqs: int | None = None) -> Dispatcher:
        return Dispatcher.build(mode, max_num_seqs, k, max_num_batched_tokens, uniform)
    return build


# graph-size rule name (simkit.catalog.vllm_versions.GRAPH_RULES) -> its dispatcher builder
GRAPH_RULES = {
    "v026-rounded": _rounded(False),
    "v033-uniform-rounded": _rounded(True),
    "v034-request-keyed": RequestKeyedDispatcher.build,
}


def graph_rule(name: str):
    """The dispatcher builder of a graph-size rule: (mode, max_num_seqs, K,
    max_num_batched_tokens, max_reqs=None) -> a dispatcher."""
    if name not in GRAPH_RULES:
        raise ValueError(f"unknown graph-size rule {name!r} ({', '.join(GRAPH_RULES)})")
    return GRAPH_RULES[name]
