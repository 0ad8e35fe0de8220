"""`simkit whatif ...`: capacity, hardware, host, concurrency, ktable, vllm-version,
quantization, prefix, reference, history.

Every subcommand prints a table (or JSON with --format json) and writes a PNG with --plot PATH.
Heavy imports stay inside the command bodies."""

from __future__ import annotations

import json
from typing import Annotated, NamedTuple, Optional

import typer

from simkit.commands.options import OUTPUT as OUTPUT_PANEL
from simkit.app.options import Goals, RunOptions
from simkit.choices import OutputFormat
from simkit.commands.options import (TpotGoal, TtftGoal, Wide, comma_list, deprecated_alias,
                                     format_option, pick_alias, run_command, run_options,
                                     turned_off)
from simkit.engine.config import FIXED_K_CONFIGS, WHATIF_CONFIGS

whatif_app = typer.Typer(help="Capacity-planning what-ifs on the simulator, and the reference "
                              "study reproduced.", no_args_is_help=True)

Format = format_option(rich_help_panel=OUTPUT_PANEL)
Plot = Annotated[Optional[str], typer.Option("--plot", help="write a PNG plot to this path "
                                             "(default: no plot)", rich_help_panel=OUTPUT_PANEL)]
OUTPUT = {"fmt": (Format, OutputFormat.TABLE), "plot": (Plot, None), "wide": (Wide, False)}
# the what-ifs' own list options (simkit.commands.options.comma_list)
Targets = comma_list("--targets", "hardware names or JSON paths")
Tps = comma_list("--tps", "TP degrees to try (default: each hardware's smallest TP that fits)")
Factors = comma_list("--factors", "host speed factors (1 and 2 are always added)")
Levels = comma_list("--levels", "concurrency levels (closed-loop clients)")
Ks = comma_list("--ks", "the K set to choose from at each level, each run as suffix:K (0 = no "
                "speculation)")
LevelKs = comma_list("--ks", "vLLM 0.34: the K set whose best K per level is named, each run as "
                     "suffix:K, 0 = vanilla (default there: 0,2,4,8,12,16; refused on 0.26/0.33)")
Preamble = comma_list("--preamble", "shared preamble lengths (tokens) put in front of every "
                      "prompt")
Shares = comma_list("--shares", "shares P in [0, 1] of requests already served (repeat:P)")
StudyModels = comma_list("--model", "models (default: the 11 study models)")
BestKModels = comma_list("--best-k-models", "models for the --best-k pattern")
Histories = comma_list("--history", "request histories (warm, cold, hot, repeat:P), one column "
                       "set each: an assumption, never fitted (default: each profile's own)")


def whatif_command(name: str, *, without: tuple[str, ...] = (), **defaults):
    """Register a what-if: its own options, then the shared run options (simkit.commands.options
    run_command: every what-if takes the same ones, less those its question varies itself, in
    `without`), then --format, --plot and --wide."""
    defaults = {"model": "llama-3.1-8b", "corpus": "mix", "hardware": "h200",
                "configs": WHATIF_CONFIGS, **defaults}

    def wrap(fn):
        return whatif_app.command(name)(run_command(without=without, extra=OUTPUT,
                                                    **defaults)(fn))

    return wrap


PERCENT_COLUMNS = ("_err", "gain", "vs_best_k", "host_frac", "vs_first", "vs_factor", "vs_from")


def _fmt(v, col: str = "") -> str:
    if isinstance(v, float) and v == v and col.startswith("table_vs_"):   # ratios: +x.x %
        return f"{v - 1:+.1%}"
    if isinstance(v, float) and v == v and any(p in col for p in PERCENT_COLUMNS):
        return f"{v - 1:+.1%}" if col.startswith("vs_") else (
            f"{v:.0%}" if col.startswith("host_frac") else f"{v:+.1%}")
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) and abs(v) >= 1000:
        return f"{v:,}"
    if isinstance(v, float):
        if v != v:
            return "-"
        a = abs(v)
        if a >= 100:
            return f"{v:,.0f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


LEFT_COLUMNS = ("config", "hardware", "binding", "model", "lever", "to_config")


def render(result, wide: bool = False) -> str:
    """A WhatIfResult as a text table plus its notes, every line at most 100 characters: headers
    wrap at their words, and columns that still do not fit are named under the table (`wide`:
    every column, headers as in JSON)."""
    from simkit.report.fit import keyed_table

    cells = [[_fmt(row.get(c), c) for c in result.columns] for row in result.rows]
    lines = [*_wrap(f"whatif {result.name}: {result.question}"),
             *keyed_table(result.columns, cells, LEFT_COLUMNS, wide)]
    for note in result.notes:
        lines.extend(_wrap(f"- {note}", "  "))
    return "\n".join(lines) + "\n"


def _wrap(text: str, indent: str = "") -> list[str]:
    import textwrap

    from simkit.report.fit import WIDTH

    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]


def check_plot(plot: Optional[str]) -> None:
    """Fail before any simulation when the plot path cannot be written (Typer has refused an
    unknown --format)."""
    from simkit.checks import output_file

    output_file(plot, "plot")


# the what-ifs' own counts and rates (the shared run options' are run_options')
_COUNTS = ("min_requests", "max_requests")
_RATES = {"target_rate": "target-rate", "target_tok_s": "target-tok-s", "ttft": "ttft-p99-ms",
          "tpot": "tpot-p99-ms", "host_factor": "host-factor", "rel_tol": "rel-tol"}


def check_numbers(options: dict) -> None:
    """Refuse nonsense counts (< 1) and rates (0, negative, nan, inf) among a command's options
    (its parameters by name) before any simulation, one line naming the option."""
    from simkit.checks import positive_int, positive_rate

    for name in _COUNTS:
        if options.get(name) is not None:
            positive_int(options[name], name.replace("_", "-"))
    for name, option in _RATES.items():
        if options.get(name) is not None:
            positive_rate(options[name], option)


def whatif_options(params: dict) -> tuple[RunOptions, dict, Output]:
    """A what-if command's options (its locals: its own options and the shared ones in `run`)
    checked before any work: (the run settings, through simkit.commands.options.run_options;
    the what-if function's own keyword arguments; how to print it)."""
    own = {k: v for k, v in params.items() if k != "run"}
    run = dict(params["run"])
    fmt, plot, wide = run.pop("fmt"), run.pop("plot"), run.pop("wide")
    check_plot(plot)
    check_numbers(own)
    opts = run_options(run)
    if "configs" in run:
        own["configs"] = run["configs"]
    return opts, own, Output(fmt, plot, wide)


class Output(NamedTuple):
    """How a what-if prints: --format, --plot (None: no plot) and --wide."""

    fmt: OutputFormat
    plot: Optional[str]
    wide: bool = False


def emit(result, out: Output, plot_fn) -> None:
    """Print in the requested format (`out.wide`: the table with every column), then write the
    plot if asked (printed first, so a plot that fails cannot take the results with it); exit 1
    when any point failed."""
    if out.fmt is OutputFormat.JSON:
        typer.echo(json.dumps(result.to_json_dict(), indent=1))
    else:
        typer.echo(render(result, out.wide).rstrip())
    if out.plot:
        from simkit.outfiles import wrote

        plot_fn(result, out.plot)
        wrote(out.plot)
    fail_on_errors(result)


def fail_on_errors(result) -> None:
    """Name every failed point (result.failures) on stderr and exit 1 when there is one."""
    for line in result.failures:
        typer.echo(f"failed: {line}", err=True)
    n = len(result.failures)
    if n:
        typer.echo(f"error: {n} requested point(s) failed", err=True)
        raise typer.Exit(1)


@whatif_command("capacity", without=("concurrency", "num_requests"))
def capacity_cmd(
    target_rate: Optional[float] = typer.Option(
        None, "--target-rate", help="req/s to serve (default: 20 when --target-tok-s is unset)"),
    target_tok_s: Optional[float] = typer.Option(
        None, "--target-tok-s", help="output tok/s to serve instead of a request rate "
        "(default: unset)"),
    ttft: TtftGoal = Goals.ttft_ms_p99,
    tpot: TpotGoal = Goals.tpot_ms_p99,
    min_requests: int = typer.Option(128, "--min-requests",
                                     help="requests per open-loop run at least"),
    max_requests: int = typer.Option(5000, "--max-requests",
                                     help="requests per open-loop run at most; a rate that needs "
                                          "more is not simulated"),
    rel_tol: float = typer.Option(0.05, "--rel-tol", help="bisection stops at hi/lo <= 1+tol"),
    **run,
) -> None:
    """Replicas and GPUs to serve a target under p99 TTFT/TPOT goals (default target: 20 req/s).
    Open loop: the request rate, not --concurrency, sets the load."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import capacity as C

    goals = Goals(kwargs.pop("ttft"), kwargs.pop("tpot"))
    if target_rate is None and target_tok_s is None:
        kwargs["target_rate"] = 20.0
    from simkit.engine.fast import may_take
    from simkit.engine.fast.background import compiling

    # the engine's kernels compile while the tables load (fresh install; versions it runs)
    with compiling(may_take(run.vllm_version)):
        result = C.capacity(run, goals=goals, **kwargs)
    emit(result, out, C.plot)


@whatif_command("hardware", without=("hardware", "tp"), model="llama-3.1-70b")
def hardware_cmd(
    targets: Targets = "h100,h200,b200",
    tps: Tps = None,
    **run,
) -> None:
    """The same model and traffic on other GPUs (H100/H200/B200) or TP degrees."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import hardware as H

    emit(H.hardware(run, **kwargs), out, H.plot)


@whatif_command("host", hardware="b200")
def host_cmd(
    factors: Factors = "0.5,0.75,1,1.5,2,4",
    **run,
) -> None:
    """Host-CPU speed sweep: which configurations are host-bound."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import host as H

    emit(H.host(run, **kwargs), out, H.plot)


@whatif_command("concurrency", without=("concurrency", "num_requests"))
def concurrency_cmd(
    levels: Levels = "1,2,4,8,16,32,64,128,256",
    min_requests: int = typer.Option(32, "--min-requests",
                                     help="requests per run at least (each level runs what "
                                          "simkit predict runs there when that is more)"),
    ks: LevelKs = None,
    **run,
) -> None:
    """Throughput and latency vs concurrency; where speculative decoding stops paying (vLLM
    0.34: the best K of a K set at each level)."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import concurrency as C
    from simkit.engine.fast import may_take
    from simkit.engine.fast.background import compiling

    # the engine's kernels compile while the tables load (fresh install; versions it runs)
    with compiling(may_take(run.vllm_version)):
        result = C.concurrency(run, **kwargs)
    emit(result, out, C.plot)


@whatif_command("quantization", model="llama-3.1-70b", hardware="b200")
def quantization_cmd(
    weight_bytes_factor: Optional[float] = typer.Option(
        None, "--weight-bytes-factor", help="linear-weight bytes multiplier (default NVFP4)"),
    flop_speedup: Optional[float] = typer.Option(
        None, "--flop-speedup", help="linear-layer FLOP speed-up (default FP4 peak ratio)"),
    acceptance_scale: float = typer.Option(0.9, "--acceptance-scale",
                                           help="accepted lengths x this (assumption)"),
    quant_corpus: Optional[str] = typer.Option(
        None, "--quant-corpus", help="corpus of the quantized model's outputs (replaces the scale; "
        "default: none, the scale is used)"),
    **run,
) -> None:
    """W4A4: faster arithmetic and changed acceptance, with the output-equivalence caution."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import quantization as Q

    emit(Q.quantization(run, **kwargs), out, Q.plot)


@whatif_command("prefix", without=("prefix_caching",))
def prefix_cmd(
    preamble: Preamble = "0,500,2000",
    **run,
) -> None:
    """A longer shared system prompt (agent tool preamble): prefix caching on vs off."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import prefix as PX

    emit(PX.prefix(run, **kwargs), out, PX.plot)


@whatif_command("reference", without=("corpus", "tp", "configs", "concurrency",
                                      "max_tokens", "capped_outputs", "prefix_caching",
                                      "max_num_seqs", "max_num_batched_tokens",
                                      "cudagraph_mode"),
                hardware="b200")
def reference_cmd(
    model: StudyModels = None,
    models: deprecated_alias("--models", "--model") = None,
    host_factor: float = typer.Option(1.0, "--host-factor", help="x the host's assumed speed"),
    best_k: bool = typer.Option(False, "--best-k", help="also the best-K pattern (mix/chat/code)"),
    best_k_models: BestKModels = "llama-3.1-8b",
    assumptions: bool = typer.Option(False, "--assumptions",
                                     help="also the error vs host factor, TP and calibration"),
    history: Histories = None,
    **run,
) -> None:
    """The reference study reproduced: predicted vs published, with errors (under the study's
    own conditions: the mix corpus, concurrency 32, max_tokens 8,192, each model's TP)."""
    run = dict(run)
    out = Output(run.pop("fmt"), run.pop("plot"), run.pop("wide"))
    fmt, plot = out.fmt, out.plot
    check_plot(plot)
    check_numbers(locals())
    opts = run_options(run)
    from simkit.history import split_histories
    from simkit.reference import patterns
    from simkit.reference.plot import plot as ref_plot
    from simkit.reference.reproduce import reproduce

    models = pick_alias(model, models, "--model", "--models")
    names = [m.strip() for m in models.split(",") if m.strip()] if models else None
    hist = split_histories(history)
    if len(hist) > 1:
        from simkit.reference.reproduce import reproduce_histories

        emit(reproduce_histories(hist, opts, models=names, host_factor=host_factor), out,
             _history_ref_plot)
        return
    if hist:
        opts = opts.but(history=hist[0])
    res = reproduce(opts, models=names, host_factor=host_factor)
    extra = []
    if best_k:
        extra.append(patterns.best_k_pattern(opts, models=best_k_models.split(",")))
    if assumptions:
        pub = [r["model"] for r in res.rows if r["published"]]
        extra.append(patterns.assumption_sweep(opts, models=pub or None))
    if fmt is OutputFormat.JSON:
        doc = res.to_json_dict()
        doc["sections"] = [e.to_json_dict() for e in extra]
        typer.echo(json.dumps(doc, indent=1))
        if plot:                                     # after the results, as in emit
            from simkit.outfiles import wrote

            ref_plot(res, plot)
            wrote(plot)
        return
    emit(res, out, ref_plot)
    for e in extra:
        typer.echo("")
        typer.echo(render(e, out.wide).rstrip())


def _history_ref_plot(result, path) -> None:
    """Predicted final/van(OFF) ratio per model and history beside the published ratio."""
    from simkit.plotting import plt_agg, save_png

    plt = plt_agg()
    hist = result.params["histories"]
    models = [r["model"] for r in result.rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(models) + 2), 3.8))
    width = 0.8 / (len(hist) + 1)
    for j, h in enumerate(hist):
        ax.bar([i + j * width for i in range(len(models))],
               [r[f"ratio_{h}"] or 0 for r in result.rows], width, label=f"predicted, {h}")
    ax.bar([i + len(hist) * width for i in range(len(models))],
           [r["ratio_pub"] or 0 for r in result.rows], width, color="k", label="published")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))])
    ax.set_xticklabels(models, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("final / van(OFF)")
    ax.legend(fontsize=7)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)


@whatif_command("history", without=("history",), configs=FIXED_K_CONFIGS)
def history_cmd(
    shares: Shares = "0,0.1,0.25,0.5,0.75,1",
    warm: bool = typer.Option(False, "--no-warm", callback=turned_off, show_default=False,
                              help="leave out the warm stream (default: shown, the whole corpus "
                              "served before)"),   # the flag's default; warm is True unless given
    **run,
) -> None:
    """Throughput vs the share of requests already served: where speculation starts to pay
    (--configs must include vanilla)."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import history as Hi

    emit(Hi.history(run, **kwargs), out, Hi.plot)


@whatif_command("ktable", without=("concurrency", "configs", "vllm_version"))
def ktable_cmd(
    levels: Levels = "8,32,64,128",
    ks: Ks = "0,2,4,8,12,16",
    min_requests: int = typer.Option(128, "--min-requests",
                                     help="requests per run at least (4 x the level when that "
                                          "is more; --num-requests sets it for every level)"),
    **run,
) -> None:
    """vLLM 0.34's K per batch-size range derived from your traffic, against the best static K.

    The best K at each level, the table, and the table simulated at every level (few requests
    per level by default, for run time: --min-requests, --seeds)."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import batch_size_table as B

    emit(B.batch_size_table(run.but(vllm_version=B.TABLE_VERSION), **kwargs), out, B.plot)


@whatif_command("vllm-version", without=("vllm_version", "calibration", "cost_profile"))
def vllm_version_cmd(
    from_version: str = typer.Option("0.33", "--from", help="the vLLM version you run now"),
    to_version: str = typer.Option("0.34", "--to", help="the vLLM version you upgrade to"),
    **run,
) -> None:
    """What a vLLM upgrade does to each configuration, and the settings to change.

    Throughput and latency per configuration on both versions, the best on each, each version
    with its own calibration and its measured error (or none where it is unmeasured)."""
    run, kwargs, out = whatif_options(locals())
    from simkit.whatif import vllm_version as V

    emit(V.vllm_version(run, **kwargs), out, V.plot)


def register(app: typer.Typer) -> None:
    """Add the `whatif` group (the Ray sweep is `simkit sweep --executor ray`)."""
    app.add_typer(whatif_app, name="whatif")
