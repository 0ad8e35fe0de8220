"""Token-id request files for calibration runs (JSONL, one request per line).

Each line: {"id": str, "prompt_ids": [int...], "output_ids": [int...]} plus optional "source".
These files hold token ids of third-party traces: they are made on the CPU host from
../shared/traces-src, carried to the GPU host in an ignored folder, and never committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from simkit.errors import InputError
from traces.sources.base import read_jsonl


@dataclass(frozen=True)
class CalRequest:
    """One request to replay: prompt ids, and the trace's output ids that will be forced."""

    id: str
    prompt_ids: np.ndarray
    output_ids: np.ndarray
    source: str = ""


def _ids(obj: dict, key: str, path: Path, line: int) -> np.ndarray:
    val = obj.get(key)
    if not isinstance(val, list) or not val:
        raise InputError("must be a non-empty list of token ids", path=str(path), line=line, field=key)
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in val):
        raise InputError("token ids must be non-negative integers", path=str(path), line=line,
                         field=key)
    return np.asarray(val, dtype=np.int32)


def read_requests(path: Path) -> list[CalRequest]:
    """Parse and validate a request file; every error names file, line and field."""
    path = Path(path)
    out: list[CalRequest] = []
    seen: set[str] = set()
    for n, obj in read_jsonl(path):
        rid = obj.get("id")
        if not isinstance(rid, str) or not rid or "-" in rid:
            raise InputError("must be a non-empty string without '-'", path=str(path), line=n,
                             field="id")
        if rid in seen:
            raise InputError(f"duplicate id {rid!r}", path=str(path), line=n, field="id")
        seen.add(rid)
        out.append(CalRequest(rid, _ids(obj, "prompt_ids", path, n),
                              _ids(obj, "output_ids", path, n), str(obj.get("source", ""))))
    if not out:
        raise InputError("no requests in file", path=str(path))
    return out


def write_requests(path: Path, reqs: list[CalRequest]) -> None:
    """Write requests as JSONL (deterministic: order and formatting fixed)."""
    from simkit.outfiles import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for r in reqs:
                fh.write(json.dumps({"id": r.id, "prompt_ids": r.prompt_ids.tolist(),
                                     "output_ids": r.output_ids.tolist(), "source": r.source},
                                    separators=(",", ":")) + "\n")

    write_atomic(path, write)        # whole or not at all; a full disk names the file


def select_requests(reqs: Iterable[CalRequest], n: int, max_model_len: int, k_max: int,
                    max_tokens_cap: int) -> tuple[list[CalRequest], dict[str, int]]:
    """The first n requests that fit max_model_len with capped outputs and K lookahead (`reqs`
    is read one past the n-th kept, no further: a generator over a large pool is made that far).

    Returns the kept requests (outputs truncated to the cap) and skip counts by reason, so that
    nothing is dropped silently.
    """
    kept: list[CalRequest] = []
    skipped: dict[str, int] = {}
    for r in reqs:
        if len(kept) >= n:
            break
        out = r.output_ids[:max_tokens_cap] if max_tokens_cap > 0 else r.output_ids
        if len(r.prompt_ids) + len(out) + k_max + 1 > max_model_len:
            skipped["too_long_for_max_model_len"] = skipped.get("too_long_for_max_model_len", 0) + 1
            continue
        kept.append(CalRequest(r.id, r.prompt_ids, out, r.source))
    return kept, skipped
