"""The `simkit` command line: one root Typer app; each command module registers its own commands."""

from __future__ import annotations

import sys

import typer

from simkit.errors import SimkitError

app = typer.Typer(
    name="simkit",
    help="Simulate vLLM serving throughput under model-free speculative decoding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module owns one command group and keeps its heavy imports inside the command bodies,
# so `simkit --help` stays fast.
from simkit.commands import (  # noqa: E402
    acceptance,
    calibration,
    catalog,
    predict,
    traces_cmd,
    whatif,
)

for _module in (traces_cmd, acceptance, catalog, predict, calibration, whatif):
    _module.register(app)


@app.callback()
def _root() -> None:
    """Simulate vLLM serving throughput under model-free speculative decoding."""


@app.command()
def version() -> None:
    """Print simkit's version."""
    from simkit import __version__

    typer.echo(__version__)


def main() -> None:
    """Console entry point: user errors print one clear line and exit 2, no traceback."""
    try:
        app()
    except SimkitError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
