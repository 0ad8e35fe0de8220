"""`simkit fleet plan|validate`: N replicas behind a router, each with its own suffix tree and
prefix cache (docs/fleet.md). Checks every input before any work; heavy imports in the bodies."""

from __future__ import annotations

from typing import Optional

import typer

from simkit.app.options import Goals
from simkit.commands.options import (DEFAULT, Calibration, ExecutorOption, Format, RayAddress,
                                     TpotGoal, TtftGoal, Wide, comma_list, run_command,
                                     run_options)
from simkit.choices import Executor, FleetOrdering, OutputFormat

fleet_app = typer.Typer(help="A fleet of replicas behind a router: replicas per router policy "
                             "and configuration, with the history each replica ends up with.",
                        no_args_is_help=True)

# the shared run options a fleet plan varies or fixes itself: one traffic stream (--seed) of
# --rate x --duration arrivals, open loop, replaying the corpus's own raw token ids, each
# replica's history the stream routed to it
FLEET_WITHOUT = ("seeds", "num_requests", "concurrency", "source", "history", "capped_outputs")
POLICIES_HELP = ("router policies: round-robin, prefix-affinity, session-affinity, "
                 "least-outstanding (default: round-robin, prefix-affinity, least-outstanding)")
# said in the help: rich cuts the 45-character default at 80 columns
Policies = comma_list("--policies", POLICIES_HELP, show_default=False)


@fleet_app.command("plan")
@run_command(without=FLEET_WITHOUT, model=DEFAULT.model, corpus=DEFAULT.corpus,
             hardware=DEFAULT.hardware, configs="vanilla,suffix")
def plan_cmd(
    policies: Policies = "round-robin,prefix-affinity,least-outstanding",
    rate: float = typer.Option(40.0, "--rate", help="mean arrivals per second, whole fleet"),
    duration: float = typer.Option(60.0, "--duration", help="seconds of traffic"),
    cv: float = typer.Option(1.0, "--cv", help="coefficient of variation of the arrival gaps "
                             "(gamma; 1 = Poisson, > 1 bursty)"),
    daily_amplitude: float = typer.Option(0.0, "--daily-amplitude", help="daily cycle: rate "
                                          "swings by +-A x rate, A in [0, 1) (default 0: none)"),
    period: float = typer.Option(86400.0, "--period", help="the cycle's period in seconds"),
    popularity: str = typer.Option("repeat", "--popularity", help="repeats: none, repeat "
                                   "(--repeat-share, --reuse-distance) or zipf (--zipf-s)"),
    repeat_share: float = typer.Option(0.3, "--repeat-share", help="share of arrivals repeating "
                                       "an earlier arrival's request (popularity repeat)"),
    reuse_distance: float = typer.Option(200.0, "--reuse-distance", help="mean arrivals between "
                                         "a request and its repeat (geometric)"),
    zipf_s: float = typer.Option(1.0, "--zipf-s", help="Zipf exponent (popularity zipf)"),
    seed: int = typer.Option(0, "--seed", help="traffic seed"),
    ttft: TtftGoal = Goals.ttft_ms_p99,
    tpot: TpotGoal = Goals.tpot_ms_p99,
    max_replicas: int = typer.Option(64, "--max-replicas", help="largest fleet searched"),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="evaluate this many replicas "
                                           "instead of searching (default: search)"),
    gpu_hour_price: Optional[float] = typer.Option(None, "--gpu-hour-price", help="US$ per "
                                                   "GPU-hour, for cost per million output "
                                                   "tokens (default: no cost)"),
    ordering: FleetOrdering = typer.Option(FleetOrdering.SEQUENTIAL, "--ordering", metavar="ORDER", help="suffix replay of each "
                                 "replica's stream: sequential or concurrent (tables), or "
                                 "in-loop (each engine drafts on its simulated steps, as vLLM "
                                 "does; slower)"),
    in_flight: int = typer.Option(8, "--in-flight", help="requests in flight for --ordering "
                                  "concurrent"),
    executor: ExecutorOption = Executor.LOCAL,
    ray_address: RayAddress = None,
    fmt: Format = OutputFormat.TABLE,
    plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG of replicas vs policy "
                                       "(default: no plot)"),
    wide: Wide = False,
    **run,
) -> None:
    """Fewest replicas per (router policy, configuration) meeting p99 TTFT/TPOT goals. The
    corpus's raw traces are needed (the replicas replay its token ids)."""
    from simkit.checks import output_file, positive_int, positive_rate
    from simkit.errors import InputError
    from simkit.fleet.plan import check_policies
    from simkit.fleet.traffic import TrafficSpec

    output_file(plot, "plot")
    opts = run_options(run)
    for name, val in (("max-replicas", max_replicas), ("replicas", replicas),
                      ("in-flight", in_flight)):
        positive_int(val, name)
    for name, val in (("ttft-p99-ms", ttft), ("tpot-p99-ms", tpot),
                      ("gpu-hour-price", gpu_hour_price)):
        positive_rate(val, name)
    check_policies(policies)                 # --ordering and --executor: Typer checked them
    traffic = TrafficSpec(rate, duration, cv, daily_amplitude, period, popularity, repeat_share,
                          reuse_distance, zipf_s, seed).check()
    from simkit.engine.config import parse_configs

    parse_configs(run["configs"], opts.vllm_version)
    from simkit.fleet import report
    from simkit.engine.fast import may_take
    from simkit.engine.fast.background import compiling
    from simkit.fleet.run import fleet

    # the engine's kernels compile while the tables load (fresh install; versions it runs)
    with compiling(may_take(opts.vllm_version)):
        doc = fleet(opts, traffic=traffic, policies=policies, configs=run["configs"],
                    goals=Goals(ttft, tpot),
                    max_replicas=max_replicas, replicas=replicas, gpu_hour_price=gpu_hour_price,
                    ordering=ordering, in_flight=in_flight, executor=executor,
                    address=ray_address)
    typer.echo(report.document(doc) if fmt is OutputFormat.JSON else report.render(doc, wide), nl=False)
    if plot:
        report.plot(doc, plot)
        from simkit.outfiles import wrote

        wrote(plot)


@fleet_app.command("validate")
def validate_cmd(
    calibration: Calibration = DEFAULT.calibration,
    fmt: Format = OutputFormat.TABLE,
    wide: Wide = False,
) -> None:
    """The recorded vLLM fleet runs (calibrate/data, corpora fleet-*): per replica, its stream
    rebuilt and replayed in order; accepted tokens per step and tok/s, measured vs simkit."""
    import json

    from simkit.errors import InputError
    from simkit.paths import traces_src_dir

    if calibration not in (None, "analytic"):   # checked here, not in the worker processes
        from simkit.costmodel.calibrations import read_calibration

        read_calibration(calibration)
    if traces_src_dir() is None:
        raise InputError("fleet validate rebuilds each replica's requests from the raw traces "
                         "(../shared/traces-src or SIMKIT_TRACES_SRC)", field="traces")
    from simkit.fleet import report
    from simkit.fleet.validate import summary, validate_fleet
    from simkit.whatif.common import clean

    rows = validate_fleet(calibration=calibration)
    if not rows:
        raise InputError("no fleet records (corpora fleet-*) under calibrate/data",
                         field="records")
    summ = summary(rows)
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps(clean({"runs": rows, "summary": summ}), indent=1, sort_keys=True))
    else:
        typer.echo(report.render_validation(rows, summ, wide), nl=False)


def register(app: typer.Typer) -> None:
    """Add the `fleet` group to the root app."""
    app.add_typer(fleet_app, name="fleet")
