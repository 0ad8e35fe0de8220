"""`simkit calibrate ...`: real vLLM calibration runs (GPU host) and their records."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from simkit.choices import Ordering, OutputFormat
from simkit.commands.options import VLLM_VERSION_HELP, Format, Wide

calibrate_app = typer.Typer(help="Calibrate on your GPU and vLLM: plan the runs, make them, fit "
                                 "the cost model.", no_args_is_help=True)




def _ints(text: str, name: str) -> list[int]:
    from simkit.errors import InputError

    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"expected a comma list of integers, got {text!r}", field=name) from None
    if not vals or min(vals) < 1:
        raise InputError("values must be integers >= 1", field=name)
    return vals


# the output cap of a calibration run (calibrate run --max-tokens-cap's default): the mean output
# a plan estimates with, and the one calibrate requests names beside the file's own
RUN_OUTPUT_CAP = 1024

# calibrate run's --help groups (rich panels)
RUNS = "Options"                 # the default panel: --help joins it
REQUESTS = "Requests"
ENGINE = "vLLM engine and output"


@calibrate_app.command("run")
def run(
    model: str = typer.Option(..., help="catalogue model, e.g. llama-3.1-8b", rich_help_panel=RUNS),
    corpus: str = typer.Option(..., help="corpus of the request file(s)", rich_help_panel=RUNS),
    config: str = typer.Option(..., help="vanilla | suffix | kpad", rich_help_panel=RUNS),
    out: Path = typer.Option(..., help="folder for steps_*.parquet and runs.jsonl",
                             rich_help_panel=ENGINE),
    k: int = typer.Option(0, help="draft length K (kpad: required; suffix: 0 = vLLM default)",
                          rich_help_panel=RUNS),
    concurrency: str = typer.Option("32", help="requests in flight; a comma list makes one run "
                                    "each", rich_help_panel=RUNS),
    num_requests: str = typer.Option("64", help="requests per run (one value, or one per "
                                     "concurrency)", rich_help_panel=RUNS),
    purpose: str = typer.Option("calibration", help="calibration or validation (validation runs "
                                "are held out of the fit)", rich_help_panel=RUNS),
    model_dir: Optional[Path] = typer.Option(None, help="model folder (config.json written if "
                                             "absent; default: OUT/model-<model>)",
                                             rich_help_panel=ENGINE),
    requests: Optional[Path] = typer.Option(None, help="token-id JSONL request file (default: "
                                            "none; give this or --requests-dir)",
                                            rich_help_panel=REQUESTS),
    requests_dir: Optional[Path] = typer.Option(None, help="folder of <model>__<corpus>.jsonl "
                                                "files (default: none; give this or --requests)",
                                                rich_help_panel=REQUESTS),
    max_tokens_cap: int = typer.Option(RUN_OUTPUT_CAP, help="truncate trace outputs to this many tokens",
                                       rich_help_panel=REQUESTS),
    tp: int = typer.Option(1, help="tensor parallel size (> 1: launch under torchrun, one "
                           "process a GPU)", rich_help_panel=ENGINE),
    no_force: bool = typer.Option(False, "--no-force", help="do not force the trace's tokens",
                                  rich_help_panel=REQUESTS),
    tag: str = typer.Option("", help="run-id suffix, e.g. r2 for a re-measurement "
                                   "(default: none)", rich_help_panel=RUNS),
    runs_spec: Optional[str] = typer.Option(None, "--runs", help="runs, a comma list of "
                                            "corpus:concurrency:requests, each optionally "
                                            "followed by :purpose and :history, as `simkit "
                                            "calibrate plan` writes them (replaces "
                                            "--concurrency, --num-requests and --purpose; "
                                            "default: none)",
                                            rich_help_panel=RUNS),
    load_format: str = typer.Option("dummy", "--load-format", help="vLLM load_format: dummy "
                                    "(random weights; timing does not depend on them) or auto "
                                    "(real weights in --model-dir)", rich_help_panel=ENGINE),
    corpus_tokens: Optional[int] = typer.Option(None, "--corpus-tokens", help="vLLM 0.34+: "
                                                "suffix_decoding_corpus_tokens, the GPU corpus "
                                                "size in tokens (0: no cross-request drafts; "
                                                "default: vLLM's, 2^20)", rich_help_panel=RUNS),
    k_table: Optional[str] = typer.Option(None, "--k-table", help="vLLM 0.34+: a K per range of batch sizes "
                                          "(vLLM's per-batch-size K table), START-END:K,... "
                                          "e.g. 1-8:16,9-64:8 (--config dynamic or suffix; "
                                          "default: none)",
                                          rich_help_panel=RUNS),
    adaptive_verification: bool = typer.Option(False, "--adaptive",
                                               help="vLLM 0.34+: enable_adaptive_verification",
                                               rich_help_panel=RUNS),
) -> None:
    """Start your installed vLLM (0.26, 0.33 or 0.34, detected and recorded) in-process
    reproducing the trace's outputs (0.34: vLLM's trace replay; older: forced logits), and
    record every engine step."""
    from calibrate.harness import get_adapter
    from calibrate.harness.flags import RunnerFlags, parse_k_table
    from calibrate.runner import CONFIGS, RunSpec, check_config, requests_for, run_engine
    from simkit.errors import InputError

    if runs_spec:
        runs = [RunSpec.parse(s) for s in runs_spec.split(",") if s.strip()]
    else:
        concs = _ints(concurrency, "concurrency")
        nums = _ints(num_requests, "num-requests")
        if len(nums) == 1:
            nums = nums * len(concs)
        if len(nums) != len(concs):
            raise InputError("give one --num-requests, or one per --concurrency",
                             field="num-requests")
        runs = [RunSpec(corpus, c, n, purpose) for c, n in zip(concs, nums)]
    if load_format not in ("dummy", "auto"):
        raise InputError("must be dummy or auto", field="load-format")
    if load_format == "auto" and model_dir is None:
        raise InputError("real weights need --model-dir (the folder with the weights)",
                         field="load-format")
    if config not in CONFIGS:
        raise InputError(f"unknown config {config!r}; known: {', '.join(CONFIGS)}",
                         field="config")
    flags = RunnerFlags(corpus_tokens, parse_k_table(k_table) if k_table else None,
                        adaptive_verification)
    files = requests_for(model, sorted({r.corpus for r in runs}), requests_dir, requests)
    choice = _require_vllm()          # the installed release, from its metadata: no vLLM import
    check_config(config, k, get_adapter(choice.adapter), flags)
    if choice.warning:
        typer.echo(f"warning: {choice.warning}", err=True)
    rows = run_engine(model, config, k, runs, out, files, model_dir, max_tokens_cap, None, tp,
                      not no_force, tag=tag, load_format=load_format, harness=choice.adapter,
                      flags=flags)
    from simkit.outfiles import wrote

    for r in rows:
        typer.echo(f"{r['run_id']}: {r['output_tok_s']:.1f} tok/s, match={r['outputs_match_trace']}")
        wrote(out / f"steps_{r['run_id']}.parquet")
    if rows:
        wrote(out / "runs.jsonl")                    # one row appended per run


def _require_vllm():
    """The installed vLLM's release and harness adapter (calibrate.harness.versions), read from
    its package metadata without importing it; one clear line when vLLM is not installed here."""
    from calibrate.harness.versions import choose_installed

    return choose_installed()


@calibrate_app.command("plan")
def plan_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help="catalogue model the runs serve"),
    corpus: str = typer.Option("chat", "--corpus", help="corpus (or your imported traffic) the "
                               "runs replay"),
    budget_min: float = typer.Option(15.0, "--budget-min", help="GPU minutes the runs may take, "
                                     "engine starts included"),
    configs: Optional[str] = typer.Option(None, "--configs",
                                          help="configurations to calibrate, most important "
                                          "first (default: vanilla,suffix,kpad:4,kpad:12; on "
                                          "vLLM 0.34, where K-pad is built in: vanilla, "
                                          "suffix:8, suffix:4, suffix:16, suffix:12, suffix:24)"),
    vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help=VLLM_VERSION_HELP),
    fmt: Format = OutputFormat.TABLE,
    out: Optional[Path] = typer.Option(None, "--out", help="also write the commands as a shell "
                                       "script to run on the GPU host (default: none)"),
    hardware: str = typer.Option("h200", "--hardware", help="the GPU the runs use (h100, h200, "
                                 "b200 or a hardware JSON path): the TP is the smallest that "
                                 "fits the model on it, as predict chooses"),
) -> None:
    """The calibration runs that fit a GPU-time budget, as `simkit calibrate run` commands."""
    import json

    from calibrate.harness.versions import choose, installed_vllm_release
    from calibrate.plan import default_configs, make_plan
    from simkit.catalog.models import get_model
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.checks import output_file

    output_file(out, "out", (".sh",))
    spec = get_model(model)
    tp = _runnable_tp(spec, hardware)
    _known_corpus(corpus)
    # the version asked for, else the vLLM installed here (a GPU host), else simkit's newest
    choice = choose(vllm_version or installed_vllm_release() or get_vllm_version(None).release)
    if choice.warning:
        typer.echo(f"warning: {choice.warning}", err=True)
    mean_out, mean_from = _mean_output_tokens(model, corpus)
    asked = [c for c in configs.split(",") if c.strip()] if configs is not None else \
        list(default_configs(choice.key))
    plan = make_plan(spec.name, corpus, budget_min=budget_min, configs=asked,
                     vllm_version=choice.key, mean_output_tokens=mean_out,
                     params_b=spec.active_params() / 1e9, tp=tp)
    lines = plan.commands()
    if out:
        req = f".gpu/requests/{spec.name}__{corpus}.jsonl"
        script = ["#!/usr/bin/env bash", "# simkit calibrate plan: run on the GPU host, then "
                  "`simkit calibrate fit --records calib-out`", "set -euo pipefail",
                  "# the request file: made here unless it was made where the corpus is and "
                  "copied beside this script", f"test -f {req} || simkit calibrate requests "
                  f"--model {spec.name} --corpus {corpus}", *lines]
        from simkit.outfiles import write_atomic

        text = "\n".join(script) + "\n"
        write_atomic(out, lambda tmp: tmp.write_text(text))   # a full disk: no 0-byte plan.sh
        typer.echo(f"wrote {out}", err=True)
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps(plan.to_dict(), indent=1))
        return
    typer.echo("\n".join(_plan_text(plan, spec.name, corpus, budget_min, mean_out, mean_from,
                                      lines)))


def _plan_text(plan, model: str, corpus: str, budget_min: float, mean_out: float,
               mean_from: str, commands: list[str]) -> list[str]:
    """The plan as text lines of at most 100 characters, except each `simkit calibrate run` line:
    a shell command to paste whole on the GPU host, so it is never wrapped."""
    from simkit.report.fit import wrap_prose

    n = len(plan.engines)
    gpus = (f", TP {plan.tp} ({plan.tp} GPUs per engine, {plan.seconds / 60:.1f} minutes of wall "
            "time)" if plan.tp > 1 else "")
    out = wrap_prose(f"calibration plan: {model} on {corpus}, vLLM {plan.vllm_version}, "
                     f"{n} engine{'s' if n != 1 else ''}{gpus}, about "
                     f"{plan.gpu_seconds / 60:.1f} of {budget_min:g} GPU-minutes (estimates; mean "
                     f"output {mean_out:.0f} tokens at the runs' {RUN_OUTPUT_CAP:,}-token cap, "
                     f"from {mean_from})")
    for e, line in zip(plan.engines, commands):
        out += wrap_prose(f"{e.config}{':' + str(e.k) if e.k else ''}: {len(e.runs)} runs, "
                          f"~{e.seconds:.0f} s ({e.overhead_s:.0f} s engine start)",
                          indent="  ", hang="    ")
        out.append(f"    {line}")
    for why in plan.left_out:
        out += wrap_prose(f"left out: {why}", indent="  ", hang="    ")
    return out


def _runnable_tp(spec, hardware: str) -> int:
    """The TP a plan's engines run at: the smallest that fits `spec` on `hardware`, as predict
    chooses it; refused when `simkit calibrate run` cannot serve the model (it writes dummy
    weights from the configs in calibrate.model_configs) or it fits at no TP."""
    from calibrate.model_configs import CONFIGS
    from simkit.catalog.hardware import get_hardware
    from simkit.costmodel.memory import choose_tp
    from simkit.errors import InputError

    if spec.name not in CONFIGS:
        raise InputError(f"`simkit calibrate run` serves {', '.join(CONFIGS)} (dummy weights "
                         f"from their public configs), not {spec.name}: no plan for it",
                         field="model")
    return choose_tp(spec, get_hardware(hardware))


def _known_corpus(corpus: str) -> None:
    """A plan names the corpus its runs replay: a built-in one or traffic imported here, checked
    before any plan is printed (the GPU host's `calibrate requests` would fail on it later)."""
    from simkit.errors import UnknownNameError
    from traces.corpora import list_corpora

    known = list_corpora()
    if corpus not in known:
        raise UnknownNameError("corpus", corpus, known, "your own traffic is imported first "
                               f"(simkit traces import FILE --name {corpus})")


def _mean_output_tokens(model: str, corpus: str) -> tuple[float, str]:
    """(mean output tokens per request at the runs' 1,024-token cap, where that figure comes
    from): the corpus's own requests where the raw traces (or your imported traffic) are here,
    else the shipped profile's weighted sample of them."""
    from simkit.app.cells import load_workload
    from simkit.errors import InputError
    from simkit.paths import traces_src_dir
    from simkit.whatif.common import mean_output_tokens
    from traces.corpora import load_corpus

    cap = RUN_OUTPUT_CAP
    try:
        reqs = load_corpus(corpus, model).requests
    except InputError:
        if traces_src_dir() is not None:
            raise                            # the traces are here and something else is wrong
        w = load_workload(model, corpus)     # the shipped profile (its error if there is none)
        return (mean_output_tokens(w, max_tokens=cap),
                f"the shipped profile's {w.num_requests}-request sample")
    return (float(sum(min(len(r.output_ids), cap) for r in reqs) / max(1, len(reqs))),
            f"its {len(reqs):,} requests")


@calibrate_app.command("requests")
def requests_cmd(
    model: str = typer.Option(..., "--model", help="catalogue model the runs serve"),
    corpus: str = typer.Option(..., "--corpus", help="corpus, or your imported traffic "
                               "(simkit traces import)"),
    out: Path = typer.Option(Path(".gpu/requests"), "--out", help="folder for the token-id "
                             "request file (keep it out of version control)"),
    n: int = typer.Option(200, "-n", help="requests in the file (runs take the first N)"),
) -> None:
    """Write the token-id request file a calibration run forces (<out>/<model>__<corpus>.jsonl)."""
    from calibrate.make_requests import make
    from simkit.checks import positive_int

    positive_int(n, "n")
    meta = make(model, corpus, out, n, cap=RUN_OUTPUT_CAP)
    # two means, each named: the file's outputs as recorded, and what the runs generate of them
    # (cut at their cap; the plan's estimate is that mean over the whole corpus)
    typer.echo(f"wrote {out}/{model}__{corpus}.jsonl: {meta['count']} requests (mean output "
               f"{meta['output_len_mean']:.0f} tokens as recorded, "
               f"{meta['output_len_mean_capped']:.0f} at the runs' {RUN_OUTPUT_CAP:,}-token cap)",
               err=True)


@calibrate_app.command("merge")
def merge_cmd(folders: list[Path] = typer.Argument(..., help="folders with runs.jsonl or runs.parquet"),
              into: Path = typer.Option(..., help="output folder for steps.parquet / runs.parquet")) -> None:
    """Concatenate record folders into one steps.parquet and runs.parquet."""
    from calibrate.merge import merge
    from simkit.checks import input_dir, output_dir
    from simkit.errors import InputError

    for f in folders:                                # every input checked before writing
        input_dir(f)
        if not ((f / "runs.jsonl").exists() or (f / "runs.parquet").exists()):
            raise InputError("no runs.jsonl or runs.parquet in this folder", path=str(f))
    output_dir(into, "into")
    try:
        n_runs, n_steps = merge(folders, into)
    except ValueError as exc:                        # merge's own refusals (columns, duplicates)
        raise InputError(str(exc), field="folders") from None
    typer.echo(f"merged {n_runs} runs, {n_steps} steps into {into}")
    from simkit.outfiles import wrote

    for name in ("steps.parquet", "runs.parquet"):
        wrote(into / name)


@calibrate_app.command("fit")
def fit_cmd(
    records: Path = typer.Option(Path("calibrate/data"), help="folder with steps*.parquet / runs*.parquet"),
    name: Optional[str] = typer.Option(None, help="calibration name (default: <hardware>-vllm<version>, "
                                     "e.g. h200-vllm033)"),
    out: Optional[Path] = typer.Option(None, help="write the calibration JSON here (default: print "
                                                "the summary only)"),
    hardware: str = typer.Option("h200", help="catalogue hardware the records were measured on"),
    folds: int = typer.Option(5, help="cross-validation folds (grouped by run)"),
    default_for: list[str] = typer.Option([], help="hardware this calibration becomes the default for "
                                          "(the shipped h200-vllm026 has h200)"),
    vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help=VLLM_VERSION_HELP),
    fmt: Format = OutputFormat.TABLE,
) -> None:
    """Fit the step-time cost model to measured records (calibration runs only; validation runs are
    held out) and print the run-grouped cross-validated error; see simkit.costmodel.fit."""
    import json

    from simkit.checks import output_file
    from simkit.costmodel.fit import fit_calibration
    from simkit.errors import InputError

    from calibrate.harness import HARNESS_BY_VERSION
    from simkit.catalog.nearest_version import resolve_vllm_version
    from simkit.catalog.vllm_versions import get_vllm_version

    from simkit.catalog.hardware import canonical_hardware, list_hardware
    from simkit.errors import UnknownNameError

    # a release newer than simkit's rules (0.35) is fitted on its own records under its own
    # name, with the warning resolve_vllm_version words
    version = resolve_vllm_version(vllm_version if vllm_version is not None else
                                   get_vllm_version(None).key, tuple(HARNESS_BY_VERSION))
    hardware = canonical_hardware(hardware)
    if hardware not in list_hardware():     # was "no calibration steps on a100", after reading
        raise UnknownNameError("hardware", hardware, list_hardware(),
                               "a fit needs the hardware's catalogue entry (simkit hardware list)")
    name = name or f"{hardware}-vllm{version.key.replace('.', '')}"
    if folds < 2:
        raise InputError(f"cross-validation needs >= 2 folds, got {folds}", field="folds")
    from simkit.checks import input_dir

    input_dir(records, "records")
    output_file(out, "out", (".json",))
    from simkit.progress import status

    if version.warning:
        typer.echo(f"warning: {version.warning}", err=True)
    with status(f"fitting the step-time model on {records} ({folds}-fold cross-validation)"):
        doc = fit_calibration(records, name, hardware, None, tuple(default_for), folds,
                              version.key)
    from simkit.validation.own_interval import interval_block

    doc["interval"] = interval_block(doc, records)    # its own, as the shipped ones carry
    if out:
        from simkit.costmodel.calibrations import write_calibration

        write_calibration(doc, out)
    from simkit.report.calibration_fit import fit_summary, fit_text

    summary = fit_summary(doc, skip_note=version.warning)
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps(summary, indent=1))
    else:
        typer.echo("\n".join(fit_text(summary)))
    if out:
        from simkit.outfiles import wrote

        wrote(out)


def validate(
    format: Format = OutputFormat.TABLE,
    wide: Wide = False,
    plot: Optional[Path] = typer.Option(None, "--plot", help="write a predicted-vs-measured PNG "
                                        "(default: no plot)"),
    purpose: str = typer.Option("validation", help="validation (held out) | calibration | all"),
    seeds: int = typer.Option(1, help="simulation seeds per run (the replay has a fixed order)"),
    run_id: Optional[list[str]] = typer.Option(None, "--run-id", help="only these runs; repeat the option "
                                                  "for several (default: every run of --purpose)"),
    ordering: Ordering = typer.Option(Ordering.CONCURRENT, metavar="ORDER",
                                      help="acceptance-table ordering: concurrent | sequential"),
    compare_orderings: bool = typer.Option(
        False, "--compare-orderings", help="also replay each speculative run under the other "
        "table ordering and print that ordering's acceptance error (a second simulation of "
        "each: about 40 % more time)"),
    records: Optional[Path] = typer.Option(None, help="folder of runs/steps parquet "
                                           "(default calibrate/data)"),
    history: Optional[str] = typer.Option(None, "--history", help="predict every selected run "
                                          "under this request history instead of its own "
                                          "(cold, hot, repeat:P[,diverge:M]; default: each "
                                          "run's recorded history)"),
    vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="validate the runs "
                                               "measured with this vLLM version (0.26 or 0.33; "
                                               "default: 0.33, the newest), each predicted with "
                                               "that version's rules and calibration"),
) -> None:
    """Predicted vs measured tok/s for every measured vLLM run, under that run's conditions."""
    from simkit.errors import InputError

    if seeds < 1:
        raise InputError("must be >= 1", field="seeds")
    from simkit.checks import output_file

    output_file(plot, "plot")
    if records is not None:
        from simkit.checks import input_dir

        input_dir(records, "records")
    if history is not None:
        from simkit.history import parse_history

        history = parse_history(history)
        if history.kind == "warm":
            raise InputError("warm needs a whole corpus served before; a measured run's "
                             "requests can be predicted cold, hot or repeat:P", field="history")
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.paths import require_traces_src

    version = get_vllm_version(vllm_version)
    require_traces_src("simkit validate (it rebuilds each measured run's requests)")
    from simkit.drafters.suffix import jit_lock
    from simkit.engine import fast
    from simkit.engine.fast import background

    compiling = jit_lock.start()   # the drafter's kernels compile beside the work below (fresh install)
    # and the engine loop's, where this version's runs take it (else each worker compiled it)
    engine = background.start() if fast.may_take(version.key) else None
    try:
        _validate(format, plot, purpose, seeds, run_id, ordering, compare_orderings, records,
                  history, version, wide)
    finally:
        background.stop(engine)
        jit_lock.stop(compiling)


def _validate(format, plot, purpose, seeds, run_id, ordering, compare_orderings, records, history,
              version, wide: bool = False) -> None:
    """validate's work once its input is checked (the command above keeps the kernels' compile)."""
    import functools
    import json
    import sys

    from simkit.costmodel.step_records import select_version
    from simkit.errors import InputError
    from simkit.validation import report
    from simkit.validation.measured import load_records

    steps, runs = load_records(records)
    if runs is None:
        raise InputError("no runs*.parquet / steps*.parquet records found",
                         path=str(records or "calibrate/data"))
    loaded = steps, runs                 # every record, for the fleet validation below
    runs = select_version(runs, version.key)
    if runs.empty:
        raise InputError(f"no runs measured with {version.label} in the records",
                         path=str(records or "calibrate/data"), field="vllm-version")
    from simkit.costmodel.step_records import RUN_PREDICT_KEYS

    missing = [c for c in RUN_PREDICT_KEYS if c not in runs.columns]
    if missing:
        raise InputError(f"run records lack column(s) {', '.join(missing)} needed to predict a run",
                         path=str(records or "calibrate/data"), field=missing[0])
    refits = None
    if not run_id and purpose in ("validation", "all"):
        from simkit.validation.transfer import Refits

        # the unseen-day refits need no prediction: fitted in a forked process beside the runs
        refits = Refits.start(runs, version.key, records, loaded)
    pools: dict = {}                     # the request pools, read once for every prediction below
    # the unseen-day refits predict these runs again under other coefficients only: their
    # trajectories are kept here and priced again there (simkit.engine.trajectory)
    kept: dict = {}
    keep: frozenset[str] = frozenset()
    if refits is not None and history is None and ordering == Ordering.CONCURRENT:
        from simkit.validation.transfer import refit_runs

        keep = refit_runs(runs, version.key)
    # one line, not one per run (it printed 196 "predicted <run>" lines), said once the first
    # run is predicted (a bad --run-id is refused before it, alone); on a terminal the
    # command's progress bar counts the runs (simkit.progress, through validation.parallel)
    said: list[bool] = []

    def once(_run_id: str) -> None:
        if not said:
            said.append(True)
            print(f"predicting each measured run of vLLM {version.key} under its own "
                  "conditions", file=sys.stderr)

    cells = report.build_cells(runs, steps, purpose=purpose, seeds=seeds, ordering=ordering,
                               run_ids=run_id or None, history=history,
                               compare_orderings=compare_orderings, pools=pools,
                               keep=keep, kept=kept, progress=once)
    if not cells:
        raise InputError("no measured run matches the selection", field="run-id")
    doc = report.document(cells, ordering)
    fleet_runs = runs[runs["corpus"].astype(str).str.startswith("fleet-")]
    fleet = None
    if not run_id and purpose in ("validation", "all") and len(fleet_runs):
        from simkit.fleet.validate import validate_fleet
        from simkit.validation.background import Background

        print(f"predicting {len(fleet_runs)} fleet replica runs", file=sys.stderr)
        # on one core beside the unseen-day refits below, whose short phases leave one idle
        fleet = Background(functools.partial(validate_fleet, records, loaded=loaded, workers=1,
                                             run_ids=list(fleet_runs["run_id"])))
    try:
        if not run_id:         # a figure of the whole records, beside the held-out MAPE
            from simkit.validation.floor import repeat_floor

            doc["repeat_floor"] = report._clean(repeat_floor(runs))
        if not run_id and purpose in ("validation", "all"):
            from simkit.validation.transfer import by_day, run_days, unseen_days

            doc["by_day"] = report._clean(by_day(cells, run_days(runs)))
            print("refitting on the earlier days' calibration runs for the unseen-day error",
                  file=sys.stderr)
            doc["unseen_day"] = report._clean(unseen_days(
                runs, steps, version.key, records,
                progress=None,
                predicted=None if history is not None or seeds != 1 or
                ordering != Ordering.CONCURRENT else {c["run_id"]: c for c in cells},
                refits=refits, pools=pools, kept=kept))
        if fleet is not None:
            from simkit.fleet.validate import summary

            doc["fleet"] = report._clean(summary(fleet.result()))
    finally:
        if fleet is not None:
            fleet.close()
    if plot:
        from simkit.outfiles import wrote

        report.plot(cells, plot)
        wrote(plot)
    if format is OutputFormat.JSON:
        typer.echo(json.dumps(doc, indent=1, sort_keys=True))
        return
    from simkit.validation.table import render

    typer.echo(render(doc, wide))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(calibrate_app, name="calibrate")
    app.command("validate")(validate)
