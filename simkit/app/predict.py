"""`predict`: the configuration ladder for one model and corpus, over seeds, on local processes.

Every (config, seed) pair is one simulation of the cell (simkit.engine.runner): workload and cost
model are loaded once in the parent and inherited by forked workers; results are assembled in
submission order, so the output is byte-identical whatever the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simkit.app.capped import describe as capped_describe
from simkit.engine.config import DEFAULT_CONFIGS, EngineConfig, ladder_configs, parse_configs
from simkit.engine.runner import Cell, ProgressFactory, default_num_requests, run_ladder
from simkit.app.cells import load_cell
from simkit.app.options import RunOptions
from simkit.engine.sim import ClosedLoop, OpenLoop, RunResult
from simkit.engine.summary import Row
from simkit.app.verdict import adaptive_verdict, best_dynamic, best_kpad, dynamic_verdict, fastest
from simkit.engine.workload import Workload


@dataclass
class Prediction:
    """A full ladder for one (model, corpus, hardware, TP), with the best-K verdict.

    The run settings are held once, in `run`, as they applied: catalogue ids, the TP, the
    requests per run, the calibration, the vLLM version and the request history that were
    used (not the None that asked for a default); model, corpus, ... read from it."""

    run: RunOptions
    cost_label: str
    load: str
    proxy_note: str
    origin: str
    rows: list[Row]
    unavailable: dict[str, str]
    skipped: dict[str, int]
    best_config: str | None
    best_k: int | None
    dynamic_verdict: str
    why: str
    # what the report states as assumptions (simkit.report.assumptions reads these)
    engine: EngineConfig | None = None
    tp_chosen: bool = False             # TP picked as the smallest that fits (not given)
    workload_provenance: dict[str, Any] = field(default_factory=dict)
    request_rate: float | None = None
    # request count that gives every run a steady window, when this one did not (else None)
    suggested_num_requests: int | None = None
    capped_note: str = ""               # the capped-outputs mode in one sentence (assumptions)
    prefix_note: str = ""               # why caching was not modelled, when it was not
    adaptive_verdict: str = ""          # whether to turn adaptive verification on (suffix-av rows)
    specs: tuple = ()                   # the SpecConfig of each row (the settings to deploy)

    model = property(lambda self: self.run.model, doc="the catalogue model id")
    corpus = property(lambda self: self.run.corpus, doc="the corpus name")
    hardware = property(lambda self: self.run.hardware, doc="the catalogue hardware id")
    tp = property(lambda self: self.run.tp, doc="the TP degree simulated")
    concurrency = property(lambda self: self.run.concurrency, doc="closed-loop clients")
    num_requests = property(lambda self: self.run.num_requests, doc="requests per run")
    seeds = property(lambda self: self.run.seeds, doc="request orders simulated")
    calibration = property(lambda self: self.run.calibration,
                           doc="the calibration used: an embedded name, a path or analytic")
    history = property(lambda self: self.run.history,
                       doc="the request history the workload's tables assume")
    capped_outputs = property(lambda self: self.run.capped_outputs,
                              doc="simkit.app.capped: keep | extend")
    prefix_caching = property(lambda self: self.run.prefix_caching,
                              doc="on: rows carry prefix_hit_rate (None = not modelled)")
    vllm_version = property(lambda self: self.run.vllm_version or "",
                            doc="the vLLM version whose rules and calibration apply")

    @property
    def steady_window(self) -> bool:
        """True when every row's figures come from a steady window."""
        return all(r.steady_window for r in self.rows)

    @property
    def overloaded(self) -> list[str]:
        """The configs whose open-loop window was overloaded for some seed (the queue grew
        through it): their tok/s is no steady rate, and no recommendation ranks them."""
        return [r.config for r in self.rows if getattr(r, "overloaded_windows", 0)]


def verdict(rows: list[Row], exact_k: bool = False) -> tuple[str | None, int | None, str, str]:
    """(best_config, best_k, dynamic-vs-best-K line, why line of the best config); the
    dynamic line under simkit.app.verdict's tie rule. `exact_k`: the fixed-K rows are the suffix
    rows (a vLLM whose decode requests verify exactly K slots, 0.34)."""
    best = fastest(rows)
    if best is None:
        return None, None, "", ""
    kpad = best_kpad(rows, exact_k)
    best_k = kpad.k if kpad else None
    dyn = best_dynamic(rows)
    line = ""
    call = dynamic_verdict(dyn, kpad)
    if dyn and kpad and call:
        gain = dyn.output_tok_s / kpad.output_tok_s - 1
        beats = {"ties": "ties (within the seed spread or 1%)",
                 "loses": "does not beat"}.get(call, str(call))
        line = (f"{dyn.config} ({dyn.output_tok_s:,.0f} tok/s) {beats} best K={best_k} "
                f"({kpad.output_tok_s:,.0f} tok/s): {gain:+.1%}")
    why = (f"{best.config}: {best.full_graph_frac:.0%} FULL steps, "
           f"{best.tokens_per_step:.2f} tokens/step, host {best.host_frac:.0%}")
    return best.config, best_k, line, why


def predict(run: RunOptions, *, configs: str = DEFAULT_CONFIGS,
            request_rate: float | None = None, progress: ProgressFactory | None = None,
            workload: Workload | None = None, cost: Any = None) -> Prediction:
    """Simulate every configuration of `configs` on the cell `run` names, over `run.seeds`
    seeds, and pick the best K.

    `run.capped_outputs` (keep | extend) is how requests whose trace output stopped at a
    generation cap are replayed (simkit.app.capped; keep = as the traces end).

    `run.num_requests` (None) defaults to default_num_requests (the profile's request count, at least
    4 x concurrency so that the steady window exists; 1,024 for a weighted profile sample).
    `request_rate` (req/s) switches from the closed loop to seeded Poisson arrivals (capacity
    planning). `progress(total)` returns a per-job callback.
    `run.prefix_caching` (vLLM's default, on) needs the profile's prompt block hashes; without them
    the rows say the hit rate is n/a. Off reproduces the output from before it was modelled.
    `workload` and `cost`, when given together, are used as they are instead of loading the
    (model, corpus) profile and the cost model (model and corpus then only name the cell).
    `run.vllm_version` (None: the newest simkit knows) picks the engine rules and the default
    calibration (simkit.catalog.vllm_versions).
    """
    from simkit.catalog.hardware import canonical_hardware
    from simkit.catalog.models import canonical_model
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.checks import positive_int, positive_rate
    from simkit.costmodel.calibrations import default_calibration
    from simkit.errors import InputError
    from simkit.serving_checks import check_serving

    # one spelling of each name from here on: the label, the default calibration and the
    # report all key on the catalogue id (H200 once ran h200's calibration labelled analytic)
    model, hardware = canonical_model(run.model), canonical_hardware(run.hardware)
    run = run.but(model=model, hardware=hardware)
    tp, seeds, concurrency = run.tp, run.seeds, run.concurrency
    max_tokens, max_model_len = run.max_tokens, run.max_model_len
    num_requests = run.num_requests
    for value, name in ((seeds, "seeds"), (concurrency, "concurrency"),
                        (num_requests, "num-requests")):
        positive_int(value, name)
    positive_rate(request_rate, "request-rate")

    check_serving(model if workload is None else None, tp, max_tokens=max_tokens,
                  max_model_len=max_model_len, max_num_seqs=run.max_num_seqs,
                  max_num_batched_tokens=run.max_num_batched_tokens)   # before any loading
    specs = parse_configs(ladder_configs(configs, get_vllm_version(run.vllm_version)),
                          run.vllm_version)
    if (workload is None) != (cost is None):
        raise InputError("give both a workload and a cost model, or neither", field="workload")
    if workload is None:
        workload, cost = load_cell(run)
    cfg = run.server(cost)
    if cfg.vllm_version != get_vllm_version(run.vllm_version).key:   # the cost model's version rules
        specs = parse_configs(ladder_configs(configs, get_vllm_version(cfg.vllm_version)),
                              cfg.vllm_version)
    n_req = num_requests or default_num_requests(workload, concurrency)
    load = OpenLoop(rate=request_rate) if request_rate else ClosedLoop(concurrency)
    ladder = run_ladder(Cell(workload, cost, cfg), specs, seeds=seeds, num_requests=n_req,
                        load=load, workers=run.workers, progress=progress)
    rows, flat = ladder.rows, ladder.runs
    best_config, best_k, dyn_line, why = verdict(
        rows, get_vllm_version(cfg.vllm_version).method("suffix").slots == "exact-k")
    if any(r.overloaded_windows for r in rows):    # no steady rate to rank configs on
        best_config, best_k, dyn_line, why = None, None, "", ""
    skipped = flat[0].skipped if flat else {}
    suggested = None
    if any(r.full_run_windows for r in rows):
        suggested = suggest_num_requests(n_req, concurrency, request_rate)
    used = run.but(tp=int(cost.tp), num_requests=n_req, vllm_version=cfg.vllm_version,
                   calibration=run.calibration or default_calibration(hardware, cfg.vllm_version)
                   or "analytic", history=workload.history)
    return Prediction(run=used, cost_label=str(cost.label),
                      load=(f"open loop, Poisson {request_rate:g} req/s" if request_rate else
                            f"closed loop, concurrency {concurrency}"),
                      proxy_note=workload.proxy_note, origin=workload.origin, rows=rows,
                      unavailable=ladder.unavailable, skipped=skipped, best_config=best_config,
                      best_k=best_k, dynamic_verdict=dyn_line, why=why, engine=cfg,
                      tp_chosen=bool(getattr(cost, "tp_chosen", tp is None)),
                      workload_provenance=dict(workload.provenance), request_rate=request_rate,
                      suggested_num_requests=suggested, prefix_note=_prefix_note(flat),
                      capped_note=capped_describe(run.capped_outputs, workload, max_tokens),
                      adaptive_verdict=adaptive_verdict(rows, cfg.vllm_version),
                      specs=tuple(specs))


def suggest_num_requests(n_req: int, concurrency: int, request_rate: float | None) -> int:
    """A request count that gives a steady window. Closed loop: the window runs from the C-th
    completion to the last submission, which comes at the (n - C)-th completion, so it needs
    n > 2C; 4 x C (the default) leaves half the run in the window. Open loop: twice as many."""
    if request_rate:
        return max(2 * n_req, 128)
    return max(4 * concurrency, n_req + 1)


def _prefix_note(flat: list[RunResult]) -> str:
    """The reason prefix caching was not modelled (first run that says so), else ''."""
    for r in flat:
        p = r.prefix
        if p is not None and not p["modelled"]:
            return str(p["reason"])
    return ""


__all__ = ["Prediction", "predict", "suggest_num_requests", "verdict"]
