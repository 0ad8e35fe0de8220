"""`simkit predict` (one model x corpus, the whole ladder) and `simkit sweep` (a grid of them)."""

from __future__ import annotations

import contextlib
import json
from typing import Optional

import typer

from simkit.commands.options import (DEFAULT, OUTPUT, REQUIRED, TRAFFIC, ExecutorOption,
                                     RayAddress, Wide, comma_list, deprecated_alias, pick_alias,
                                     run_command, run_options)
from simkit.engine.config import DEFAULT_CONFIGS
from simkit.choices import Executor, PredictFormat


@contextlib.contextmanager
def _progress(label: str):
    """A rich progress bar on stderr; yields a factory total -> advance(n) callback."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        def start(total: int):
            task = bar.add_task(label, total=total)
            return lambda n: bar.advance(task, n)

        yield start


# a sweep's grid: several models and corpora (default: all)
Models = comma_list("--model", "model ids (simkit models list), or all (the default)")
Corpora = comma_list("--corpus", "corpus names (simkit traces list), or all (the default)")


def _split(text: str, all_values: list[str]) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    return list(all_values) if items == ["all"] else items


def register(app: typer.Typer) -> None:
    """Add `predict` and `sweep` to the root app."""

    @app.command()
    @run_command(model=REQUIRED, corpus=REQUIRED, hardware=DEFAULT.hardware,
                 configs=DEFAULT_CONFIGS)
    def predict(
        fmt: PredictFormat = typer.Option(PredictFormat.TABLE, "--format", metavar="FORMAT",
                                          help="table, json or csv", rich_help_panel=OUTPUT),
        plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG bar chart of tok/s "
                                           "here (default: none)", rich_help_panel=OUTPUT),
        html: Optional[str] = typer.Option(None, "--html", help="also write a self-contained HTML "
                                           "report here (default: none)", rich_help_panel=OUTPUT),
        wide: Wide = False,
        no_legend: bool = typer.Option(False, "--no-legend", help="no column legend under the "
                                       "table", rich_help_panel=OUTPUT),
        request_rate: Optional[float] = typer.Option(
            None, "--request-rate", help="open loop: Poisson arrivals at this many req/s "
            "(default: closed loop)", rich_help_panel=TRAFFIC),
        **run,
    ) -> None:
        """Predict the configuration ladder (tok/s, speedup, best K) for one model and traffic."""
        from simkit.app.predict import predict as run_predict
        from simkit.checks import output_file, positive_rate

        opts = run_options(run)
        positive_rate(request_rate, "request-rate")
        output_file(plot, "plot")                    # before the work, not after it
        output_file(html, "html", (".html", ".htm"))
        from simkit.engine.fast import may_take
        from simkit.engine.fast.background import compiling

        with compiling(may_take(opts.vllm_version)), \
                _progress(f"{opts.model}/{opts.corpus}") as prog:   # kernels compile
            pred = run_predict(opts, configs=run["configs"], request_rate=request_rate,
                               progress=prog)                    # while the tables load
        if fmt is PredictFormat.JSON:
            from simkit.report.render import document

            typer.echo(json.dumps(document(pred), indent=2))
        elif fmt is PredictFormat.CSV:
            from simkit.report.render import render_csv

            typer.echo(render_csv(pred), nl=False)
        else:
            from simkit.report.render import render_table

            typer.echo(render_table(pred, legend=not no_legend, wide=wide), nl=False)
        from simkit.outfiles import wrote

        if plot:
            from simkit.report.chart import plot_prediction

            plot_prediction(pred, plot)
            wrote(plot)
        if html:
            from simkit.report.html import write_html

            write_html(pred, html)
            wrote(html)

    @app.command()
    @run_command(hardware=DEFAULT.hardware, configs=DEFAULT_CONFIGS)
    def sweep(
        out: str = typer.Option(..., "--out", help="output folder (created if absent)"),
        model: Models = None,
        corpus: Corpora = None,
        models: deprecated_alias("--models", "--model") = None,
        corpora: deprecated_alias("--corpora", "--corpus") = None,
        executor: ExecutorOption = Executor.LOCAL,
        ray_address: RayAddress = None,
        address: Optional[str] = typer.Option(None, "--address", hidden=True,
                                              help="deprecated alias of --ray-address (removed "
                                                   "in the next release)"),
        **run,
    ) -> None:
        """Predict every model x corpus; write sweep.parquet, sweep.csv and speedup_per_k.png."""
        from simkit.catalog.models import list_models
        from simkit.engine.config import parse_configs
        from simkit.app.sweep import sweep as run_sweep
        from simkit.checks import output_dir
        from simkit.errors import InputError, UnknownNameError
        from traces.corpora import list_corpora

        opts = run_options(run)
        parse_configs(run["configs"], opts.vllm_version)    # fail fast on a bad config string
        output_dir(out, "out")
        if executor is Executor.RAY:                        # simkit.executors.ray_sweep
            from simkit.executors.ray_sweep import sweep_ray as run_sweep
        address = pick_alias(ray_address, address, "--ray-address", "--address")
        models = pick_alias(model, models, "--model", "--models")
        corpora = pick_alias(corpus, corpora, "--corpus", "--corpora")
        model_list = _split(models if models is not None else "all", list_models())
        corpus_list = _split(corpora if corpora is not None else "all", list_corpora())
        for opt, items in (("model", model_list), ("corpus", corpus_list)):
            if not items:
                raise InputError("no names given (a comma list, or all)", field=opt)
        for kind, items, known in (("model", model_list, list_models()),
                                   ("corpus", corpus_list, list_corpora())):
            for item in items:                       # every name checked before any cell runs
                if item not in known:
                    raise UnknownNameError(kind, item, known)
        from simkit.serving_checks import check_tp

        for item in model_list:      # as predict does, before any cell runs or file is written
            check_tp(item, opts.tp)
        extra = {"address": address, "num_cpus": opts.workers} if executor is Executor.RAY else \
            {"workers": opts.workers}
        from simkit.progress import phase

        cells = len(model_list) * len(corpus_list)
        with phase(f"sweep: {len(model_list)} model(s) x {len(corpus_list)} corpus(es)", cells,
                   "cells") as advance:          # drawn on a terminal, one line elsewhere
            res = run_sweep(model_list, corpus_list, out, progress=lambda total: advance,
                            **extra, run=opts, configs=run["configs"])
        from simkit.outfiles import wrote

        not_written = res.get("not_written", {})
        if not not_written:
            typer.echo(f"{res['cells']} cells, {res['rows']} rows -> {res['out']}/sweep.parquet, "
                       f"sweep.csv, speedup_per_k.png")
        else:                                        # name only what is really there
            typer.echo(f"{res['cells']} cells, {res['rows']} rows -> "
                       + (", ".join(res.get("written", [])) or "nothing written"))
        for cell, counts in sorted(res.get("skipped", {}).items()):   # never dropped silently
            typer.echo(f"skipped profile requests in {cell}: "
                       + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for path in res.get("written", []):
            wrote(path)
        for path, why in not_written.items():
            typer.echo(f"not written: {path}: {why}", err=True)
        for cell, err in sorted(res["failed"].items()):
            typer.echo(f"not run: {cell}: {err}", err=True)
        if res["failed"]:                            # the others are written; the run failed
            typer.echo(f"error: {len(res['failed'])} of {res['cells']} cells failed", err=True)
            raise typer.Exit(1)
        if not_written:
            typer.echo(f"error: {len(not_written)} of the sweep's files could not be written",
                       err=True)
            raise typer.Exit(1)
