"""`simkit whatif ...`: capacity, hardware, host, concurrency, quantization, reference.

Every subcommand prints a table (or JSON with --format json) and writes a PNG with --plot PATH.
Heavy imports stay inside the command bodies."""

from __future__ import annotations

import json
from typing import Optional

import typer

from simkit.commands.options import (WIDE_OPTION, calibration_option, cost_profile_option,
                                     pick_calibration, pick_vllm_version, vllm_version_option)
from simkit.engine.config import FIXED_K_CONFIGS, WHATIF_CONFIGS

whatif_app = typer.Typer(help="Capacity-planning what-ifs on the simulator, and the reference "
                              "study reproduced.", no_args_is_help=True)

FORMAT = typer.Option("table", "--format", help="output format: table or json")
PLOT = typer.Option(None, "--plot", help="write a PNG plot to this path (default: no plot)")
WORKERS = typer.Option(None, "--workers", help="local worker processes (default: all cores)")
SEEDS_HELP = "seeds per point (results are means over seeds)"
# options every what-if shares, declared once (Typer reads them as each command's defaults)
CORPUS = typer.Option("mix", "--corpus", help="corpus name (simkit traces list)")
HARDWARE_HELP = "hardware id: h100, h200, b200 (simkit hardware list) or a hardware JSON path"
MODEL_HELP = "catalogue model id (simkit models list)"
TP = typer.Option(None, "--tp", help="TP degree (default: the smallest that fits)")
CONFIGS = typer.Option(WHATIF_CONFIGS, "--configs",
                       help="configurations, comma list (as simkit predict --configs)")
SEEDS = typer.Option(1, "--seeds", help=SEEDS_HELP)
CONCURRENCY = typer.Option(32, "--concurrency", help="closed-loop clients")
NUM_REQUESTS = typer.Option(128, "--num-requests", help="requests per simulated run")
CAPPED = typer.Option("keep", "--capped-outputs", help="keep | extend: requests whose trace "
                      "output stopped at its source's generation cap end there (keep) or continue "
                      "to 8,192 tokens repeating their own acceptance (extend; docs/engine.md)")
HISTORY = typer.Option(None, "--history", help="request history: warm, cold, hot, repeat:P"
                       "[,diverge:M] (what the server served before; default: the workload "
                       "profile's own)")
CALIBRATION = calibration_option()
COST_PROFILE = cost_profile_option()       # deprecated alias of --calibration
VLLM_VERSION = vllm_version_option()
WIDE = WIDE_OPTION


PERCENT_COLUMNS = ("_err", "gain", "vs_best_k", "host_frac", "vs_first", "vs_factor")


def _fmt(v, col: str = "") -> str:
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


LEFT_COLUMNS = ("config", "hardware", "binding", "model", "lever")


def render(result, wide: bool = False) -> str:
    """A WhatIfResult as a text table plus its notes, every line at most 100 characters: headers
    wrap at their words, and columns that still do not fit are named under the table (`wide`:
    every column, headers as in JSON)."""
    from simkit.report.fit import WIDE, WIDTH, fit_columns, more_columns_line, render_text_table

    cells = [[_fmt(row.get(c), c) for c in result.columns] for row in result.rows]
    heads = list(result.columns) if wide else [c.replace("_", " ") for c in result.columns]
    kept = list(range(len(heads))) if wide else fit_columns(heads, cells, WIDTH)
    table = render_text_table([heads[i] for i in kept], [[r[i] for i in kept] for r in cells],
                              left=[h for h, c in zip(heads, result.columns) if c in LEFT_COLUMNS],
                              width=WIDE if wide else WIDTH)
    lines = [*_wrap(f"whatif {result.name}: {result.question}"), table.rstrip("\n"),
             *more_columns_line([c for i, c in enumerate(result.columns) if i not in kept])]
    for note in result.notes:
        lines.extend(_wrap(f"- {note}", "  "))
    return "\n".join(lines) + "\n"


def _wrap(text: str, indent: str = "") -> list[str]:
    import textwrap

    from simkit.report.fit import WIDTH

    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]


def check_format(fmt: str, plot: Optional[str] = None) -> None:
    """Fail before any simulation when the output format is unknown or the plot path cannot
    be written."""
    from simkit.checks import output_file, output_format

    output_format(fmt)
    output_file(plot, "plot")


_COUNTS = ("seeds", "concurrency", "num_requests", "min_requests", "max_requests", "workers")
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


def whatif_options(options: dict) -> tuple[dict, str, Optional[str]]:
    """A what-if command's options checked before any work: (the what-if function's keyword
    arguments, output format, plot path), the calibration resolved from --calibration or its
    deprecated alias."""
    from simkit.serving_checks import check_serving

    kwargs = dict(options)
    fmt, plot = kwargs.pop("fmt"), kwargs.pop("plot")
    kwargs.pop("wide", None)                         # a rendering choice (emit's), not the what-if's
    check_format(fmt, plot)
    check_numbers(kwargs)
    if kwargs.get("model") is not None:              # vLLM's refusals (a TP it cannot shard)
        check_serving(kwargs["model"], kwargs.get("tp"))
    kwargs["calibration"] = pick_calibration(kwargs.get("calibration"),
                                             kwargs.pop("cost_profile", None))
    kwargs["vllm_version"] = pick_vllm_version(kwargs.get("vllm_version"))
    return kwargs, fmt, plot


def emit(result, fmt: str, plot_path: Optional[str], plot_fn, wide: bool = False) -> None:
    """Print in the requested format (`wide`: the table with every column), then write the plot
    if asked (printed first, so a plot that fails cannot take the results with it); exit 1 when
    any point failed."""
    check_format(fmt)
    if fmt == "json":
        typer.echo(json.dumps(result.to_json_dict(), indent=1))
    else:
        typer.echo(render(result, wide).rstrip())
    if plot_path:
        from simkit.outfiles import wrote

        plot_fn(result, plot_path)
        wrote(plot_path)
    fail_on_errors(result)


def fail_on_errors(result) -> None:
    """Name every failed point (result.failures) on stderr and exit 1 when there is one."""
    for line in result.failures:
        typer.echo(f"failed: {line}", err=True)
    n = len(result.failures)
    if n:
        typer.echo(f"error: {n} requested point(s) failed", err=True)
        raise typer.Exit(1)


@whatif_app.command("capacity")
def capacity_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    target_rate: Optional[float] = typer.Option(
        None, "--target-rate", help="req/s to serve (default: 20 when --target-tok-s is unset)"),
    target_tok_s: Optional[float] = typer.Option(
        None, "--target-tok-s", help="output tok/s to serve instead of a request rate "
        "(default: unset)"),
    ttft: float = typer.Option(2000.0, "--ttft-p99-ms", help="p99 TTFT goal (ms)"),
    tpot: float = typer.Option(50.0, "--tpot-p99-ms", help="p99 TPOT goal (ms)"),
    configs: str = CONFIGS,
    seeds: int = SEEDS,
    min_requests: int = typer.Option(128, "--min-requests",
                                     help="requests per open-loop run at least"),
    max_requests: int = typer.Option(5000, "--max-requests",
                                     help="requests per open-loop run at most; a rate that needs "
                                          "more is not simulated"),
    rel_tol: float = typer.Option(0.05, "--rel-tol", help="bisection stops at hi/lo <= 1+tol"),
    history: Optional[str] = HISTORY,
    capped_outputs: str = CAPPED,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """Replicas and GPUs to serve a target under p99 TTFT/TPOT goals (default target: 20 req/s)."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import capacity as C

    goals = C.Goals(kwargs.pop("ttft"), kwargs.pop("tpot"))
    if target_rate is None and target_tok_s is None:
        kwargs["target_rate"] = 20.0
    emit(C.capacity(goals=goals, **kwargs), fmt, plot, C.plot, wide)


@whatif_app.command("hardware")
def hardware_cmd(
    model: str = typer.Option("llama-3.1-70b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    targets: str = typer.Option("h100,h200,b200", "--targets",
                                help="comma list of hardware names or JSON paths"),
    tps: Optional[str] = typer.Option(None, "--tps", help="comma list of TP degrees to try (default: each hardware's "
                                 "smallest TP that fits)"),
    configs: str = CONFIGS,
    concurrency: int = CONCURRENCY,
    seeds: int = SEEDS,
    num_requests: int = NUM_REQUESTS,
    history: Optional[str] = HISTORY,
    capped_outputs: str = CAPPED,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """The same model and traffic on other GPUs (H100/H200/B200) or TP degrees."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import hardware as H

    emit(H.hardware(**kwargs), fmt, plot, H.plot, wide)


@whatif_app.command("host")
def host_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("b200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    factors: str = typer.Option("0.5,0.75,1,1.5,2,4", "--factors",
                                help="host speed factors (1 and 2 are always added)"),
    configs: str = CONFIGS,
    concurrency: int = CONCURRENCY,
    seeds: int = SEEDS,
    num_requests: int = NUM_REQUESTS,
    history: Optional[str] = HISTORY,
    capped_outputs: str = CAPPED,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """Host-CPU speed sweep: which configurations are host-bound."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import host as H

    emit(H.host(**kwargs), fmt, plot, H.plot, wide)


@whatif_app.command("concurrency")
def concurrency_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    levels: str = typer.Option("1,2,4,8,16,32,64,128,256", "--levels",
                               help="comma list of concurrency levels (closed-loop clients)"),
    configs: str = CONFIGS,
    seeds: int = SEEDS,
    min_requests: int = typer.Option(32, "--min-requests",
                                     help="requests per run at least (runs use 4 x the level "
                                          "when that is more)"),
    history: Optional[str] = HISTORY,
    capped_outputs: str = CAPPED,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """Throughput and latency vs concurrency; where speculative decoding stops paying."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import concurrency as C

    emit(C.concurrency(**kwargs), fmt, plot, C.plot, wide)


@whatif_app.command("quantization")
def quantization_cmd(
    model: str = typer.Option("llama-3.1-70b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("b200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    weight_bytes_factor: Optional[float] = typer.Option(
        None, "--weight-bytes-factor", help="linear-weight bytes multiplier (default NVFP4)"),
    flop_speedup: Optional[float] = typer.Option(
        None, "--flop-speedup", help="linear-layer FLOP speed-up (default FP4 peak ratio)"),
    acceptance_scale: float = typer.Option(0.9, "--acceptance-scale",
                                           help="accepted lengths x this (assumption)"),
    quant_corpus: Optional[str] = typer.Option(
        None, "--quant-corpus", help="corpus of the quantized model's outputs (replaces the scale; "
        "default: none, the scale is used)"),
    configs: str = CONFIGS,
    concurrency: int = CONCURRENCY,
    seeds: int = SEEDS,
    num_requests: int = NUM_REQUESTS,
    history: Optional[str] = HISTORY,
    capped_outputs: str = CAPPED,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """W4A4: faster arithmetic and changed acceptance, with the output-equivalence caution."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import quantization as Q

    emit(Q.quantization(**kwargs), fmt, plot, Q.plot, wide)


@whatif_app.command("prefix")
def prefix_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    preamble: str = typer.Option("0,500,2000", "--preamble",
                                 help="comma list of shared preamble lengths (tokens) put in "
                                      "front of every prompt"),
    configs: str = CONFIGS,
    concurrency: int = CONCURRENCY,
    seeds: int = SEEDS,
    num_requests: int = NUM_REQUESTS,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """A longer shared system prompt (agent tool preamble): prefix caching on vs off."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import prefix as PX

    emit(PX.prefix(**kwargs), fmt, plot, PX.plot, wide)


@whatif_app.command("reference")
def reference_cmd(
    models: Optional[str] = typer.Option(None, "--models",
                                         help="comma list (default: the 11 study models)"),
    hardware: str = typer.Option("b200", "--hardware", help=HARDWARE_HELP),
    host_factor: float = typer.Option(1.0, "--host-factor", help="x the host's assumed speed"),
    seeds: int = SEEDS,
    num_requests: Optional[int] = typer.Option(
        None, "--num-requests", help="per run (default: as simkit predict: the profile's "
        "count, at least 128; 1,024 on a weighted sample)"),
    best_k: bool = typer.Option(False, "--best-k", help="also the best-K pattern (mix/chat/code)"),
    best_k_models: str = typer.Option("llama-3.1-8b", "--best-k-models",
                                      help="comma list of models for the --best-k pattern"),
    assumptions: bool = typer.Option(False, "--assumptions",
                                     help="also the error vs host factor, TP and calibration"),
    history: Optional[str] = typer.Option(
        None, "--history", help="request history, or a comma list for one column set each "
        "(e.g. cold,warm,hot): an assumption, never fitted (default: each profile's own)"),
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """The reference study reproduced: predicted vs published, with errors."""
    check_format(fmt, plot)
    check_numbers(locals())
    calibration = pick_calibration(calibration, cost_profile)
    vllm_version = pick_vllm_version(vllm_version)
    from simkit.history import split_histories
    from simkit.reference import patterns
    from simkit.reference.plot import plot as ref_plot
    from simkit.reference.reproduce import reproduce

    names = [m.strip() for m in models.split(",") if m.strip()] if models else None
    hist = split_histories(history)
    if len(hist) > 1:
        from simkit.reference.reproduce import reproduce_histories

        emit(reproduce_histories(hist, names, hardware=hardware, host_factor=host_factor,
                                 seeds=seeds, num_requests=num_requests, workers=workers,
                                 calibration=calibration, vllm_version=vllm_version),
             fmt, plot, _history_ref_plot, wide)
        return
    res = reproduce(names, hardware=hardware, host_factor=host_factor, seeds=seeds,
                    num_requests=num_requests, workers=workers, calibration=calibration,
                    history=hist[0] if hist else None, vllm_version=vllm_version)
    extra = []
    if best_k:
        extra.append(patterns.best_k_pattern(best_k_models.split(","), hardware=hardware,
                                             seeds=seeds, num_requests=num_requests,
                                             workers=workers, vllm_version=vllm_version))
    if assumptions:
        pub = [r["model"] for r in res.rows if r["published"]]
        extra.append(patterns.assumption_sweep(pub or None, hardware=hardware, seeds=seeds,
                                               num_requests=num_requests, workers=workers,
                                               vllm_version=vllm_version))
    if fmt == "json":
        doc = res.to_json_dict()
        doc["sections"] = [e.to_json_dict() for e in extra]
        typer.echo(json.dumps(doc, indent=1))
        if plot:                                     # after the results, as in emit
            from simkit.outfiles import wrote

            ref_plot(res, plot)
            wrote(plot)
        return
    emit(res, fmt, plot, ref_plot, wide)
    for e in extra:
        typer.echo("")
        typer.echo(render(e, wide).rstrip())


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


@whatif_app.command("history")
def history_cmd(
    model: str = typer.Option("llama-3.1-8b", "--model", help=MODEL_HELP),
    corpus: str = CORPUS,
    hardware: str = typer.Option("h200", "--hardware", help=HARDWARE_HELP),
    tp: Optional[int] = TP,
    shares: str = typer.Option("0,0.1,0.25,0.5,0.75,1", "--shares",
                               help="shares P in [0, 1] of requests already served (repeat:P)"),
    warm: bool = typer.Option(True, "--warm/--no-warm", help="also the warm stream (the whole "
                              "corpus served before)"),
    configs: str = typer.Option(FIXED_K_CONFIGS, "--configs",
                                help="configurations (vanilla is required)"),
    concurrency: int = CONCURRENCY,
    seeds: int = SEEDS,
    num_requests: int = NUM_REQUESTS,
    calibration: Optional[str] = CALIBRATION,
    vllm_version: Optional[str] = VLLM_VERSION,
    cost_profile: Optional[str] = COST_PROFILE,
    workers: Optional[int] = WORKERS, fmt: str = FORMAT, plot: Optional[str] = PLOT,
    wide: bool = WIDE,
) -> None:
    """Throughput vs the share of requests already served: where speculation starts to pay."""
    kwargs, fmt, plot = whatif_options(locals())
    from simkit.whatif import history as Hi

    emit(Hi.history(**kwargs), fmt, plot, Hi.plot, wide)


def register(app: typer.Typer) -> None:
    """Add the `whatif` group (the Ray sweep is `simkit sweep --executor ray`)."""
    app.add_typer(whatif_app, name="whatif")
