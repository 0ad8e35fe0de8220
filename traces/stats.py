"""Plain-data summaries of a corpus for `simkit traces list/show` (JSON-ready dicts)."""

from __future__ import annotations

import numpy as np

from traces.caps import is_capped, threshold
from traces.model import Corpus
from traces.request_caps import cap_summary, request_cap

PERCENTILES = (50, 90, 99)


def _lengths(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    p = np.fromiter((r.prompt_len for r in corpus.requests), dtype=np.int64, count=len(corpus))
    o = np.fromiter((r.output_len for r in corpus.requests), dtype=np.int64, count=len(corpus))
    return p, o


def _dist(x: np.ndarray) -> dict[str, float]:
    if x.size == 0:
        return {"mean": 0.0, **{f"p{q}": 0.0 for q in PERCENTILES}, "max": 0}
    out: dict[str, float] = {"mean": round(float(x.mean()), 1)}
    for q in PERCENTILES:
        out[f"p{q}"] = float(np.percentile(x, q, method="linear"))
    out["max"] = int(x.max())
    return out


def summary(corpus: Corpus) -> dict:
    """One `traces list` row: counts, token totals, producing models and the proxy note."""
    p, o = _lengths(corpus)
    return {
        "corpus": corpus.name, "model": corpus.model, "tokenizer": corpus.family,
        "requests": len(corpus), "prompt_tokens": int(p.sum()), "output_tokens": int(o.sum()),
        "producers": sorted(set(corpus.sources.values())), "sources": dict(corpus.sources),
        "proxy_note": corpus.proxy_note, "skipped": dict(corpus.skipped),
        **cap_summary(corpus.requests),
    }


def detail(corpus: Corpus) -> dict:
    """`traces show`: length percentiles and a per-source / per-producer breakdown."""
    p, o = _lengths(corpus)
    by_source: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(corpus.requests):
        by_source.setdefault((r.source, r.model), []).append(i)
    breakdown = []
    for (source, producer), idx in sorted(by_source.items()):
        ix = np.array(idx)
        greedy = sum(corpus.requests[i].greedy for i in idx)
        cap = request_cap(source, producer)
        capped = sum(is_capped(int(p[i]), int(o[i]), cap) for i in idx)
        breakdown.append({
            "source": source, "producer": producer, "requests": len(idx),
            "prompt_tokens": int(p[ix].sum()), "output_tokens": int(o[ix].sum()),
            "greedy_share": round(greedy / len(idx), 3),
            "output_p50": float(np.percentile(o[ix], 50)),
            "note": corpus.source_notes.get(source, ""),
            "cap": cap.as_dict() if cap else None,
            "capped_threshold": threshold(cap) if cap else None,
            "capped": int(capped),
        })
    turns: dict[int, int] = {}
    for r in corpus.requests:
        turns[r.turn] = turns.get(r.turn, 0) + 1
    return {**summary(corpus), "prompt_len": _dist(p), "output_len": _dist(o),
            "breakdown": breakdown, "turns": {str(k): v for k, v in sorted(turns.items())},
            "proportions": {k: round(v, 4) for k, v in corpus.proportions.items()}}
