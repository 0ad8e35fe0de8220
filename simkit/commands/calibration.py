"""`simkit calibrate ...`: real vLLM calibration runs (GPU host) and their records."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

calibrate_app = typer.Typer(help="Real vLLM 0.26 calibration runs and their step records.",
                            no_args_is_help=True)


def _ints(text: str, name: str) -> list[int]:
    from simkit.errors import InputError

    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"expected a comma list of integers, got {text!r}", field=name) from None
    if not vals or min(vals) < 1:
        raise InputError("values must be integers >= 1", field=name)
    return vals


@calibrate_app.command("run")
def run(
    model: str = typer.Option(..., help="catalogue model, e.g. llama-3.1-8b"),
    corpus: str = typer.Option(..., help="corpus of the request file(s)"),
    config: str = typer.Option(..., help="vanilla | suffix | kpad"),
    out: Path = typer.Option(..., help="folder for steps_*.parquet and runs.jsonl"),
    k: int = typer.Option(0, help="draft length K (kpad: required; suffix: 0 = vLLM default)"),
    concurrency: str = typer.Option("32", help="requests in flight; a comma list makes one run each"),
    num_requests: str = typer.Option("64", help="requests per run (one value, or one per concurrency)"),
    purpose: str = typer.Option("calibration", help="calibration or validation (validation runs are held out of the fit)"),
    model_dir: Optional[Path] = typer.Option(None, help="model folder (config.json written if absent; "
                                                "default: OUT/model-<model>)"),
    requests: Optional[Path] = typer.Option(None, help="token-id JSONL request file (default: none; "
                                              "give this or --requests-dir)"),
    requests_dir: Optional[Path] = typer.Option(None, help="folder of <model>__<corpus>.jsonl files "
                                                   "(default: none; give this or --requests)"),
    max_tokens_cap: int = typer.Option(1024, help="truncate trace outputs to this many tokens"),
    tp: int = typer.Option(1, help="tensor parallel size (> 1: launch under torchrun, one process a GPU)"),
    no_force: bool = typer.Option(False, help="do not force the trace's tokens"),
    tag: str = typer.Option("", help="run-id suffix, e.g. r2 for a re-measurement "
                                   "(default: none)"),
) -> None:
    """Start vLLM 0.26 in-process (dummy weights, forced trace outputs) and record every step."""
    from calibrate.runner import RunSpec, requests_for, run_engine
    from simkit.errors import InputError

    concs = _ints(concurrency, "concurrency")
    nums = _ints(num_requests, "num-requests")
    if len(nums) == 1:
        nums = nums * len(concs)
    if len(nums) != len(concs):
        raise InputError("give one --num-requests, or one per --concurrency", field="num-requests")
    runs = [RunSpec(corpus, c, n, purpose) for c, n in zip(concs, nums)]
    files = requests_for(model, [corpus], requests_dir, requests)
    rows = run_engine(model, config, k, runs, out, files, model_dir, max_tokens_cap, None, tp,
                      not no_force, tag=tag)
    for r in rows:
        typer.echo(f"{r['run_id']}: {r['output_tok_s']:.1f} tok/s, match={r['outputs_match_trace']}")


@calibrate_app.command("merge")
def merge_cmd(folders: list[Path] = typer.Argument(..., help="folders with runs.jsonl or runs.parquet"),
              into: Path = typer.Option(..., help="output folder for steps.parquet / runs.parquet")) -> None:
    """Concatenate record folders into one steps.parquet and runs.parquet."""
    from calibrate.merge import merge
    from simkit.checks import output_dir
    from simkit.errors import InputError

    for f in folders:                                # every input checked before writing
        if not f.is_dir():
            raise InputError("no such folder", path=str(f))
        if not ((f / "runs.jsonl").exists() or (f / "runs.parquet").exists()):
            raise InputError("no runs.jsonl or runs.parquet in this folder", path=str(f))
    output_dir(into, "into")
    try:
        n_runs, n_steps = merge(folders, into)
    except ValueError as exc:                        # merge's own refusals (columns, duplicates)
        raise InputError(str(exc), field="folders") from None
    typer.echo(f"merged {n_runs} runs, {n_steps} steps into {into}")


@calibrate_app.command("fit")
def fit_cmd(
    records: Path = typer.Option(Path("calibrate/data"), help="folder with steps*.parquet / runs*.parquet"),
    name: str = typer.Option("h200-vllm026", help="calibration name"),
    out: Optional[Path] = typer.Option(None, help="write the calibration JSON here (default: print "
                                                "the summary only)"),
    hardware: str = typer.Option("h200", help="catalogue hardware the records were measured on"),
    folds: int = typer.Option(5, help="cross-validation folds (grouped by run)"),
    default_for: list[str] = typer.Option([], help="hardware this calibration becomes the default for "
                                          "(the shipped h200-vllm026 has h200)"),
) -> None:
    """Fit the step-time cost model to measured records (calibration runs only; validation runs are
    held out) and print the run-grouped cross-validated error; see simkit.costmodel.fit."""
    import json

    from simkit.checks import output_file
    from simkit.costmodel.fit import fit_calibration
    from simkit.errors import InputError

    if folds < 2:
        raise InputError(f"cross-validation needs >= 2 folds, got {folds}", field="folds")
    if not records.is_dir():
        raise InputError("no such folder", path=str(records), field="records")
    output_file(out, "out", (".json",))
    doc = fit_calibration(records, name, hardware, out, tuple(default_for), folds)
    typer.echo(json.dumps({k: doc[k] for k in ("name", "hardware", "models", "n_steps", "left_out",
                                               "skipped")}, indent=1))
    typer.echo(f"not fitted (analytic defaults kept): {', '.join(doc['not_fitted'])}")
    mean = {k: (round(v, 2) if v is not None else None) for k, v in doc["cv"]["mean"].items()}
    typer.echo(f"cross-validated MAPE % per step ({doc['cv']['grouping']}): {json.dumps(mean)}")
    if out:
        typer.echo(f"calibration written to {out}")


def validate(
    format: str = typer.Option("table", "--format", help="output format: table or json"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write a predicted-vs-measured PNG "
                                        "(default: no plot)"),
    purpose: str = typer.Option("validation", help="validation (held out) | calibration | all"),
    seeds: int = typer.Option(1, help="simulation seeds per run (the replay has a fixed order)"),
    run_id: Optional[list[str]] = typer.Option(None, "--run-id", help="only these runs; repeat the option "
                                                  "for several (default: every run of --purpose)"),
    ordering: str = typer.Option("concurrent", help="acceptance-table ordering: concurrent | "
                                 "sequential (the other is also replayed for comparison)"),
    records: Optional[Path] = typer.Option(None, help="folder of runs/steps parquet "
                                           "(default calibrate/data)"),
    history: Optional[str] = typer.Option(None, "--history", help="predict every selected run "
                                          "under this request history instead of its own "
                                          "(cold, hot, repeat:P[,diverge:M]; default: each "
                                          "run's recorded history)"),
) -> None:
    """Predicted vs measured tok/s for every measured vLLM run, under that run's conditions."""
    import json
    import sys

    from simkit.errors import InputError
    from simkit.validation import report
    from simkit.validation.records import load_records

    from simkit.checks import output_format

    output_format(format)
    if seeds < 1:
        raise InputError("must be >= 1", field="seeds")
    from simkit.checks import output_file

    output_file(plot, "plot")
    if records is not None and not records.is_dir():
        raise InputError("no such folder", path=str(records), field="records")
    if history is not None:
        from simkit.history import parse_history

        history = parse_history(history).label
        if history == "warm":
            raise InputError("warm needs a whole corpus served before; a measured run's "
                             "requests can be predicted cold, hot or repeat:P", field="history")
    from simkit.paths import require_traces_src

    require_traces_src("simkit validate (it rebuilds each measured run's requests)")
    steps, runs = load_records(records)
    if runs is None:
        raise InputError("no runs*.parquet / steps*.parquet records found",
                         path=str(records or "calibrate/data"))
    from simkit.costmodel.records import RUN_PREDICT_KEYS

    missing = [c for c in RUN_PREDICT_KEYS if c not in runs.columns]
    if missing:
        raise InputError(f"run records lack column(s) {', '.join(missing)} needed to predict a run",
                         path=str(records or "calibrate/data"), field=missing[0])
    cells = report.build_cells(runs, steps, purpose=purpose, seeds=seeds, ordering=ordering,
                               run_ids=run_id or None, history=history,
                               progress=lambda r: print(f"predicting {r}", file=sys.stderr))
    if not cells:
        raise InputError("no measured run matches the selection", field="run-id")
    doc = report.document(cells, ordering)
    if plot:
        from simkit.outfiles import wrote

        report.plot(cells, plot)
        wrote(plot)
    if format == "json":
        typer.echo(json.dumps(doc, indent=1, sort_keys=True))
        return
    from simkit.validation.table import render

    typer.echo(render(doc))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(calibrate_app, name="calibrate")
    app.command("validate")(validate)
