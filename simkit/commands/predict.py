"""`simkit predict` (one model x corpus, the whole ladder) and `simkit sweep` (a grid of them)."""

from __future__ import annotations

import contextlib
import json
from typing import Optional

import typer

from simkit.commands.options import (WIDE_OPTION, calibration_option, cost_profile_option,
                                     pick_calibration, pick_vllm_version, vllm_version_option)
from simkit.engine.config import DEFAULT_CONFIGS

# help texts shared by predict and sweep (every option states its default and its choices)
HARDWARE_HELP = "hardware id: h100, h200, b200 (simkit hardware list) or a hardware JSON path"
MAX_TOKENS_HELP = "max_tokens cap: output tokens per request at most (longer outputs are cut)"
CONFIGS_HELP = ("configurations, comma list: vanilla, suffix[:K], kpad:K,K.., ngram[:K], "
                "ngram-kpad:K.., dynamic (= dynamic-table, -feedback, -goodput)[:K,K..]")
NUM_REQUESTS_HELP = ("requests per simulated run (default: the profile's sample, at least "
                     "4 x concurrency, cycling)")
CUDAGRAPH_HELP = "vLLM cudagraph_mode: FULL_AND_PIECEWISE, PIECEWISE, FULL or NONE"
CAPPED_HELP = ("keep | extend: how a request whose trace output stopped at its source's "
               "generation cap (2,000-4,096 tokens; traces list counts them) is replayed: keep = it "
               "ends there (as before), extend = it continues to --max-tokens repeating its own "
               "acceptance pattern (docs/engine.md)")
HISTORY_HELP = ("what the server served before (the suffix tree's contents): warm (the whole "
                "corpus before: a steady stream), cold (fresh server), hot (these requests served "
                "once before, identical greedy outputs), repeat:P (a share P in 0..1 of them), "
                "optionally ',diverge:M' (repeats agree for M tokens only, an assumption); "
                "default: the workload profile's own (warm for the shipped profiles that say so)")
SOURCE_HELP = "workload profiles: auto (raw traces when present, else shipped), raw or shipped"
WORKERS_HELP = "local worker processes (default: all cores; output does not depend on it)"
PREFIX_HELP = ("automatic prefix caching of prompt KV blocks, on by default as in vLLM; "
               "--no-prefix-caching prefills every prompt token (the report as before caching "
               "was modelled)")


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


def _split(text: str, all_values: list[str]) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    return list(all_values) if items == ["all"] else items


def register(app: typer.Typer) -> None:
    """Add `predict` and `sweep` to the root app."""

    @app.command()
    def predict(
        model: str = typer.Option(..., "--model", help="catalogue model id (simkit models list)"),
        corpus: str = typer.Option(..., "--corpus", help="corpus name, e.g. mix, chat, code "
                                   "(simkit traces list)"),
        hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
        tp: Optional[int] = typer.Option(None, "--tp", help="tensor parallel degree (default: "
                                         "the smallest that fits)"),
        concurrency: int = typer.Option(32, "--concurrency", help="closed-loop clients, each "
                                        "sending its next request when the last one finishes"),
        max_tokens: int = typer.Option(8192, "--max-tokens", help=MAX_TOKENS_HELP),
        configs: str = typer.Option(DEFAULT_CONFIGS, "--configs", help=CONFIGS_HELP),
        seeds: int = typer.Option(3, "--seeds", help="request orders simulated per config "
                                  "(figures are means over them)"),
        num_requests: Optional[int] = typer.Option(None, "--num-requests", help=NUM_REQUESTS_HELP),
        fmt: str = typer.Option("table", "--format", help="output format: table, json or csv"),
        plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG bar chart of tok/s "
                                           "here (default: no plot)"),
        max_num_seqs: int = typer.Option(1024, "--max-num-seqs", help="vLLM max_num_seqs: "
                                         "sequences in one step at most"),
        max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens",
                                                   help="vLLM max_num_batched_tokens: tokens in "
                                                   "one step at most (chunked prefill)"),
        cudagraph_mode: str = typer.Option("FULL_AND_PIECEWISE", "--cudagraph-mode",
                                           help=CUDAGRAPH_HELP),
        calibration: Optional[str] = calibration_option(),
        cost_profile: Optional[str] = cost_profile_option(),
        vllm_version: Optional[str] = vllm_version_option(),
        source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
        workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
        request_rate: Optional[float] = typer.Option(
            None, "--request-rate", help="open loop: Poisson arrivals at this many req/s instead "
            "of closed-loop clients (default: closed loop)"),
        legend: bool = typer.Option(True, "--legend/--no-legend", help="print the column legend "
                                    "under the table (table format)"),
        wide: bool = WIDE_OPTION,
        html: Optional[str] = typer.Option(None, "--html", help="also write a self-contained HTML "
                                           "report (table, plot, assumptions, legend) here "
                                           "(default: none)"),
        history: Optional[str] = typer.Option(None, "--history", help=HISTORY_HELP),
        prefix_caching: bool = typer.Option(True, "--prefix-caching/--no-prefix-caching",
                                            help=PREFIX_HELP),
        capped_outputs: str = typer.Option("keep", "--capped-outputs", help=CAPPED_HELP),
    ) -> None:
        """Predict the configuration ladder (tok/s, speedup, graph shares, best K) for one cell."""
        from simkit.checks import output_file, output_format, positive_int, positive_rate
        from simkit.app.predict import predict as run_predict

        from simkit.serving_checks import check_serving

        output_format(fmt, ("table", "json", "csv"))
        positive_int(num_requests, "num-requests")
        positive_int(workers, "workers")
        for value, name in ((seeds, "seeds"), (concurrency, "concurrency"), (tp, "tp"),
                            (max_tokens, "max-tokens"), (max_num_seqs, "max-num-seqs"),
                            (max_num_batched_tokens, "max-num-batched-tokens")):
            positive_int(value, name)
        positive_rate(request_rate, "request-rate")
        check_serving(model, tp, max_tokens=max_tokens, max_num_seqs=max_num_seqs,
                      max_num_batched_tokens=max_num_batched_tokens)   # vLLM's refusals
        output_file(plot, "plot")                    # before the work, not after it
        output_file(html, "html", (".html", ".htm"))
        calibration = pick_calibration(calibration, cost_profile)
        vllm_version = pick_vllm_version(vllm_version)
        with _progress(f"{model}/{corpus}") as prog:
            pred = run_predict(model, corpus, hardware=hardware, tp=tp, concurrency=concurrency,
                               max_tokens=max_tokens, configs=configs, seeds=seeds,
                               num_requests=num_requests, max_num_seqs=max_num_seqs,
                               max_num_batched_tokens=max_num_batched_tokens,
                               cudagraph_mode=cudagraph_mode, calibration=calibration,
                               source=source, workers=workers, request_rate=request_rate,
                               progress=prog, history=history,
                               prefix_caching=prefix_caching, capped_outputs=capped_outputs,
                               vllm_version=vllm_version)
        if fmt == "json":
            from simkit.report.render import document

            typer.echo(json.dumps(document(pred), indent=2))
        elif fmt == "csv":
            from simkit.report.render import render_csv

            typer.echo(render_csv(pred), nl=False)
        else:
            from simkit.report.render import render_table

            typer.echo(render_table(pred, legend=legend, wide=wide), nl=False)
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
    def sweep(
        out: str = typer.Option(..., "--out", help="output folder (created if absent)"),
        models: str = typer.Option("all", "--models", help="comma list of model ids, or all"),
        corpora: str = typer.Option("all", "--corpora", help="comma list of corpora, or all"),
        configs: str = typer.Option(DEFAULT_CONFIGS, "--configs", help=CONFIGS_HELP),
        hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
        concurrency: int = typer.Option(32, "--concurrency", help="closed-loop clients"),
        seeds: int = typer.Option(1, "--seeds", help="request orders simulated per config"),
        num_requests: Optional[int] = typer.Option(None, "--num-requests", help=NUM_REQUESTS_HELP),
        max_tokens: int = typer.Option(8192, "--max-tokens", help=MAX_TOKENS_HELP),
        source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
        workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
        executor: str = typer.Option("local", "--executor",
                                     help="local (processes) or ray (a Ray cluster; needs the "
                                          "ray extra)"),
        address: Optional[str] = typer.Option(None, "--address",
                                              help="Ray cluster address (ray executor; "
                                                   "default: a local Ray instance)"),
        history: Optional[str] = typer.Option(None, "--history", help=HISTORY_HELP),
        prefix_caching: bool = typer.Option(True, "--prefix-caching/--no-prefix-caching",
                                            help=PREFIX_HELP),
        capped_outputs: str = typer.Option("keep", "--capped-outputs", help=CAPPED_HELP),
        calibration: Optional[str] = calibration_option(),
        vllm_version: Optional[str] = vllm_version_option(),
    ) -> None:
        """Predict every model x corpus; write sweep.parquet, sweep.csv and speedup_per_k.png."""
        from simkit.catalog.models import list_models
        from simkit.engine.config import parse_configs
        from simkit.app.sweep import sweep as run_sweep
        from simkit.checks import output_dir, positive_int
        from traces.corpora import list_corpora

        from simkit.serving_checks import check_serving

        parse_configs(configs)                       # fail fast on a bad config string
        vllm_version = pick_vllm_version(vllm_version)
        positive_int(num_requests, "num-requests")
        positive_int(seeds, "seeds")
        positive_int(workers, "workers")
        positive_int(concurrency, "concurrency")
        positive_int(max_tokens, "max-tokens")
        check_serving(max_tokens=max_tokens)         # vLLM's refusals (TP: chosen per model)
        output_dir(out, "out")
        if executor not in ("local", "ray"):
            from simkit.errors import InputError

            raise InputError(f"unknown executor '{executor}' (local, ray)", field="executor")
        if executor == "ray":                        # simkit.executors.ray_sweep
            from simkit.executors.ray_sweep import sweep_ray as run_sweep
        model_list = _split(models, list_models())
        corpus_list = _split(corpora, list_corpora())
        for opt, items in (("models", model_list), ("corpora", corpus_list)):
            if not items:
                from simkit.errors import InputError

                raise InputError("no names given (a comma list, or all)", field=opt)
        from simkit.errors import UnknownNameError

        for kind, items, known in (("model", model_list, list_models()),
                                   ("corpus", corpus_list, list_corpora())):
            for item in items:                       # every name checked before any cell runs
                if item not in known:
                    raise UnknownNameError(kind, item, known)
        extra = {"address": address, "num_cpus": workers} if executor == "ray" else \
            {"workers": workers}
        with _progress("sweep") as prog:
            res = run_sweep(model_list, corpus_list, out, progress=prog, **extra,
                            configs=configs, hardware=hardware, concurrency=concurrency,
                            seeds=seeds, num_requests=num_requests, max_tokens=max_tokens,
                            source=source, history=history,
                            prefix_caching=prefix_caching, capped_outputs=capped_outputs,
                            calibration=calibration, vllm_version=vllm_version)
        from simkit.outfiles import wrote

        not_written = res.get("not_written", {})
        if not not_written:
            typer.echo(f"{res['cells']} cells, {res['rows']} rows -> {res['out']}/sweep.parquet, "
                       f"sweep.csv, speedup_per_k.png")
        else:                                        # name only what is really there
            typer.echo(f"{res['cells']} cells, {res['rows']} rows -> "
                       + (", ".join(res.get("written", [])) or "nothing written"))
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
