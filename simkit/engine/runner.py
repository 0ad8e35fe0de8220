"""The one ladder runner: simulate (configuration, seed) jobs on one Cell on local processes.

A Cell is what every run of a ladder shares: the workload (requests and acceptance tables), the
step-cost model and the engine limits. `run_jobs` puts the cell in this process's table of cells
before forking its workers (they inherit it, so only the small Job is sent to them), collects
the results in job order (so the output is byte-identical whatever the number of workers) and
drops the cell afterwards. Nothing else reads or writes that table.
predict, sweep, every what-if, the reference reproduction and validate run through here; what
they run on is loaded by simkit.app.cells.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simkit.catalog.vllm_versions import DEFAULT_VERSION
from simkit.engine.config import EngineConfig, SpecConfig
from simkit.engine.cudagraph import CudagraphMode
from simkit.engine.sim import ClosedLoop, OpenLoop, RunResult, simulate
from simkit.engine.summary import Row, summarize_rows
from simkit.engine.trajectory import Trajectory, reprice
from simkit.engine.workload import DrafterUnavailable, Workload

Progress = Callable[[int], None]                # advance by n finished jobs
ProgressFactory = Callable[[int], Progress]     # total jobs -> advance callback


@dataclass(frozen=True, eq=False)
class Cell:
    """What the runs of a ladder share: workload, step-cost model and engine limits.
    `cached_prefixes`: prompt block-hash chains already in the prefix cache when each run starts
    (simulate's argument); None = what the workload's own request history left there (a repeat
    history's prompts, simkit.history; nothing for warm or cold)."""

    workload: Workload
    cost: Any                        # a simkit.costmodel.batch.StepCostModel
    engine: EngineConfig
    cached_prefixes: Sequence | None = None


@dataclass(frozen=True)
class Job:
    """One simulation of a cell: configuration, seed, load and request count. `shuffle` False
    keeps the workload's request order (a measured run replayed request by request);
    `window_start_completion` and `other_window_starts` as simulate's (None: the
    concurrency-th completion); `capture` as simulate's."""

    spec: SpecConfig
    seed: int
    load: ClosedLoop | OpenLoop
    num_requests: int | None
    shuffle: bool = True
    window_start_completion: int | None = None
    other_window_starts: tuple[int, ...] = ()
    capture: bool = False            # keep the run's trajectory (simulate's capture)


@dataclass
class Ladder:
    """Every configuration of a ladder over seeds: per-config Rows, the configurations the
    workload has no table for (name -> why), and every run in job order (config-major)."""

    rows: list[Row]
    unavailable: dict[str, str] = field(default_factory=dict)
    runs: list[RunResult] = field(default_factory=list)


# -- the cells of the running ladders (filled in the parent before forking) --------------------
_CELLS: dict[int, tuple[Cell, tuple]] = {}   # key -> (cell, (cached prefixes, repeated))
_KEYS = itertools.count()


def history_cached_prefixes(workload: Workload, engine: EngineConfig) -> list | None:
    """The prompts a repeat history (hot, repeat:P) left in the prefix cache before the run, in
    the order they were served (the workload's tables assume the same history); None otherwise."""
    h = workload.history
    if h is None or not h.is_repeat or not engine.prefix_caching or workload.block_hashes is None:
        return None
    from simkit.block_hash import unpack
    from simkit.engine.prefix_cache import history_prefixes

    return history_prefixes(unpack(*workload.block_hashes), h) or None


def history_repeated(workload: Workload, engine: EngineConfig) -> frozenset[int] | bool:
    """On a weighted sample under a repeat history whose prompts are cached (hot, repeat:P): the
    requests it repeated, whose every draw stands for a corpus request served before, so a draw
    again repeats the prompt (hits it whole if still cached); else False (draws past the first
    are new prompts behind the shared prefix, as for cycled requests)."""
    h = workload.history
    if workload.weights is None or h is None or not engine.prefix_caching:
        return False
    if not h.is_repeat or not h.prompts_cached:
        return False
    from simkit.history import repeat_indices

    n = workload.num_requests
    return frozenset(range(n) if h.share == 1.0 else (int(i) for i in repeat_indices(n, h.share)))


WEIGHTED_RUN = 1024   # default requests per run on a weighted (stratified) profile sample


def default_num_requests(workload: Workload, concurrency: int) -> int:
    """Requests per run when none is given: the profile's request count, at least 4 x
    concurrency (cycling); a weighted sample at least WEIGHTED_RUN, so that a run's draw holds
    the corpus's mix (its tail included) closely: measured on llama-3.1-8b/mix, the per-seed
    spread of suffix tok/s is ~9 % at 128 draws and ~1 % at 1,024 (docs/acceptance.md)."""
    n = max(workload.num_requests, 4 * concurrency)
    return n if workload.weights is None else max(n, WEIGHTED_RUN)


def _simulate(cell: Cell, history: tuple, job: Job) -> RunResult:
    prefixes, repeated = history
    return simulate(cell.workload, cell.cost, cell.engine, job.spec, load=job.load, seed=job.seed,
                    num_requests=job.num_requests, shuffle=job.shuffle,
                    window_start_completion=job.window_start_completion,
                    cached_prefixes=prefixes, repeat_prompts=repeated,
                    other_window_starts=job.other_window_starts, capture=job.capture)


def repriced(trajectory: Trajectory, cost: Any) -> RunResult:
    """The RunResult of a kept trajectory (RunResult.trajectory) under `cost`, a step-cost
    model: what simulating that run again under it would return (simkit.engine.trajectory),
    in a fraction of the time."""
    metrics, others = reprice(trajectory, cost)
    t = trajectory
    return RunResult(t.config, t.k, t.seed, metrics, t.num_requests, dict(t.skipped), None,
                     None if t.prefix is None else dict(t.prefix), others)


def _run_registered(key: int, job: Job) -> RunResult:
    """A worker's job: the cell it inherited from the parent, under `key`."""
    cell, history = _CELLS[key]
    return _simulate(cell, history, job)


def prepare(cell: Cell, specs: Sequence[SpecConfig]) -> None:
    """Build the acceptance-table columns every spec reads, in the parent (once, before the
    workers fork, so that each does not build its own)."""
    for spec in specs:
        if spec.speculative and spec.drafter in cell.workload.in_loop:
            continue                            # drafts in the loop, reads no table column
        for k in spec.k_values if spec.speculative else ():
            cell.workload.columns(spec.drafter, k)


# Below this many simulated requests in all, run_jobs with the default worker count runs the jobs
# here: measured on the 2-core VM (compiled loop, chat, C=32), a forked pool costs ~0.07 s of
# wall time to start and end and a request ~45 us of CPU, so under ~3,000 requests the pool
# costs more than the second core saves (6 x 128 requests: 0.07 s here, 0.2 s on 2 workers).
POOL_MIN_REQUESTS = 4096


def pool_pays(cell: Cell, jobs: Sequence[Job]) -> bool:
    """Whether `jobs` simulate enough requests (POOL_MIN_REQUESTS) for worker processes."""
    n = sum(j.num_requests if j.num_requests is not None else cell.workload.num_requests
            for j in jobs)
    return n >= POOL_MIN_REQUESTS


def run_jobs(cell: Cell, jobs: Sequence[Job], workers: int | None = None,
             progress: Progress | None = None) -> list[RunResult]:
    """Simulate every job on `cell`, on up to `workers` forked processes (default: all cores,
    or this one where the jobs are too few requests for a pool to pay: pool_pays); results in
    job order, the same whatever `workers` is. `progress(1)` after each job; the command's
    tracker (simkit.progress) counts them too, and draws them when no `progress` is given."""
    from simkit.progress import current

    tracker = current()
    if tracker is not None:
        tracker.started(len(jobs), draw=progress is None)
        given = progress

        def progress(n: int) -> None:
            tracker.finished(n)
            if given:
                given(n)
    prefixes = (cell.cached_prefixes if cell.cached_prefixes is not None
                else history_cached_prefixes(cell.workload, cell.engine))
    history = (prefixes, history_repeated(cell.workload, cell.engine))
    if workers is None and not pool_pays(cell, jobs):
        workers = 1
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if workers == 1:
        out = []
        for job in jobs:
            out.append(_simulate(cell, history, job))
            if progress:
                progress(1)
        return out
    fork = "fork" in mp.get_all_start_methods()
    if fork:
        _load_compiled(cell, history, jobs[0])
    from simkit.interrupt import result

    key = next(_KEYS)
    _CELLS[key] = (cell, history)
    try:
        with ProcessPoolExecutor(max_workers=workers,
                                 mp_context=mp.get_context("fork") if fork else None,
                                 initializer=ignore_sigint) as pool:
            futures = [pool.submit(_run_registered, key, job) if fork else
                       pool.submit(_simulate, cell, history, job) for job in jobs]
            out = []
            try:
                for fut in futures:
                    out.append(result(fut))
                    if progress:
                        progress(1)
            except KeyboardInterrupt:
                stop_pool(pool)
                raise
            return out
    finally:
        del _CELLS[key]


def _load_compiled(cell: Cell, history: tuple, job: Job) -> None:
    """Load the compiled engine loop (simkit.engine.fast) here, before forking, with a
    one-request run of the first job's configuration: each forked worker then inherits it
    instead of reading numba's cache again (about a second of CPU per worker and pool)."""
    from dataclasses import replace

    from simkit.engine import fast

    spec = job.spec
    if (not fast.enabled() or cell.engine.vllm_version not in fast.PROVEN_VERSIONS
            or spec.k_table or spec.adaptive):
        return                   # the compiled loop will not take these runs: nothing to load
    _simulate(cell, history, replace(job, load=ClosedLoop(1), num_requests=1, capture=False,
                                     other_window_starts=()))


def ignore_sigint() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle (it ends the workers), so a
    worker neither dies with a traceback of its own nor carries on with the queued jobs."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: end the workers now (a simulation writes nothing, so a half-run one leaves
    nothing behind), so that the command stops at once instead of after every queued job;
    the pool then fails the jobs left (BrokenProcessPool) and shuts down without waiting.
    Futures are not cancelled here: Python 3.11's pool thread then fails on them."""
    # the worker processes: Python < 3.14 has no public way to end them
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()


def run_ladder(cell: Cell, specs: Sequence[SpecConfig], *, seeds: int,
               num_requests: int | None, load: ClosedLoop | OpenLoop,
               workers: int | None = None, progress: ProgressFactory | None = None,
               phase: str | None = None) -> Ladder:
    """Every spec the workload has a table for, over `seeds` seeds: per-config Rows (means over
    seeds), the specs it cannot run (named with the reason) and the runs. `progress(total)`
    returns the per-job callback. `phase`: the ladder is a stated phase of the command
    (simkit.progress) so named, its total the runs it will do, known before any starts."""
    runnable, unavailable = runnable_specs(cell, specs)
    jobs = [Job(spec, seed, load, num_requests) for spec in runnable for seed in range(seeds)]
    with _ladder_phase(phase, len(runnable), seeds, num_requests):
        prepare(cell, runnable)
        flat = run_jobs(cell, jobs, workers, progress(len(jobs)) if progress else None)
    runs = [flat[i * seeds:(i + 1) * seeds] for i in range(len(runnable))]
    return Ladder(summarize_rows(runnable, runs), unavailable, flat)


def runnable_specs(cell: Cell, specs: Sequence[SpecConfig]
                   ) -> tuple[list[SpecConfig], dict[str, str]]:
    """(the specs the cell can run, in order; name -> why, for those it cannot): run_ladder's
    choice, for a caller that runs the jobs of several ladders of one cell together."""
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.drafters.base import NGRAM_DRAFTER

    version = get_vllm_version(cell.engine.vllm_version)
    runnable, unavailable = [], {}
    for spec in specs:
        refused = version_refusal(version, spec)
        if refused:
            unavailable[spec.name] = refused
        elif spec.drafter == NGRAM_DRAFTER and not version.ngram_modelled:
            unavailable[spec.name] = version.ngram_note
        elif cell.workload.has_drafter(spec.drafter):
            try:
                if spec.adaptive:              # its confidences need each draft's source
                    cell.workload.sources(spec.drafter, spec.k)
                if spec.adaptive and cell.engine.cudagraph_mode is CudagraphMode.NONE:
                    from simkit.engine.adaptive_run import NO_PROFILE

                    unavailable[spec.name] = NO_PROFILE
                else:
                    runnable.append(spec)
            except DrafterUnavailable as exc:
                unavailable[spec.name] = str(exc)
        elif version.method_of_drafter(spec.drafter) == "suffix":
            # never silently fall back to another version's suffix table: say what is missing
            from simkit.errors import InputError

            method = "suffix"
            raise InputError(
                f"{cell.workload.name or 'this workload'} has no {version.label} acceptance "
                f"table for '{method}' yet (its {spec.drafter} drafter; the profile holds "
                f"{', '.join(sorted(cell.workload.tables)) or 'none'}): build it from the raw "
                f"traces with `simkit profiles build` where they are present, or predict "
                f"'{method}' with --vllm-version 0.33", field="configs")
        else:
            try:
                cell.workload.table(spec.drafter)
            except DrafterUnavailable as exc:
                unavailable[spec.name] = str(exc)
    return runnable, unavailable


def _ladder_phase(name: str | None, configs: int, seeds: int, num_requests: int | None):
    """The phase a named ladder states: its configurations x seeds runs; no name, none."""
    import contextlib

    if name is None:
        return contextlib.nullcontext()
    from simkit.progress import phase

    size = f" of {num_requests} requests" if num_requests else ""
    return phase(f"{name}: {configs} configuration(s) x {seeds} seed(s){size}", configs * seeds)


def version_refusal(version: Any, spec: SpecConfig) -> str:
    """Why `spec` cannot run under `version`'s rules ('' when it can): a method the version's
    parts refuse, or a drafter that is another version's (arctic's tree on 0.34, the GPU
    speculator on 0.33): never replay one version's drafter under another's engine."""
    from simkit.catalog.vllm_versions import VERSIONS

    if not spec.speculative:
        return ""
    parts = version.parts_for(spec.drafter)
    if parts is not None:
        return parts.refused
    for other in VERSIONS.values():
        method = other.method_of_drafter(spec.drafter)
        if method is not None and method in version.methods:
            return (f"the {spec.drafter} drafter is what {other.label} runs for '{method}'; "
                    f"{version.label} runs '{method}' with its "
                    f"{version.methods[method].drafter} drafter (--configs {method})")
    return ""


def engine_config(cost: Any, *, max_tokens: int = 8192, max_model_len: int = 16384,
                  max_num_seqs: int = 1024, max_num_batched_tokens: int = 8192,
                  cudagraph_mode: str | CudagraphMode = CudagraphMode.FULL_AND_PIECEWISE,
                  prefix_caching: bool = True) -> EngineConfig:
    """Server limits (vLLM defaults) with the KV capacity of the cost model
    (gpu_memory_utilization inside it) and its vLLM version (the calibration's)."""
    mode = cudagraph_mode if isinstance(cudagraph_mode, CudagraphMode) else \
        CudagraphMode.parse(cudagraph_mode)
    return EngineConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        max_model_len=max_model_len, max_tokens=max_tokens,
                        kv_capacity_tokens=int(cost.kv_capacity_tokens), cudagraph_mode=mode,
                        prefix_caching=prefix_caching,
                        vllm_version=getattr(cost, "vllm_version", None) or DEFAULT_VERSION)


__all__ = ["Cell", "Job", "Ladder", "POOL_MIN_REQUESTS", "WEIGHTED_RUN", "default_num_requests",
           "engine_config", "pool_pays", "version_refusal",
           "history_cached_prefixes", "history_repeated", "ignore_sigint", "prepare", "run_jobs",
           "repriced", "run_ladder", "runnable_specs", "stop_pool"]
