"""One loader per raw source in traces-src; SOURCES lists them in a fixed order."""

from __future__ import annotations

from traces.sources import (
    alpaca_eval,
    arena_hard,
    humaneval,
    integralbench,
    korgym,
    livecodebench,
    mt_bench,
    r1distill,
    vectara,
    wmt24,
    zeroeval,
)
from traces.sources.base import Source, TextRecord

SOURCES: dict[str, Source] = {s.name: s for s in (
    alpaca_eval.SOURCE, arena_hard.SOURCE, mt_bench.SOURCE,
    humaneval.SOURCE, livecodebench.CODEGEN, livecodebench.SELF_REPAIR,
    zeroeval.MATH_L5, zeroeval.GSM, zeroeval.CRUX,
    vectara.SOURCE, wmt24.SOURCE, r1distill.SOURCE,
    korgym.THINKING, korgym.INSTRUCT, integralbench.SOURCE,
)}

__all__ = ["SOURCES", "Source", "TextRecord"]
