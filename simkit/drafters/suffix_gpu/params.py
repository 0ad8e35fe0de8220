"""Settings and constants of vLLM 0.34's GPU suffix speculator (facts: vllm-0.34-facts.md 2.1).

`SuffixGpuParams` holds the user-visible options at vLLM's defaults plus the replay's ingestion lag;
the constants are the speculator's own (hash multiplier, slots per bucket, prompt context)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

DRAFTER_NAME = "suffix_gpu"
HASH_MUL = 0x9E3779B97F4A7C15      # golden-ratio multiplier (vLLM stores it as a signed int64)
SLOTS = 8                          # index slots per hash bucket (one per document residue mod 8)
PROMPT_CONTEXT = 3                 # prompt tokens stored ahead of each response in the corpus
MAX_CORPUS_TOKENS = (1 << 31) - 1  # vLLM refuses corpus_tokens >= 2^31


def num_buckets(corpus_tokens: int) -> int:
    """Hash buckets of the index: next power of two of max(16, corpus_tokens // 4)."""
    n = max(16, corpus_tokens // 4)
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class SuffixGpuParams:
    """`suffix_decoding_max_tree_depth` (the longest match, own history and corpus),
    `suffix_decoding_corpus_tokens` (ring capacity; 0 = no corpus, as is max_depth < 2) and
    `ingest_lag`: steps between a request's finish and the first draft that can read its response
    (2 under vLLM 0.34's async scheduling, 1 synchronous; used by the concurrent replay)."""

    max_depth: int = 24
    corpus_tokens: int = 1 << 20
    ingest_lag: int = 2

    def __post_init__(self) -> None:
        if self.max_depth < 1:
            raise ValueError("max_depth must be >= 1")
        if not 0 <= self.corpus_tokens <= MAX_CORPUS_TOKENS:
            raise ValueError("corpus_tokens must be in 0..2^31-1")
        if self.ingest_lag < 1:
            raise ValueError("ingest_lag must be >= 1")

    @property
    def has_corpus(self) -> bool:
        """Whether the cross-request corpus is on (vLLM: corpus_tokens > 0 and depth >= 2)."""
        return self.corpus_tokens > 0 and self.max_depth >= 2

    @property
    def buckets(self) -> int:
        """Hash buckets per key length (vLLM's NB)."""
        return num_buckets(self.corpus_tokens)

    def as_dict(self) -> dict:
        return {"drafter": DRAFTER_NAME, **asdict(self)}
