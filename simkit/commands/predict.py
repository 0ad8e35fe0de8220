"""`simkit predict` (one model x corpus, the whole ladder) and `simkit sweep` (a grid of them)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from typing import Optional

import typer

DEFAULT_CONFIGS = "vanilla,suffix,kpad:4,6,8,12,dynamic"


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


def _fmt(v, spec: str, none: str = "-") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return none
    return format(v, spec)


def render_table(pred) -> str:
    """The human-readable ladder: header, one row per config, then the best-K verdict."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=170, color_system=None, force_terminal=False)
    console.print(f"model {pred.model} | hardware {pred.hardware} (cost model: {pred.cost_label})"
                  f" | TP {pred.tp}")
    corpus = f"corpus {pred.corpus} | workload: {pred.origin or 'unknown origin'}"
    if pred.proxy_note:
        corpus += f" | proxy: {pred.proxy_note}"
    console.print(corpus)
    window = ("C-th completion .. last submission" if pred.load.startswith("closed")
              else "arrival at 10% .. last arrival")
    if pred.steady_window:
        console.print(f"{pred.load}, {pred.num_requests} requests, {pred.seeds} seed(s); "
                      f"steady window = {window}")
    else:
        console.print(f"{pred.load}, {pred.num_requests} requests, {pred.seeds} seed(s); NO steady "
                      f"window (too few requests): * rows are whole-run rates; --num-requests "
                      f"{pred.suggested_num_requests} gives one")
    table = Table(show_edge=False, pad_edge=False)
    for col, just in (("config", "left"), ("K", "right"), ("tok/s", "right"), ("±std", "right"),
                      ("speedup", "right"), ("FULL", "right"), ("PIECEW", "right"),
                      ("NONE", "right"), ("acc/step", "right"), ("tok/step", "right"),
                      ("host", "right"), ("TPOT p50", "right"), ("TTFT p50", "right"),
                      ("ITL p99", "right"), ("waste", "right"), ("preempt", "right")):
        table.add_column(col, justify=just)
    for r in pred.rows:
        d = r.details
        ks = r.details.get("ks")
        table.add_row(r.config + ("" if r.steady_window else " *"), ks if ks else str(r.k),
                      _fmt(r.output_tok_s, ",.0f"),
                      _fmt(r.output_tok_s_std, ",.0f"),
                      _fmt(r.speedup_vs_vanilla, ".2f") + ("x" if r.speedup_vs_vanilla else ""),
                      _fmt(r.full_graph_frac, ".0%"), _fmt(d["piecewise_steps_frac"], ".0%"),
                      _fmt(d["none_steps_frac"], ".0%"), _fmt(r.mean_accepted, ".2f"),
                      _fmt(d["tokens_per_step"], ".2f"), _fmt(r.host_frac, ".0%"),
                      _fmt(r.tpot_ms_p50, ".2f") + " ms", _fmt(r.ttft_ms_p50, ".0f") + " ms",
                      _fmt(d["itl_ms_p99"], ".1f") + " ms", _fmt(d["padded_token_waste"], ".0%"),
                      _fmt(d["preemptions"], ".0f"))
    console.print(table)
    for name, reason in pred.unavailable.items():
        console.print(f"{name}: unavailable — {reason}")
    skipped = {k: v for k, v in pred.skipped.items() if v}
    if skipped:
        console.print("skipped profile requests: " +
                      ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())))
    if pred.best_k is not None:
        console.print(f"best K (K-pad): {pred.best_k}")
    if pred.dynamic_verdict:
        console.print(f"dynamic-K: {pred.dynamic_verdict}")
    console.print(f"best: {pred.why}")
    return buf.getvalue()


def render_csv(pred) -> str:
    from simkit.engine.predict import RESULT_KEYS

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["model", "corpus", "hardware", "tp", *RESULT_KEYS])
    for r in pred.rows:
        d = r.result_dict()
        writer.writerow([pred.model, pred.corpus, pred.hardware, pred.tp,
                         *("" if d[k] is None else d[k] for k in RESULT_KEYS)])
    return buf.getvalue()


def plot_prediction(pred, path: str) -> None:
    """Bar chart of predicted tok/s per config with the seed spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(pred.rows) + 2), 3.6))
    names = [r.config for r in pred.rows]
    ax.bar(names, [r.output_tok_s for r in pred.rows],
           yerr=[r.output_tok_s_std for r in pred.rows], color="#4c72b0", capsize=3)
    for i, r in enumerate(pred.rows):
        if r.speedup_vs_vanilla:
            ax.annotate(f"{r.speedup_vs_vanilla:.2f}x", (i, r.output_tok_s + r.output_tok_s_std),
                        xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                        fontsize=7)
    ax.set_ylabel("output tok/s (steady state)")
    ax.margins(y=0.12)
    ax.set_title(f"{pred.model} / {pred.corpus} on {pred.hardware} TP{pred.tp} "
                 f"({pred.cost_label})", fontsize=9)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def _split(text: str, all_values: list[str]) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    return list(all_values) if items == ["all"] else items


def register(app: typer.Typer) -> None:
    """Add `predict` and `sweep` to the root app."""

    @app.command()
    def predict(
        model: str = typer.Option(..., "--model", help="catalogue model id (simkit models list)"),
        corpus: str = typer.Option(..., "--corpus", help="corpus name, e.g. mix, chat, code"),
        hardware: str = typer.Option("h200", "--hardware"),
        tp: Optional[int] = typer.Option(None, "--tp", help="tensor parallel (default: smallest that fits)"),
        concurrency: int = typer.Option(32, "--concurrency", help="closed-loop clients"),
        max_tokens: int = typer.Option(8192, "--max-tokens"),
        configs: str = typer.Option(DEFAULT_CONFIGS, "--configs",
                                    help="e.g. vanilla,suffix,kpad:4,6,8,12,ngram,dynamic"),
        seeds: int = typer.Option(3, "--seeds", help="request orders simulated per config"),
        num_requests: Optional[int] = typer.Option(None, "--num-requests"),
        fmt: str = typer.Option("table", "--format", help="table, json or csv"),
        plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG bar chart here"),
        max_num_seqs: int = typer.Option(1024, "--max-num-seqs"),
        max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens"),
        cudagraph_mode: str = typer.Option("FULL_AND_PIECEWISE", "--cudagraph-mode"),
        cost_profile: Optional[str] = typer.Option(None, "--cost-profile",
                                                   help="calibrated cost-model profile"),
        source: str = typer.Option("auto", "--source", help="auto (raw traces when present, else shipped), raw or shipped"),
        workers: Optional[int] = typer.Option(None, "--workers", help="local processes"),
        request_rate: Optional[float] = typer.Option(
            None, "--request-rate", help="open loop: Poisson arrivals (req/s) instead of clients"),
    ) -> None:
        """Predict the configuration ladder (tok/s, speedup, graph shares, best K) for one cell."""
        from simkit.checks import output_file, positive_int, positive_rate
        from simkit.engine.predict import predict as run_predict
        from simkit.errors import InputError

        if fmt not in ("table", "json", "csv"):
            raise InputError(f"unknown format '{fmt}' (table, json, csv)", field="format")
        positive_int(num_requests, "num-requests")
        positive_int(workers, "workers")
        positive_rate(request_rate, "request-rate")
        output_file(plot, "plot")                    # before the work, not after it
        with _progress(f"{model}/{corpus}") as prog:
            pred = run_predict(model, corpus, hardware=hardware, tp=tp, concurrency=concurrency,
                               max_tokens=max_tokens, configs=configs, seeds=seeds,
                               num_requests=num_requests, max_num_seqs=max_num_seqs,
                               max_num_batched_tokens=max_num_batched_tokens,
                               cudagraph_mode=cudagraph_mode, cost_profile=cost_profile,
                               source=source, workers=workers, request_rate=request_rate,
                               progress=prog)
        if fmt == "json":
            typer.echo(json.dumps(pred.to_json_dict(), indent=2))
        elif fmt == "csv":
            typer.echo(render_csv(pred), nl=False)
        else:
            typer.echo(render_table(pred), nl=False)
        if plot:
            plot_prediction(pred, plot)

    @app.command()
    def sweep(
        out: str = typer.Option(..., "--out", help="output folder"),
        models: str = typer.Option("all", "--models", help="comma list or all"),
        corpora: str = typer.Option("all", "--corpora", help="comma list or all"),
        configs: str = typer.Option(DEFAULT_CONFIGS, "--configs"),
        hardware: str = typer.Option("h200", "--hardware"),
        concurrency: int = typer.Option(32, "--concurrency"),
        seeds: int = typer.Option(1, "--seeds"),
        num_requests: Optional[int] = typer.Option(None, "--num-requests"),
        max_tokens: int = typer.Option(8192, "--max-tokens"),
        source: str = typer.Option("auto", "--source"),
        workers: Optional[int] = typer.Option(None, "--workers"),
        executor: str = typer.Option("local", "--executor",
                                     help="local (processes, default) or ray"),
        address: Optional[str] = typer.Option(None, "--address",
                                              help="Ray cluster address (ray executor; "
                                                   "default: a local Ray instance)"),
    ) -> None:
        """Predict every model x corpus; write sweep.parquet, sweep.csv and speedup_per_k.png."""
        from simkit.catalog.models import list_models
        from simkit.engine.config import parse_configs
        from simkit.engine.sweep import sweep as run_sweep
        from simkit.checks import output_dir, positive_int
        from traces.corpora import list_corpora

        parse_configs(configs)                       # fail fast on a bad config string
        positive_int(num_requests, "num-requests")
        positive_int(seeds, "seeds")
        positive_int(workers, "workers")
        positive_int(concurrency, "concurrency")
        output_dir(out, "out")
        if executor not in ("local", "ray"):
            from simkit.errors import InputError

            raise InputError(f"unknown executor '{executor}' (local, ray)", field="executor")
        if executor == "ray":                        # simkit.executors.ray_sweep (issue 7)
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
                            source=source)
        typer.echo(f"{res['cells']} cells, {res['rows']} rows -> {res['out']}/sweep.parquet, "
                   f"sweep.csv, speedup_per_k.png")
        for cell, err in sorted(res["failed"].items()):
            typer.echo(f"not run: {cell}: {err}", err=True)
        if res["failed"]:                            # the others are written; the run failed
            typer.echo(f"error: {len(res['failed'])} of {res['cells']} cells failed", err=True)
            raise typer.Exit(1)
