"""simkit's prediction of one measured run under that run's conditions: its requests in its
order (cold suffix tree), its cap, concurrency, K, TP and cudagraph mode, the records' steady
window (first completion -> last admission), and the known perturbations of the harness."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from simkit.app.cells import run_workload
from simkit.costmodel.run_conditions import run_cost
from simkit.choices import Ordering
from simkit.history import History

ORDERINGS = (Ordering.CONCURRENT, Ordering.SEQUENTIAL)   # validate's default first
DYNAMIC_KS = (4, 6, 12)      # KS of the measured dynamic-K runs (calibrate.runner --ks default)


def spec_of(run: dict[str, Any]):
    """The SpecConfig of a run's (config, k). Measured dynamic-K runs (config dynamic-<policy>)
    ran vLLM 0.26's single FULL capture list at Kmax: graphs="kmax"."""
    from simkit.engine.config import dynamic, parse_configs, recorded_config

    cfg, k = str(run["config"]), int(run["k"] or 0)
    if cfg.startswith("dynamic-"):
        return dataclasses.replace(dynamic(cfg.split("-", 1)[1], DYNAMIC_KS), graphs="kmax")
    from simkit.costmodel.step_records import version_of

    # the run's own vLLM decides what 'suffix' means (0.34: the GPU drafter, exactly K slots)
    return parse_configs(recorded_config(cfg, k), version_of(run.get("vllm_version")) or None)[0]


def recorded_step_error(run: dict[str, Any], steps, calibration: str | None = None) -> dict[str, float]:
    """The cost model alone, on the batches the run actually executed inside its window:
    sum of predicted step (+front-end) time over sum of measured t_step_s + t_gap_s, minus 1,
    and the same for the device part (t_forward_s + t_sample_s). Separates cost-model error from
    the simulated trajectory (batch sizes, acceptance, window)."""
    from simkit.costmodel.step_records import batches

    cost = run_cost(run, calibration=calibration)
    s = steps[window_mask(run, steps)]
    pred = dev = 0.0
    for batch in batches(s):
        c = cost.step_cost(batch)
        pred += c.step_s
        dev += c.device_s
    meas = float((s["t_step_s"] + s["t_gap_s"]).sum())
    meas_dev = float((s["t_forward_s"] + s["t_sample_s"]).sum())
    return {"step": pred / meas - 1 if meas else float("nan"),
            "device": dev / meas_dev - 1 if meas_dev else float("nan")}


def window_mask(run: dict[str, Any], steps):
    import json

    w = json.loads(str(run["window"]))
    if not bool(run["steady_state"]):
        return np.ones(len(steps), bool)
    return ((steps["t_end_s"] > w["t0"]) & (steps["t_end_s"] <= w["t1"])).to_numpy()


@dataclass(frozen=True)
class KeptRun:
    """A predicted run's trajectory (simkit.engine.trajectory) with everything it was simulated
    under except the step-cost model: a later prediction of that run under the same
    `conditions` and another calibration prices it again instead of simulating it."""

    conditions: tuple
    trajectory: Any


@dataclass
class RunPrediction:
    """Predicted figures of one run under one set of conditions."""

    output_tok_s: float
    accepted_per_step: float
    window_s: float
    mean_step_ms: float
    window_kind: str
    prefix: dict | None = None        # RunResult.prefix (hit rate, predicted prefill tokens)
    # completion count -> output tok/s over the window opening there (predict_run's
    # other_window_starts: the same simulation, counted from a later completion)
    other_window_tok_s: dict[int, float] = dataclasses.field(default_factory=dict)
    kept: KeptRun | None = None       # predict_run(keep=True): its trajectory, to reprice


def predict_run(reqs: list, run: dict[str, Any], *, ordering: Ordering = Ordering.CONCURRENT,
                sync: bool | None = None, serial_frontend: bool = True, seed: int = 0,
                calibration: str | None = None, window_start_completion: int = 1,
                history: History | None = None, prefix_caching: bool = True,
                cached_prefixes: list | None = None, in_loop: bool = False,
                other_window_starts: tuple[int, ...] = (),
                host_factor: float = 1.0, keep: bool = False,
                reuse: KeptRun | None = None) -> RunPrediction:
    """Simulate the run. sync=None: synchronous exactly when the run's forcing hook synchronised
    the stream (records.SYNCED_FORCE_COPIES; the only way these records lost the async overlap).
    `cached_prefixes`: prompt block-hash chains already cached when the run starts (its request
    history; simkit.validation.prefix.history_prefixes). `in_loop`: the suffix drafter drafts on
    the simulated steps (simkit.drafters.suffix.in_loop) instead of reading a table built in
    `ordering` (cold runs only). `other_window_starts`: the same simulation's tok/s also over
    the windows opening at these completions (RunPrediction.other_window_tok_s). `host_factor`:
    the run's host taken as that many times as fast as the calibration's (its host-speed index,
    simkit.validation.host_speed; a diagnostic, a user's prediction cannot know it).
    `keep`: also return the run's trajectory (RunPrediction.kept); `reuse`: such a kept run,
    priced under this call's cost model instead of simulating when it was kept under this
    call's conditions (the same figures, simkit.engine.trajectory; else it is ignored)."""
    from simkit.engine.runner import Cell, Job, engine_config, repriced, run_jobs
    from simkit.engine.sim import ClosedLoop

    cost = run_cost(run, sync=sync, serial_frontend=serial_frontend, calibration=calibration)
    if host_factor != 1.0:
        from simkit.costmodel.host_factor import at_host_speed

        cost = at_host_speed(cost, host_factor)
    base = cost.base
    cap = int(run["max_tokens_cap"] or 0)
    cfg = engine_config(base, max_tokens=cap if cap > 0 else 1 << 30,
                        max_model_len=int(run["max_model_len"]),
                        max_num_seqs=int(run["max_num_seqs"]),
                        max_num_batched_tokens=int(run["max_num_batched_tokens"]),
                        cudagraph_mode=str(run["cudagraph_mode"]))
    if not prefix_caching:
        cfg = dataclasses.replace(cfg, prefix_caching=False)
    job = Job(spec_of(run), seed, ClosedLoop(int(run["concurrency"])), len(reqs), shuffle=False,
              window_start_completion=window_start_completion,
              other_window_starts=tuple(other_window_starts))
    # what the trajectory depends on: the run's requests (its id) and their order, the tables'
    # ordering and history, the engine limits and the job (cached_prefixes: never kept)
    conditions = (str(run["run_id"]), ordering, history, in_loop, cfg, job)
    if reuse is not None and cached_prefixes is None and reuse.conditions == conditions:
        res = repriced(reuse.trajectory, cost)
    else:
        # the workload carries the run's history (or `history`): the engine preloads the prefix
        # cache with what it left there (the repeated prompts, as served) unless cached_prefixes
        workload = run_workload(reqs, run, ordering, history, in_loop=in_loop)
        job = dataclasses.replace(job, capture=keep and cached_prefixes is None)
        res, = run_jobs(Cell(workload, cost, cfg, cached_prefixes), [job], workers=1)
    m = res.metrics
    kept = None if res.trajectory is None else KeptRun(conditions, res.trajectory)
    return RunPrediction(m.output_tok_s, m.mean_accepted, m.window_end_s - m.window_start_s,
                         m.mean_step_ms, m.window_kind, res.prefix,
                         {n: w.output_tok_s for n, w in res.other_windows.items()}, kept)


def measured_figures(run: dict[str, Any], steps) -> dict[str, float]:
    """From the step records, over the run's own steady window: accepted draft tokens per
    decode request-step (the engine's mean_accepted definition) and the mean step time."""
    import json

    w = json.loads(str(run["window"]))
    s = steps[window_mask(run, steps)]
    dec = int(s["num_decode_reqs"].sum())
    return {"accepted_per_step": float(s["num_accepted"].sum()) / dec if dec else 0.0,
            "mean_step_ms": float((s["t_step_s"] + s["t_gap_s"]).mean() * 1e3) if len(s) else
            float("nan"),
            "window_s": float(w["t1"] - w["t0"]),
            "accepted_total": int(steps["num_accepted"].sum())}
