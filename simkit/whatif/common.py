"""What every what-if shares: the result record (WhatIfResult, JSON-safe values), the mean
output length of a workload, and the run settings (simkit.app.options.RunOptions) turned into
what a ladder needs: the workload, the cost model, the server, the ladder itself
(simkit.engine.runner). Every what-if takes one RunOptions, as predict does."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simkit.app.options import RunOptions
from simkit.engine.config import EngineConfig, SpecConfig
from simkit.engine.runner import (Cell, Job, Ladder, default_num_requests, pool_pays, prepare,
                                  run_ladder, runnable_specs)
from simkit.engine.summary import summarize_rows
from simkit.engine.sim import ClosedLoop
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


def workload_note(name: str, origin: str | None) -> str:
    """The notes' words for the workload a what-if replayed: its name and its profile's origin,
    as predict's assumptions say it ("profile shipped (source files verified ...)")."""
    return f"workload {name}, profile {origin or 'of unknown origin'}"


def workload_of(run: RunOptions, workload: Workload | None = None, corpus: str | None = None
                ) -> Workload:
    """`workload`, or the one of `run` (its model, `corpus` or its corpus, profile source,
    history, capped outputs and max_tokens: simkit.app.cells.load_workload)."""
    from simkit.app.cells import load_workload

    return workload or load_workload(run.model, corpus or run.corpus, run.source, run.history,
                                     run.capped_outputs, run.max_tokens, run.vllm_version)


def cost_of(run: RunOptions, hardware: str | None = None, tp: int | None = None) -> Any:
    """The cost model of `run` (its model, calibration and vLLM version) on `hardware` at `tp`
    (default: the run's own)."""
    from simkit.costmodel import load_cost_model

    return load_cost_model(run.model, hardware or run.hardware, tp=tp or run.tp,
                           calibration=run.calibration, vllm_version=run.vllm_version)


def skipped_of(ladder: Any) -> dict[str, int]:
    """The profile requests the engine skipped in a ladder (a Ladder or a list of RunResult;
    every run of one cell skips the same ones), by reason."""
    runs = getattr(ladder, "runs", ladder)
    return dict(runs[0].skipped) if runs else {}


def skip_note(labelled: list[tuple[str, dict[str, int]]]) -> str | None:
    """One note naming, per labelled ladder (label, skipped_of), the profile requests the engine
    skipped (no room under max_model_len, empty output, beyond the KV cache:
    simkit.engine.sim.request_order), or None when none did: a row never runs on fewer
    requests than the others without saying so."""
    parts = []
    if len(labelled) > 1 and all(sk == labelled[0][1] for _, sk in labelled):
        labelled = [("every row", labelled[0][1])]         # the same requests everywhere
    for label, skipped in labelled:
        counts = {k: v for k, v in sorted(skipped.items()) if v}
        if counts:
            parts.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if not parts:
        return None
    return "skipped profile requests (never run): " + "; ".join(parts)


def ladder_of(run: RunOptions, workload: Workload, cost: Any, specs: list[SpecConfig], *,
              server: EngineConfig | None = None, num_requests: int | None = None,
              concurrency: int | None = None, phase: str | None = None) -> Ladder:
    """The ladder of `specs` on (workload, cost): closed loop at `concurrency` (default: the
    run's), the run's seeds and workers, `num_requests` per run (default: requests_per_run of
    the run's), on `server` (default: RunOptions.server); `phase`: its name as a stated phase
    of the command's progress, with its own total (simkit.progress)."""
    clients = concurrency or run.concurrency
    n = num_requests or requests_per_run(run.num_requests, workload, clients)
    return run_ladder(Cell(workload, cost, server or run.server(cost)), specs,
                      seeds=run.seeds, num_requests=n, load=ClosedLoop(clients),
                      workers=run.workers, phase=phase)


def ladders_of(run: RunOptions, workload: Workload, cost: Any, specs: list[SpecConfig], *,
               server: EngineConfig, levels: list[tuple[int, int]], phase: str) -> list[Ladder]:
    """The ladder of `specs` at each (concurrency, requests per run) of `levels`, as ladder_of
    would run them one after the other, but on one pool of workers forked once and without
    waiting for a level's last run before the next level starts (the runs do not depend on
    each other; here, without workers, when they are too few requests for a pool to pay:
    runner.pool_pays). One stated progress phase counts every run: `phase`, then the size."""
    from simkit.engine.pool import JobPool, results
    from simkit.progress import phase as stated

    cell = Cell(workload, cost, server)
    runnable, unavailable = runnable_specs(cell, specs)
    seeds = run.seeds
    jobs = [Job(spec, seed, ClosedLoop(c), n) for c, n in levels for spec in runnable
            for seed in range(seeds)]
    with stated(f"{phase}: {len(levels)} level(s) x {len(runnable)} configuration(s) x "
                f"{seeds} seed(s)", len(jobs)):
        prepare(cell, runnable)
        workers = run.workers if run.workers is not None or pool_pays(cell, jobs) else 1
        with JobPool(cell, workers, width=len(jobs)) as pool:
            flat = results(pool, [pool.submit(j) for j in jobs])
    per = len(runnable) * seeds
    out = []
    for i in range(len(levels)):
        level = flat[i * per:(i + 1) * per]
        runs = [level[j * seeds:(j + 1) * seeds] for j in range(len(runnable))]
        out.append(Ladder(summarize_rows(runnable, runs), dict(unavailable), level))
    return out
