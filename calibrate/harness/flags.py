"""The runner flags of vLLM 0.34's new suffix options, parsed and checked before any engine starts.

- `corpus_tokens`: `suffix_decoding_corpus_tokens` (token capacity of the GPU corpus of finished
  responses; 0 turns cross-request drafting off);
- `k_table`: `num_speculative_tokens_per_batch_size`, inclusive batch-size ranges with a K each,
  written `1-8:16,9-64:8,65-1024:4`;
- `adaptive`: `enable_adaptive_verification`.
Each lands in the engine's speculative config and, as resolved, in the run row's drafter_params.
"""

from __future__ import annotations

from dataclasses import dataclass

from simkit.errors import InputError

KTable = tuple[tuple[int, int, int], ...]


def parse_k_table(text: str) -> KTable:
    """'1-8:16,9-64:8,65-1024:4' -> ((1, 8, 16), (9, 64, 8), (65, 1024, 4)), checked as vLLM 0.34
    checks it (ranges start at 1, positive, sorted, non-overlapping; K >= 0) and, beyond that,
    without gaps, so that every batch size up to the last range has a K of the user's choosing."""
    out = []
    for part in [p.strip() for p in str(text).split(",") if p.strip()]:
        rng, colon, k = part.partition(":")
        lo, dash, hi = rng.partition("-")
        try:
            entry = (int(lo), int(hi if dash else lo), int(k))
        except ValueError:
            raise InputError(f"{part!r} is not START-END:K (e.g. 1-8:16)", field="k-table") from None
        if not colon:
            raise InputError(f"{part!r} is not START-END:K (e.g. 1-8:16)", field="k-table")
        out.append(entry)
    if not out:
        raise InputError("give at least one START-END:K range", field="k-table")
    prev_end = 0
    for lo, hi, k in out:
        if lo < 1 or hi < lo:
            raise InputError(f"range {lo}-{hi}: needs 1 <= START <= END", field="k-table")
        if k < 0:
            raise InputError(f"range {lo}-{hi}: K must be >= 0", field="k-table")
        if lo != prev_end + 1:
            raise InputError(f"range {lo}-{hi} does not start right after {prev_end} (the ranges "
                             "must start at 1 and follow each other without gaps or overlaps)",
                             field="k-table")
        prev_end = hi
    return tuple(out)


def k_table_text(table: KTable) -> str:
    """The written form parse_k_table reads."""
    return ",".join(f"{lo}-{hi}:{k}" for lo, hi, k in table)


@dataclass(frozen=True)
class RunnerFlags:
    """vLLM 0.34's suffix options for one engine (None / False: vLLM's default)."""

    corpus_tokens: int | None = None
    k_table: KTable | None = None
    adaptive: bool = False

    def __post_init__(self) -> None:
        if self.corpus_tokens is not None and not 0 <= self.corpus_tokens < 2 ** 31:
            raise InputError("must be in [0, 2^31)", field="corpus-tokens")

    @property
    def any(self) -> bool:
        return self.corpus_tokens is not None or self.k_table is not None or self.adaptive

    def speculative_fields(self) -> dict:
        """The speculative-config fields these flags set."""
        out: dict = {}
        if self.corpus_tokens is not None:
            out["suffix_decoding_corpus_tokens"] = int(self.corpus_tokens)
        if self.k_table is not None:
            out["num_speculative_tokens_per_batch_size"] = [list(e) for e in self.k_table]
        if self.adaptive:
            out["enable_adaptive_verification"] = True
        return out

    def tag(self) -> str:
        """Run-id part naming the flags ('' when none): av, ct<N>, kt (the table is in drafter_params)."""
        parts = []
        if self.k_table is not None:
            parts.append("kt")
        if self.adaptive:
            parts.append("av")
        if self.corpus_tokens is not None:
            parts.append(f"ct{self.corpus_tokens}")
        return "-".join(parts)


__all__ = ["KTable", "RunnerFlags", "k_table_text", "parse_k_table"]
