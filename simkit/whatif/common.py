"""What every what-if shares: loading a workload and a cost model, running configurations over
seeds on local processes (through the engine's public predict helpers), and the result record."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simkit.engine.config import EngineConfig, SpecConfig, parse_configs
from simkit.engine.sim import ClosedLoop, OpenLoop
from simkit.engine.workload import Workload

_KEYS = itertools.count()


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


def load_workload(model: str, corpus: str, source: str = "auto",
                  history: str | None = None, capped_outputs: str = "keep",
                  max_tokens: int = 8192) -> Workload:
    """The acceptance-replay workload of one (model, corpus) under a request history
    (simkit.history; None = the profile's own): simkit.profiles.load_profile; capped outputs
    kept or extended to max_tokens (simkit.engine.capped)."""
    from simkit.engine.capped import apply_capped_outputs, check_mode
    from simkit.profiles import load_profile

    check_mode(capped_outputs)

    prof = load_profile(model, corpus, source=source, tree=history)
    workload = Workload.from_profile(prof)
    if not workload.name:
        workload.name = f"{model}/{corpus}"
    return apply_capped_outputs(workload, capped_outputs, max_tokens)


def engine_for(cost, *, max_tokens: int = 8192, max_model_len: int = 16384,
               cudagraph_mode: str = "FULL_AND_PIECEWISE") -> EngineConfig:
    """Server limits of the study (vLLM defaults) with the cost model's KV capacity."""
    from simkit.engine.predict import engine_config

    return engine_config(cost, max_tokens=max_tokens, max_model_len=max_model_len,
                         cudagraph_mode=cudagraph_mode)


def register(workload: Workload, cost) -> tuple:
    """Put (workload, cost) in the engine's per-process context under a fresh key (forked
    workers inherit it) and return the key the engine's job runner expects."""
    from simkit.engine import predict as P

    name = f"whatif#{next(_KEYS)}"
    P.with_workload(name, workload.name, cost.hw.name, cost.tp, "whatif", workload, cost)
    key, _, _ = P.load_context(name, workload.name, cost.hw.name, cost.tp, "whatif")
    return key


def release(key: tuple) -> None:
    """Drop a registered context (keeps long sweeps from holding every workload)."""
    from simkit.engine import predict as P

    P._CONTEXT.pop(key, None)


def run_metrics(jobs: list[tuple[tuple, EngineConfig, SpecConfig, int, Any, int]],
                workers: int | None) -> list[dict[str, Any]]:
    """Run (key, engine config, spec, seed, load, num_requests) jobs; metrics dicts in job order."""
    from simkit.engine.predict import run_jobs

    return run_jobs(jobs, workers)


def run_ladder(workload: Workload, cost, specs: list[SpecConfig], *, seeds: int,
               num_requests: int, load: ClosedLoop | OpenLoop, workers: int | None,
               cfg: EngineConfig | None = None):
    """Simulate every spec over seeds; the engine's per-config Rows (means over seeds)."""
    from simkit.engine.predict import summarize_rows

    cfg = cfg or engine_for(cost)
    runnable = [s for s in specs if workload.has_drafter(s.drafter)]
    key = register(workload, cost)
    try:
        for spec in runnable:                 # build the column lists before forking
            for k in spec.k_values if spec.drafter != "none" else ():
                workload.columns(spec.drafter, k)
        jobs = [(key, cfg, s, seed, load, num_requests) for s in runnable for seed in range(seeds)]
        flat = run_metrics(jobs, workers)
    finally:
        release(key)
    runs = [flat[i * seeds:(i + 1) * seeds] for i in range(len(runnable))]
    return summarize_rows(runnable, runs)


def specs_of(configs: str) -> list[SpecConfig]:
    """parse_configs with a clear error for empty strings (the engine's grammar)."""
    return parse_configs(configs)


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


def default_requests(n: int | None, floor: int) -> int:
    """Requests per run: the caller's number, else `floor`."""
    return int(n) if n else int(floor)


def plot_setup():
    """matplotlib with the Agg backend (no display), imported on demand."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_fig(fig, path) -> None:
    """PNG without a timestamp in its metadata (byte-stable for the same inputs)."""
    fig.savefig(path, dpi=110, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
