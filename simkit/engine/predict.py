"""`predict`: the configuration ladder for one model and corpus, over seeds, on local processes.

Every (config, seed) pair is one simulation. Workload and cost model are loaded once in the
parent and inherited by forked workers. Results are assembled in submission order, so the output
is byte-identical whatever the number of workers.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from simkit.engine.config import EngineConfig, SpecConfig, parse_configs
from simkit.engine.cudagraph import CudagraphMode
from simkit.engine.sim import ClosedLoop, OpenLoop, simulate
from simkit.engine.capped import describe as capped_describe
from simkit.engine.workload import DrafterUnavailable, Workload

DEFAULT_CONFIGS = "vanilla,suffix,kpad:4,6,8,12,dynamic"
RESULT_KEYS = ("config", "k", "output_tok_s", "output_tok_s_std", "speedup_vs_vanilla",
               "full_graph_frac", "mean_accepted", "host_frac", "tpot_ms_p50", "ttft_ms_p50",
               "steady_window")
# the other columns of the printed table (and two a planner asks about), read from Row.details,
# so that JSON and CSV carry every figure the table shows (docs/report.md names each one)
PREFIX_KEY = "prefix_hit_rate"   # only with prefix caching on, so that off = the old output
DETAIL_KEYS = ("ks", "piecewise_steps_frac", "none_steps_frac", "tokens_per_step", "mean_k",
               "itl_ms_p99", "padded_token_waste", "preemptions", "tpot_ms_p99", "ttft_ms_p99")


@dataclass
class Row:
    """One configuration's prediction: means over seeds (std for throughput) plus details."""

    config: str
    k: int
    output_tok_s: float
    output_tok_s_std: float
    speedup_vs_vanilla: float | None
    full_graph_frac: float
    mean_accepted: float
    host_frac: float
    tpot_ms_p50: float
    ttft_ms_p50: float
    details: dict[str, Any] = field(default_factory=dict)
    # False when some seed's run was too short for a steady window: its figures are whole-run
    # averages (ramp-up and drain included), not the steady state the header names
    steady_window: bool = True

    def result_dict(self) -> dict[str, Any]:
        """The row as the documented keys: RESULT_KEYS, then DETAIL_KEYS (None when absent)."""
        d = asdict(self)
        out = {k: _clean(d[k]) for k in RESULT_KEYS}
        out.update({k: _clean(self.details.get(k)) for k in DETAIL_KEYS})
        if PREFIX_KEY in self.details:           # prefix caching on (None: not modelled)
            out[PREFIX_KEY] = _clean(self.details[PREFIX_KEY])
        return out


@dataclass
class Prediction:
    """A full ladder for one (model, corpus, hardware, TP), with the best-K verdict."""

    model: str
    corpus: str
    hardware: str
    tp: int
    cost_label: str
    load: str
    proxy_note: str
    origin: str
    concurrency: int
    num_requests: int
    seeds: int
    rows: list[Row]
    unavailable: dict[str, str]
    skipped: dict[str, int]
    best_config: str | None
    best_k: int | None
    dynamic_verdict: str
    why: str
    # what the report states as assumptions (simkit.report.assumptions reads these)
    engine: EngineConfig | None = None
    cost_profile: str = ""              # the resolved profile: an embedded name, a path or "analytic"
    tp_chosen: bool = False             # TP picked as the smallest that fits (not given)
    workload_provenance: dict[str, Any] = field(default_factory=dict)
    request_rate: float | None = None
    history: str = ""                   # simkit.history label the workload's tables assume
    # request count that gives every run a steady window, when this one did not (else None)
    suggested_num_requests: int | None = None
    capped_outputs: str = "keep"        # simkit.engine.capped: keep | extend
    capped_note: str = ""               # its one-sentence description (assumptions block)

    @property
    def steady_window(self) -> bool:
        """True when every row's figures come from a steady window."""
        return all(r.steady_window for r in self.rows)
    prefix_caching: bool = False        # on: rows carry prefix_hit_rate (None = not modelled)
    prefix_note: str = ""               # why caching was not modelled, when it was not

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON document of `simkit predict --format json`: identity, assumptions, column
        meanings, rows, verdict and recommendation (simkit.report.render.document; docs/report.md)."""
        from simkit.report.render import document

        return document(self)


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, float):
        return round(v, 6)
    return v


# -- per-process context (filled in the parent before forking) --------------------------------
_CONTEXT: dict[tuple, tuple[Workload, Any]] = {}


def load_context(model: str, corpus: str, hardware: str, tp: int | None, profile: str | None,
                 source: str = "auto", max_model_len: int = 16384,
                 max_num_batched_tokens: int = 8192,
                 history: str | None = None, capped_outputs: str = "keep",
                 max_tokens: int = 8192) -> tuple[tuple, Workload, Any]:
    """Load (once per process) the workload profile and the cost model for a cell.
    `history` (simkit.history label) None = the shipped profile's own (warm when none);
    `capped_outputs` keep | extend (simkit.engine.capped; extend continues capped requests to
    `max_tokens`)."""
    from simkit.engine.capped import apply_capped_outputs, check_mode

    key = (model, corpus, hardware, tp, profile, source, max_model_len, max_num_batched_tokens)
    if history is not None:
        from simkit.history import parse_history

        key = key + (parse_history(history).label,)
    if check_mode(capped_outputs) != "keep":
        key = key + (capped_outputs, max_tokens)
    if key not in _CONTEXT:
        from simkit.costmodel import load_cost_model
        from simkit.profiles import load_profile

        prof = load_profile(model, corpus, source=source, tree=history)
        workload = Workload.from_profile(prof)
        if not workload.name:
            workload.name = f"{model}/{corpus}"
        workload = apply_capped_outputs(workload, capped_outputs, max_tokens)
        cost = load_cost_model(model, hardware, tp=tp, profile=profile,
                               max_model_len=max_model_len,
                               max_num_batched_tokens=max_num_batched_tokens)
        _CONTEXT[key] = (workload, cost)
    workload, cost = _CONTEXT[key]
    return key, workload, cost


def _run(key: tuple, cfg: EngineConfig, spec: SpecConfig, seed: int, load: ClosedLoop | OpenLoop,
         num_requests: int | None) -> dict[str, Any]:
    workload, cost = _CONTEXT[key]
    res = simulate(workload, cost, cfg, spec, load=load, seed=seed, num_requests=num_requests,
                   cached_prefixes=history_cached_prefixes(workload, cfg),
                   repeat_prompts=history_repeated(workload, cfg))
    out = res.metrics.to_dict()
    out["_skipped"] = res.skipped
    if res.prefix is not None:
        out["_prefix"] = res.prefix
    out["_num_requests"] = res.num_requests
    return out


def history_cached_prefixes(workload: Workload, cfg: EngineConfig) -> list | None:
    """The prompts a repeat history (hot, repeat:P) left in the prefix cache before the run, in
    the order they were served (the workload's tables assume the same history); None otherwise."""
    label = str(workload.provenance.get("tree") or "")
    if not label or not cfg.prefix_caching or workload.block_hashes is None:
        return None
    from simkit.history import parse_history

    if not parse_history(label).is_repeat:
        return None
    from simkit.engine.block_hash import unpack
    from simkit.engine.prefix_cache import history_prefixes

    return history_prefixes(unpack(*workload.block_hashes), label) or None


def history_repeated(workload: Workload, cfg: EngineConfig) -> frozenset[int] | bool:
    """On a weighted sample under a repeat history whose prompts are cached (hot, repeat:P): the
    requests it repeated, whose every draw stands for a corpus request served before, so a draw
    again repeats the prompt (hits it whole if still cached); else False (draws past the first
    are new prompts behind the shared prefix, as for cycled requests)."""
    label = str(workload.provenance.get("tree") or "")
    if workload.weights is None or not label or not cfg.prefix_caching:
        return False
    from simkit.history import parse_history, repeat_indices

    h = parse_history(label)
    if not h.is_repeat or not h.prompts_cached:
        return False
    n = workload.num_requests
    return frozenset(range(n) if h.share == 1.0 else (int(i) for i in repeat_indices(n, h.share)))


def run_jobs(jobs: list[tuple], workers: int | None,
             progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Run (key, cfg, spec, seed, load, num_requests) jobs, results in job order."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if workers == 1:
        out = []
        for job in jobs:
            out.append(_run(*job))
            if progress:
                progress(1)
        return out
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_run, *job) for job in jobs]
        out = []
        for fut in futures:
            out.append(fut.result())
            if progress:
                progress(1)
        return out


def engine_config(cost, *, max_tokens: int = 8192, max_model_len: int = 16384,
                  max_num_seqs: int = 1024, max_num_batched_tokens: int = 8192,
                  cudagraph_mode: str | CudagraphMode = CudagraphMode.FULL_AND_PIECEWISE,
                  prefix_caching: bool = True) -> EngineConfig:
    """Server limits with the KV capacity of the cost model (gpu_memory_utilization inside it)."""
    mode = cudagraph_mode if isinstance(cudagraph_mode, CudagraphMode) else \
        CudagraphMode.parse(cudagraph_mode)
    return EngineConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        max_model_len=max_model_len, max_tokens=max_tokens,
                        kv_capacity_tokens=int(cost.kv_capacity_tokens), cudagraph_mode=mode,
                        prefix_caching=prefix_caching)


def summarize_rows(specs: list[SpecConfig], runs: list[list[dict[str, Any]]]) -> list[Row]:
    """Mean (and std of throughput) over seeds per config; speedup against vanilla's mean."""
    rows = []
    for spec, rs in zip(specs, runs):
        tput = np.array([r["output_tok_s"] for r in rs])

        def mean(key: str) -> float:
            vals = np.array([r[key] for r in rs], dtype=float)
            vals = vals[np.isfinite(vals)]
            return float(vals.mean()) if vals.size else float("nan")

        details = {key: mean(key) for key in (
            "tokens_per_step", "piecewise_steps_frac", "none_steps_frac", "full_time_frac",
            "piecewise_time_frac", "none_time_frac", "padded_token_waste", "itl_ms_p50",
            "itl_ms_p90", "itl_ms_p99", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p90",
            "tpot_ms_p99", "request_throughput", "mean_step_ms", "mean_batch_reqs", "mean_k",
            "kv_usage_mean", "kv_usage_peak", "preemptions", "steps")}
        details["full_run_windows"] = float(sum(r["window_kind"] != "steady" for r in rs))
        steady = details["full_run_windows"] == 0
        if spec.ks:
            details["ks"] = ",".join(map(str, spec.ks))
        prefix = [r["_prefix"] for r in rs if "_prefix" in r]
        if prefix:
            modelled = all(p["modelled"] for p in prefix)
            details[PREFIX_KEY] = (float(np.mean([p["hit_rate"] for p in prefix]))
                                   if modelled else None)
        rows.append(Row(spec.name, spec.k if spec.drafter != "none" else 0,
                        float(tput.mean()), float(tput.std(ddof=1)) if tput.size > 1 else 0.0,
                        None, mean("full_steps_frac"), mean("mean_accepted"), mean("host_frac"),
                        mean("tpot_ms_p50"), mean("ttft_ms_p50"), details, steady))
    base = next((r for r in rows if r.config == "vanilla"), None)
    for r in rows:
        r.speedup_vs_vanilla = (r.output_tok_s / base.output_tok_s
                                if base and base.output_tok_s > 0 else None)
    return rows


def verdict(rows: list[Row]) -> tuple[str | None, int | None, str, str]:
    """(best_config, best_k, dynamic-vs-best-K line, why line of the best config)."""
    if not rows:
        return None, None, "", ""
    best = max(rows, key=lambda r: r.output_tok_s)
    kpads = [r for r in rows if r.config.startswith("kpad-")]
    best_kpad = max(kpads, key=lambda r: r.output_tok_s) if kpads else None
    best_k = best_kpad.k if best_kpad else None
    dyn = [r for r in rows if r.config.startswith("dynamic")]
    line = ""
    if dyn and best_kpad:
        top = max(dyn, key=lambda r: r.output_tok_s)
        gain = top.output_tok_s / best_kpad.output_tok_s - 1
        spread = max(top.output_tok_s_std, best_kpad.output_tok_s_std)
        if abs(top.output_tok_s - best_kpad.output_tok_s) <= spread:
            beats = "ties (within the seed spread)"
        else:
            beats = "beats" if gain > 0 else "does not beat"
        line = (f"{top.config} ({top.output_tok_s:,.0f} tok/s) {beats} best K={best_k} "
                f"({best_kpad.output_tok_s:,.0f} tok/s): {gain:+.1%}")
    why = (f"{best.config}: {best.full_graph_frac:.0%} FULL steps, "
           f"{best.details.get('tokens_per_step', 0):.2f} tokens/step, host {best.host_frac:.0%}")
    return best.config, best_k, line, why


def predict(model: str, corpus: str, *, hardware: str = "h200", tp: int | None = None,
            concurrency: int = 32, max_tokens: int = 8192, configs: str = DEFAULT_CONFIGS,
            seeds: int = 3, num_requests: int | None = None, max_model_len: int = 16384,
            max_num_seqs: int = 1024, max_num_batched_tokens: int = 8192,
            cudagraph_mode: str = "FULL_AND_PIECEWISE", cost_profile: str | None = None,
            source: str = "auto", workers: int | None = None, request_rate: float | None = None,
            progress: Callable[[int, int], Callable[[int], None]] | None = None,
            history: str | None = None, prefix_caching: bool = True,
            capped_outputs: str = "keep") -> Prediction:
    """Simulate every configuration over `seeds` seeds and pick the best K.

    `capped_outputs` (keep | extend) is how requests whose trace output stopped at a generation
    cap are replayed (simkit.engine.capped; keep = as the traces end).

    `num_requests` defaults to default_num_requests (the profile's request count, at least
    4 x concurrency so that the steady window exists; 1,024 for a weighted profile sample).
    `request_rate` (req/s) switches from the closed loop to seeded Poisson arrivals (capacity
    planning). `progress(total)` returns a per-job callback.
    `prefix_caching` (vLLM's default, on) needs the profile's prompt block hashes; without them
    the rows say the hit rate is n/a. Off reproduces the output from before it was modelled.
    """
    from simkit.costmodel.profiles import default_profile
    from simkit.errors import InputError

    if seeds < 1:
        raise InputError("must be >= 1", field="seeds")
    if concurrency < 1:
        raise InputError("must be >= 1", field="concurrency")
    from simkit.checks import positive_int, positive_rate

    positive_int(num_requests, "num-requests")
    positive_rate(request_rate, "request-rate")
    specs = parse_configs(configs)
    key, workload, cost = load_context(model, corpus, hardware, tp, cost_profile, source,
                                       max_model_len, max_num_batched_tokens, history,
                                       capped_outputs, max_tokens)
    cfg = engine_config(cost, max_tokens=max_tokens, max_model_len=max_model_len,
                        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        cudagraph_mode=cudagraph_mode, prefix_caching=prefix_caching)
    unavailable: dict[str, str] = {}
    runnable = []
    for spec in specs:
        if workload.has_drafter(spec.drafter):
            runnable.append(spec)
        else:
            try:
                workload.table(spec.drafter)
            except DrafterUnavailable as exc:
                unavailable[spec.name] = str(exc)
    n_req = num_requests or default_num_requests(workload, concurrency)
    for spec in runnable:                      # build the column lists before forking
        for k in spec.k_values if spec.drafter != "none" else ():
            workload.columns(spec.drafter, k)
    load = OpenLoop(rate=request_rate) if request_rate else ClosedLoop(concurrency)
    jobs = [(key, cfg, spec, seed, load, n_req) for spec in runnable for seed in range(seeds)]
    tick = progress(len(jobs)) if progress else None
    flat = run_jobs(jobs, workers, tick)
    runs = [flat[i * seeds:(i + 1) * seeds] for i in range(len(runnable))]
    rows = summarize_rows(runnable, runs)
    best_config, best_k, dyn_line, why = verdict(rows)
    skipped = flat[0]["_skipped"] if flat else {}
    suggested = None
    if not all(r.steady_window for r in rows):
        suggested = suggest_num_requests(n_req, concurrency, request_rate)
    return Prediction(model=model, corpus=corpus, hardware=hardware, tp=int(cost.tp),
                      cost_label=str(cost.label),
                      load=(f"open loop, Poisson {request_rate:g} req/s" if request_rate else
                            f"closed loop, concurrency {concurrency}"), proxy_note=workload.proxy_note,
                      origin=workload.origin, concurrency=concurrency, num_requests=n_req,
                      seeds=seeds, rows=rows, unavailable=unavailable, skipped=skipped,
                      best_config=best_config, best_k=best_k, dynamic_verdict=dyn_line, why=why,
                      engine=cfg, cost_profile=cost_profile or default_profile(hardware) or "analytic",
                      tp_chosen=bool(getattr(cost, "tp_chosen", tp is None)),
                      workload_provenance=dict(workload.provenance), request_rate=request_rate,
                      history=str(workload.provenance.get("history")
                                  or workload.provenance.get("tree") or ""),
                      suggested_num_requests=suggested,
                      prefix_caching=prefix_caching, prefix_note=_prefix_note(flat),
                      capped_outputs=capped_outputs,
                      capped_note=capped_describe(capped_outputs, workload, max_tokens))


WEIGHTED_RUN = 1024   # default requests per run on a weighted (stratified) profile sample


def default_num_requests(workload: Workload, concurrency: int) -> int:
    """Requests per run when none is given: the profile's request count, at least 4 x
    concurrency (cycling); a weighted sample at least WEIGHTED_RUN, so that a run's draw holds
    the corpus's mix (its tail included) closely: measured on llama-3.1-8b/mix, the per-seed
    spread of suffix tok/s is ~9 % at 128 draws and ~1 % at 1,024 (docs/acceptance.md)."""
    n = max(workload.num_requests, 4 * concurrency)
    return n if workload.weights is None else max(n, WEIGHTED_RUN)


def suggest_num_requests(n_req: int, concurrency: int, request_rate: float | None) -> int:
    """A request count that gives a steady window. Closed loop: the window runs from the C-th
    completion to the last submission, which comes at the (n - C)-th completion, so it needs
    n > 2C; 4 x C (the default) leaves half the run in the window. Open loop: twice as many."""
    if request_rate:
        return max(2 * n_req, 128)
    return max(4 * concurrency, n_req + 1)


def _prefix_note(flat: list[dict[str, Any]]) -> str:
    """The reason prefix caching was not modelled (first run that says so), else ''."""
    for r in flat:
        p = r.get("_prefix")
        if p is not None and not p["modelled"]:
            return str(p["reason"])
    return ""


def with_workload(model: str, corpus: str, hardware: str, tp: int | None, profile: str | None,
                  workload: Workload, cost, source: str = "auto", max_model_len: int = 16384,
                  max_num_batched_tokens: int = 8192) -> None:
    """Pre-seed the context cache (tests and callers with their own workload/cost objects)."""
    _CONTEXT[(model, corpus, hardware, tp, profile, source, max_model_len,
              max_num_batched_tokens)] = (workload, cost)


__all__ = ["DEFAULT_CONFIGS", "DETAIL_KEYS", "RESULT_KEYS", "Prediction", "Row", "predict", "run_jobs", "engine_config",
           "load_context", "summarize_rows", "verdict", "with_workload"]
