"""The command-line options every run command shares, each defined once.

predict, sweep, fleet plan and the what-ifs declare their run settings with these types
(`seeds: Seeds = DEFAULT.seeds`), so an option has one spelling, one help text and one default
(simkit.app.options.RunOptions) everywhere, and `run_options` checks them all the same way
before any work and returns the RunOptions the application layer takes (--history parsed
there, once, into a simkit.history.History). The deprecated `--cost-profile` (the old name of
--calibration) stays as a hidden alias for one release.

List options take a comma list, a repeated option, or both: `--targets h100,h200` is
`--targets h100 --targets h200` (`comma_list` types; a run_command receives them joined into
one comma list). A command that takes several models or corpora says `--model` / `--corpus` as
predict does (sweep's old `--models` / `--corpora` are deprecated aliases, `pick_alias`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable, List, Optional, get_args, get_origin

import typer

from simkit.choices import CappedMode, Executor, OutputFormat, ProfileSource
from simkit.app.options import RunOptions
from simkit.catalog.vllm_versions import DEFAULT_VERSION, VERSIONS
from simkit.errors import InputError

DEFAULT = RunOptions          # the defaults: RunOptions' own (DEFAULT.seeds, ...)

# --help groups the options in these panels (rich_help_panel); MAIN is Typer's own panel, so
# a command's own options and --help join the subject of its question there
MAIN = "Options"
TRAFFIC = "Traffic and workload"
ENGINE = "vLLM engine"
OUTPUT = "Output"
RUN = "Calibration and run"

# help texts fit about two lines of a description column at 80 columns; the long explanations
# are in docs/guide.md and docs/engine.md
CALIBRATION_HELP = ("fitted step-time coefficients: h200-vllm033, h200-vllm026, a calibration "
                    "JSON path or analytic (default: the one of the hardware and vLLM version)")
DEPRECATED_FLAG = "--cost-profile"
VLLM_VERSION_HELP = (f"vLLM whose engine rules and calibration apply: {', '.join(VERSIONS)} "
                     f"(default: {DEFAULT_VERSION}; a newer release gets the newest rules, with a "
                     "warning)")
MODEL_HELP = "catalogue model id (simkit models list)"
CORPUS_HELP = "corpus name, e.g. mix, chat, code (simkit traces list)"
HARDWARE_HELP = "h100, h200, b200 (simkit hardware list) or a hardware JSON path"
TP_HELP = "tensor parallel degree (default: the smallest that fits)"
MAX_TOKENS_HELP = "output tokens per request at most (vLLM max_tokens)"
CONFIGS_HELP = ("vanilla, suffix[:K], kpad:K,K.., ngram[:K], ngram-kpad:K.., "
                "dynamic[:K,K..] (= dynamic-table, -feedback, -goodput), suffix-av[:K]")
NUM_REQUESTS_HELP = ("requests per simulated run (default: the profile's sample, at least "
                     "4 x concurrency)")
SEEDS_HELP = "request orders simulated (figures are means over them)"
CONCURRENCY_HELP = "closed-loop clients, each sending its next request when one finishes"
CAPPED_HELP = ("keep | extend: a request whose trace stopped at its source's generation cap ends "
               "there, or continues to --max-tokens (docs/engine.md)")
HISTORY_HELP = ("what the server served before: warm, cold, hot, repeat:P[,diverge:M] "
                "(docs/guide.md; default: the profile's own)")
SOURCE_HELP = "workload profiles: auto (raw traces when present, else shipped), raw or shipped"
WORKERS_HELP = "local worker processes (default: all cores; output does not depend on it)"
PREFIX_HELP = ("prefill every prompt token (default: vLLM's automatic prefix caching of prompt "
               "KV blocks, on)")


def turned_off(given: bool) -> bool:
    """The setting a negative flag turns off: False when the flag was given."""
    return not given


LIST_NOTE = " (repeatable)"          # the metavar A,B,... says a comma list


def comma_list(flag: str, help: str, **kwargs: Any) -> Any:
    """The type of a list option `flag`: repeated and/or comma-separated values (a run_command
    joins them into one comma list)."""
    return Annotated[Optional[List[str]], typer.Option(flag, help=help + LIST_NOTE,
                                                       metavar="A,B,...", **kwargs)]


def deprecated_alias(flag: str, new: str) -> Any:
    """The type of a hidden list option `flag`, the old name of `new` (pick_alias)."""
    return Annotated[Optional[List[str]], typer.Option(
        flag, hidden=True, help=f"deprecated alias of {new} (removed in the next release)")]


def pick_alias(value: Any, old: Any, new_flag: str, old_flag: str) -> Any:
    """The value given by `new_flag` or by its deprecated alias `old_flag` (a warning on
    stderr); both at once is an error naming the new option."""
    if old is None:
        return value
    if value is not None:
        raise InputError(f"give {new_flag} only ({old_flag} is its deprecated old name)",
                         field=new_flag.lstrip("-"))
    typer.echo(f"warning: {old_flag} is deprecated and will be removed in the next release; "
               f"use {new_flag}", err=True)
    return old


# one type per shared option; a command gives the default (DEFAULT.<name>, or its own for
# model, corpus, hardware and configs: the subject of its question)
Model = Annotated[str, typer.Option("--model", help=MODEL_HELP, rich_help_panel=MAIN)]
Corpus = Annotated[str, typer.Option("--corpus", help=CORPUS_HELP, rich_help_panel=MAIN)]
Hardware = Annotated[str, typer.Option("--hardware", help=HARDWARE_HELP, rich_help_panel=MAIN)]
Tp = Annotated[Optional[int], typer.Option("--tp", help=TP_HELP, rich_help_panel=MAIN)]
VllmVersion = Annotated[Optional[str], typer.Option("--vllm-version", help=VLLM_VERSION_HELP,
                                                    rich_help_panel=MAIN)]
Calibration = Annotated[Optional[str], typer.Option("--calibration", help=CALIBRATION_HELP,
                                                    rich_help_panel=RUN)]
CostProfile = Annotated[Optional[str], typer.Option(
    DEPRECATED_FLAG, hidden=True, help="deprecated alias of --calibration (removed in the next "
    "release)")]
# str-valued Enums: Typer refuses any other value, naming the choices; a short metavar keeps
# --help's description column wide (the help text names the choices)
Source = Annotated[ProfileSource, typer.Option("--source", help=SOURCE_HELP, metavar="SOURCE",
                                              rich_help_panel=TRAFFIC)]
History = Annotated[Optional[str], typer.Option("--history", help=HISTORY_HELP,
                                                rich_help_panel=TRAFFIC)]
CappedOutputs = Annotated[CappedMode, typer.Option("--capped-outputs", help=CAPPED_HELP,
                                                   metavar="MODE", rich_help_panel=TRAFFIC)]
Concurrency = Annotated[int, typer.Option("--concurrency", help=CONCURRENCY_HELP,
                                          rich_help_panel=TRAFFIC)]
NumRequests = Annotated[Optional[int], typer.Option("--num-requests", help=NUM_REQUESTS_HELP,
                                                    rich_help_panel=TRAFFIC)]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help=MAX_TOKENS_HELP,
                                        rich_help_panel=TRAFFIC)]
Seeds = Annotated[int, typer.Option("--seeds", help=SEEDS_HELP, rich_help_panel=TRAFFIC)]
# one flag, --no-prefix-caching (a --prefix-caching/--no-prefix-caching pair takes a second
# 19-character column in --help); the parameter still holds the setting: True unless given
PrefixCaching = Annotated[bool, typer.Option("--no-prefix-caching", help=PREFIX_HELP,
                                             callback=turned_off, show_default=False,
                                             rich_help_panel=ENGINE)]
# vLLM's server limits: every run command's engine takes them (RunOptions.server), so every
# run command offers them
MaxNumSeqs = Annotated[int, typer.Option("--max-num-seqs", rich_help_panel=ENGINE,
                                         help="vLLM max_num_seqs: sequences in one step at most")]
MaxNumBatchedTokens = Annotated[int, typer.Option(
    "--max-num-batched-tokens", rich_help_panel=ENGINE,
    help="vLLM max_num_batched_tokens: tokens in one step at most")]
CudagraphModeOption = Annotated[str, typer.Option(
    "--cudagraph-mode", rich_help_panel=ENGINE,
    help="vLLM cudagraph_mode: FULL_AND_PIECEWISE, PIECEWISE, FULL or NONE")]
# the latency goals of the commands that search a rate or a fleet (whatif capacity, fleet plan)
TtftGoal = Annotated[float, typer.Option("--ttft-p99-ms", help="p99 TTFT goal (ms)")]
TpotGoal = Annotated[float, typer.Option("--tpot-p99-ms", help="p99 TPOT goal (ms)")]
Workers = Annotated[Optional[int], typer.Option("--workers", help=WORKERS_HELP,
                                                rich_help_panel=RUN)]
Configs = comma_list("--configs", CONFIGS_HELP, rich_help_panel=MAIN)
# where a sweep's or a fleet plan's simulations run: one spelling for both (sweep's old
# --address is a hidden deprecated alias of --ray-address)
ExecutorOption = Annotated[Executor, typer.Option(
    "--executor", metavar="EXECUTOR", rich_help_panel=RUN,
    help="local (forked processes) or ray (a Ray cluster; needs the ray extra)")]
RayAddress = Annotated[Optional[str], typer.Option(
    "--ray-address", rich_help_panel=RUN,
    help="Ray cluster to join (--executor ray; default: a local Ray instance)")]


def format_option(*short: str, **kwargs: Any) -> Any:
    """The type of a command's --format (`short`: its other spellings, e.g. -f): a text table
    or JSON (OutputFormat); Typer refuses any other value, naming both."""
    return Annotated[OutputFormat, typer.Option("--format", *short, metavar="FORMAT",
                                                help="output format: table or json", **kwargs)]


Format = format_option()
# --wide: the text table with every column (by default it fits 100 columns and names the rest)
Wide = Annotated[bool, typer.Option("--wide", help="table format: every column (default: the "
                                    "columns that fit 100 characters, the others named)",
                                    rich_help_panel=OUTPUT)]
# options given as a negative flag: the parameter's Typer default is the flag's (not given), the
# callback turns it into the setting (RunOptions' default when not given)
NEGATED = ("prefix_caching",)

# the shared run options, in the order --help lists them: (parameter name, type)
SHARED: dict[str, Any] = {
    "model": Model, "corpus": Corpus, "hardware": Hardware, "tp": Tp, "configs": Configs,
    "concurrency": Concurrency, "num_requests": NumRequests, "seeds": Seeds,
    "max_tokens": MaxTokens, "source": Source, "history": History,
    "capped_outputs": CappedOutputs, "prefix_caching": PrefixCaching,
    "max_num_seqs": MaxNumSeqs, "max_num_batched_tokens": MaxNumBatchedTokens,
    "cudagraph_mode": CudagraphModeOption, "vllm_version": VllmVersion,
    "calibration": Calibration, "cost_profile": CostProfile, "workers": Workers}
# what a command must give itself: the subject of its question has no common default
OWN_DEFAULT = ("model", "corpus", "hardware", "configs")
REQUIRED = ...                # a default that makes the option required (predict's --model)


def run_command(*, without: tuple[str, ...] = (), extra: dict[str, tuple[Any, Any]] | None = None,
                **defaults: Any) -> Callable:
    """Decorator of a Typer command function `fn(own options..., **run)`: its signature gets the
    shared run options (SHARED, less `without` and less those it declares itself) first, each
    with RunOptions' default or, for model, corpus, hardware and configs, the one in `defaults`
    (REQUIRED: no default), then its own options, then `extra`: a command group's own shared
    options (name: (type, default)). Typer reads the signature, so the option block is written
    here once, not in every command; the values arrive in `**run`, each list option's
    (comma_list) joined into one comma list."""
    unknown = set(defaults) - set(SHARED) - set(extra or {})
    if unknown:
        raise TypeError(f"no shared option {sorted(unknown)}")

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        have = {p.name for p in own}
        shared = []
        for name, kind in SHARED.items():
            if name in have or name in without:
                continue
            if name in OWN_DEFAULT and name not in defaults:
                raise TypeError(f"{fn.__name__}: give the default of --{name}")
            default = defaults.get(name, getattr(RunOptions, name, None))
            if name in NEGATED:                      # the flag's default: not given
                default = not default
            shared.append(_keyword(name, kind, default))
        group = [_keyword(name, kind, default) for name, (kind, default) in (extra or {}).items()]
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        params = [p.replace(default=[p.default]) if _is_list(p.annotation)
                  and isinstance(p.default, str) else p for p in (*shared, *own, *group)]
        lists = [p.name for p in params if _is_list(p.annotation)]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            for name in lists:
                kwargs[name] = join_list(kwargs.get(name))
            return fn(**kwargs)

        command.__signature__ = sig.replace(parameters=params)
        return command

    return wrap


def _keyword(name: str, kind: Any, default: Any) -> inspect.Parameter:
    """A keyword-only parameter of a command's signature."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                             default=default)


# the counts every run option set checks (>= 1, at most simkit.checks.LIMITS), by option name
COUNTS = ("tp", "concurrency", "num_requests", "max_tokens", "seeds", "workers", "max_num_seqs",
          "max_num_batched_tokens")


def pick_vllm_version(text: Optional[str]) -> str:
    """The version key a command was given (checked before any work; None: the default). A
    release newer than every known one gets the newest rules, with a warning on stderr."""
    from simkit.catalog.nearest_version import resolve_vllm_version
    from simkit.catalog.vllm_versions import DEFAULT_VERSION, VERSIONS

    resolved = resolve_vllm_version(DEFAULT_VERSION if text is None else text,
                                    what="vLLM version (--vllm-version)")
    if resolved.warning:
        typer.echo(f"warning: {resolved.warning}", err=True)
    return resolved.rules.key


def pick_history(text: Optional[str]):
    """The --history a command was given as a simkit.history.History (checked before any
    work); None: the workload profile's own."""
    from simkit.history import parse_history

    return None if text is None else parse_history(text)


def pick_calibration(calibration: Optional[str], cost_profile: Optional[str]) -> Optional[str]:
    """The calibration a command was given, by --calibration or by the deprecated
    --cost-profile (which prints a warning on stderr); both at once is an error."""
    if cost_profile is None:
        return calibration
    if calibration is not None:
        raise InputError(f"give --calibration only ({DEPRECATED_FLAG} is its deprecated old "
                         "name)", field="calibration")
    typer.echo(f"warning: {DEPRECATED_FLAG} is deprecated and will be removed in the next "
               "release; use --calibration", err=True)
    return cost_profile


def run_options(params: dict[str, Any]) -> RunOptions:
    """The run options among a command's parameters (its locals, by name), checked before any
    work: counts >= 1, the profile source, capped-outputs mode, the vLLM version (resolved to
    its key), the calibration (from --calibration or its deprecated alias) and what vLLM itself
    would refuse (a TP the model cannot shard, max_tokens over max_model_len)."""
    from simkit.app.capped import check_mode
    from simkit.checks import positive_int
    from simkit.profiles.corpus_profile import check_source
    from simkit.serving_checks import check_serving

    for name in COUNTS:
        if name in params:
            positive_int(params[name], name.replace("_", "-"))
    given = {n: params[n] for n in RunOptions.names() if n in params}
    given["source"] = check_source(params.get("source", DEFAULT.source))
    given["capped_outputs"] = check_mode(params.get("capped_outputs", DEFAULT.capped_outputs))
    given["calibration"] = pick_calibration(params.get("calibration"),
                                            params.get("cost_profile"))
    given["vllm_version"] = pick_vllm_version(params.get("vllm_version"))
    given["history"] = pick_history(params.get("history"))
    if "cudagraph_mode" in given:                # a misspelt mode: refused before any work
        from simkit.engine.cudagraph import CudagraphMode

        given["cudagraph_mode"] = CudagraphMode.parse(given["cudagraph_mode"]).value
    opts = RunOptions(**given)
    limits = {n: params[n] for n in ("max_tokens", "max_num_seqs", "max_num_batched_tokens")
              if n in params}
    check_serving(params.get("model"), opts.tp, **limits)   # a sweep's TP: checked per cell
    check_named_files(opts)
    return opts


def check_named_files(opts: RunOptions) -> None:
    """The hardware and the calibration a run names exist and read (a JSON path included),
    before any work: a sweep used to start every cell, fail each one and write empty files."""
    from simkit.catalog.hardware import get_hardware
    from simkit.costmodel.calibrations import read_calibration

    get_hardware(opts.hardware)
    if opts.calibration not in (None, "analytic"):
        read_calibration(opts.calibration)


def join_list(values: Optional[list[str]] | str) -> Optional[str]:
    """A list option's values (repeated and/or comma lists) as one comma list; None when the
    option was not given (a string is already one)."""
    if values is None or isinstance(values, str):
        return values
    return ",".join(v.strip() for v in values if v.strip())


def _is_list(annotation: Any) -> bool:
    """Whether a parameter's type is a list option's (Annotated[Optional[List[str]], ...])."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    args = get_args(annotation) if get_origin(annotation) is not list else (annotation,)
    return any(get_origin(a) is list for a in args)


__all__ = ["DEFAULT", "ExecutorOption", "RayAddress", "MaxNumSeqs", "MaxNumBatchedTokens",
           "CudagraphModeOption", "TtftGoal", "TpotGoal", "LIST_NOTE", "comma_list", "deprecated_alias", "pick_alias", "ENGINE", "MAIN", "NEGATED", "OUTPUT", "OWN_DEFAULT", "REQUIRED", "RUN", "SHARED",
           "TRAFFIC", "turned_off", "run_command", "Calibration", "CappedOutputs", "Concurrency", "Configs", "Corpus",
           "CostProfile", "Format", "Hardware", "History", "MaxTokens", "Model", "NumRequests",
           "PrefixCaching", "Seeds", "Source", "Tp", "VllmVersion", "Wide", "Workers",
           "format_option", "join_list", "pick_calibration", "pick_history",
           "pick_vllm_version", "run_options"]
