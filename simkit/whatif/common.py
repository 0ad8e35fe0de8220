"""What every what-if shares: the result record (WhatIfResult, JSON-safe values) and the mean
output length of a workload. The what-ifs run their ladders through simkit.engine.runner."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simkit.engine.runner import default_num_requests
from simkit.engine.workload import Workload


@dataclass
class WhatIfResult:
    """One what-if's answer: rows of plain values (one dict per table row) plus what was used."""

    name: str
    question: str
    columns: list[str]
    rows: list[dict[str, Any]]
    params: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)   # series for plots (JSON-safe)
    failures: list[str] = field(default_factory=list)     # points that could not run, and why

    def to_json_dict(self) -> dict[str, Any]:
        """JSON document: keys whatif, question, params, columns, rows, notes, extra, failures."""
        return {"whatif": self.name, "question": self.question, "params": clean(self.params),
                "columns": list(self.columns),
                "rows": [{c: clean(r.get(c)) for c in self.columns} for r in self.rows],
                "notes": list(self.notes), "extra": clean(self.extra),
                "failures": list(self.failures)}


def clean(v: Any) -> Any:
    """JSON-safe value: NaN/inf -> None, floats rounded to 6 significant places, recursively."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return None if not math.isfinite(v) else float(f"{v:.6g}")
    if isinstance(v, np.integer):
        return int(v)
    return v


def mean_output_tokens(workload: Workload, max_tokens: int = 8192,
                       max_model_len: int = 16384) -> float:
    """Mean output tokens of the requests the engine would replay (same skip rules as the
    engine's request order, without the KV-capacity rule which depends on the cost model);
    weighted by the workload's request weights when it has them."""
    plen, olen = workload.prompt_len, workload.output_len
    ok = (plen < max_model_len) & (olen > 0)
    eff = np.minimum(np.minimum(olen, max_tokens), max_model_len - plen)
    if not ok.any():
        return float("nan")
    if workload.weights is None:
        return float(eff[ok].mean())
    w = workload.weights[ok]
    return float((eff[ok] * w).sum() / w.sum())


def requests_per_run(num_requests: int | None, workload: Workload, concurrency: int) -> int:
    """`num_requests`, or when None what simkit predict runs: the profile's request count, at
    least 4 x concurrency (simkit.engine.runner.default_num_requests)."""
    return num_requests or default_num_requests(workload, concurrency)
