"""Each request's generation cap, looked up in the source registry (traces.sources): which
requests of a corpus hit their producer's cap, and the counts `traces list` shows.

Apart from traces.caps (the cap vocabulary every source declares its caps in) because it reads
the registry, which imports traces.caps."""

from __future__ import annotations

from collections.abc import Sequence

from traces.caps import OutputCap, is_capped
from traces.model import TraceRequest
from traces.sources import SOURCES


def request_cap(source: str, producer: str) -> OutputCap | None:
    """The cap of the run that produced a built-in source's outputs (None: imported corpus or
    no known cap)."""
    src = SOURCES.get(source)
    return src.cap(producer) if src is not None else None


def capped_flags(requests: Sequence[TraceRequest]) -> list[bool]:
    """Per TraceRequest: True when its output hit its source's generation cap."""
    return [is_capped(r.prompt_len, r.output_len, request_cap(r.source, r.model))
            for r in requests]


def cap_summary(requests: Sequence[TraceRequest]) -> dict:
    """Counts for `traces list`: requests that hit their cap, and requests whose source has no
    known cap (never counted as capped)."""
    flags = capped_flags(requests)
    unknown = sum(request_cap(r.source, r.model) is None for r in requests)
    n = len(flags)
    return {"capped": int(sum(flags)), "capped_share": round(sum(flags) / n, 4) if n else 0.0,
            "no_known_cap": int(unknown)}
