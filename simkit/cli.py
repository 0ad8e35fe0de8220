"""The `simkit` command line: one root Typer app; each command module registers its own commands."""

from __future__ import annotations

import os
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
    fleet,
    predict,
    traces_cmd,
    whatif,
)

for _module in (traces_cmd, acceptance, catalog, predict, calibration, whatif, fleet):
    _module.register(app)


_DEBUG = {"on": False}


def _version_text() -> str:
    """simkit's version and the vLLM releases whose engine rules it models."""
    from simkit import __version__
    from simkit.catalog.vllm_versions import VERSIONS

    return (f"simkit {__version__}\n"
            f"vLLM versions with engine rules: {', '.join(v.release for v in VERSIONS.values())}")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_version_text())
        raise typer.Exit()


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug",
                                     help="show the Python traceback of an error"),
          _version: bool = typer.Option(False, "--version", is_eager=True,
                                        callback=_print_version,
                                        help="print simkit's version and the vLLM versions it "
                                             "has rules for, and exit")) -> None:
    """Simulate vLLM serving throughput under model-free speculative decoding."""
    _DEBUG["on"] = debug


@app.command()
def version() -> None:
    """Print simkit's version."""
    from simkit import __version__

    typer.echo(__version__)


def _click_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Click's usage-error and abort classes: Typer >= 0.2x vendors Click (typer.TyperException
    is their base), older Typer uses the click package; both are caught."""
    usage: list[type] = []
    aborts: list[type] = [typer.Abort]
    if hasattr(typer, "TyperException"):
        usage.append(typer.TyperException)
    try:
        import click
    except ImportError:
        pass
    else:
        usage.append(click.ClickException)
        aborts.append(click.Abort)
    return tuple(usage), tuple(aborts)


_USAGE_ERRORS, _ABORTS = _click_errors()


def _one_line(exc: BaseException) -> str:
    """The one-line message of an error that escaped the commands (file named where known)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


INTERRUPTED = 130          # the shell's exit status of a process stopped by SIGINT (128 + 2)


def _interrupt_in_chain(exc: BaseException) -> bool:
    """True when `exc` is a KeyboardInterrupt or was raised while handling one (numba's
    dispatcher turns a Ctrl-C during compiled drafting into a SystemError whose context is
    the KeyboardInterrupt)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _interrupted() -> None:
    """Ctrl-C: one line saying how far the command got (the simulations finished, when it
    ran any) and exit 130. Caches are written to a temporary name and renamed, so an
    interrupted run leaves only whole entries (the next run rebuilds the rest)."""
    from simkit.progress import current

    tracker = current()
    done = tracker.summary() if tracker is not None else None
    if tracker is not None:
        tracker.close()                      # the bar off the terminal before the line
    typer.echo("error: interrupted (Ctrl-C): "
               + (f"{done}; " if done else "")
               + "stopped before the results were complete", err=True)
    sys.exit(INTERRUPTED)


def main(argv: list[str] | None = None) -> None:
    """Console entry point, the one error path of the CLI: a SimkitError (bad input) or an
    OSError (a file or folder the OS refused) prints one `error: ...` line on stderr and exits 2;
    any other exception is a simkit bug and prints one line asking for --debug, exit 1;
    Ctrl-C prints one line and exits 130.
    `--debug` (or SIMKIT_DEBUG=1) lets the traceback through instead. Simulations report to
    one progress tracker per command (simkit.progress: a bar on a terminal's stderr)."""
    from simkit.interrupt import install
    from simkit.progress import tracking

    install()
    with tracking():
        _run(argv)


def empty_value(argv: list[str]) -> str | None:
    """The one-line error for an empty value on the command line (`--out ''`, `--plot=`, an
    empty argument), else None. A path option typed as a path reads '' as '.', the current
    folder, and others read it as 'not given': each silently meant something else."""
    for i, arg in enumerate(argv):
        if arg.startswith("--") and "=" in arg and arg.split("=", 1)[1] == "":
            name = arg[2:].split("=", 1)[0]
        elif arg == "" and i and argv[i - 1].startswith("--") and "=" not in argv[i - 1]:
            name = argv[i - 1][2:]
        elif arg == "":
            return "error: an empty argument ('') where a value is needed"
        else:
            continue
        return (f"error: field '{name}': empty value; give one, or leave --{name} out for its "
                "default")
    return None


def _run(argv: list[str] | None) -> None:
    """main() inside its progress tracker."""
    debug = lambda: _DEBUG["on"] or bool(os.environ.get("SIMKIT_DEBUG"))  # noqa: E731
    empty = empty_value(sys.argv[1:] if argv is None else list(argv))
    if empty:
        typer.echo(empty, err=True)
        sys.exit(2)
    try:
        code = app(args=argv, prog_name="simkit", standalone_mode=False)
    except _USAGE_ERRORS as exc:             # unknown option, missing or malformed value
        if debug():
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            # a bare group: its help, as Click would. The message is the help text (plain
            # Click); Typer's rich help has already printed it and the message is empty.
            help_text = exc.format_message()
            if help_text:
                typer.echo(help_text)
            sys.exit(2)
        path = ctx.command_path.split(" ", 1) if ctx is not None else []
        hint = f" (see simkit {path[1]} --help)" if len(path) == 2 else ""
        typer.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    except KeyboardInterrupt:
        if debug():
            raise
        _interrupted()
    except _ABORTS as exc:                   # Click turns a Ctrl-C into Abort
        if _interrupt_in_chain(exc):
            _interrupted()
        typer.echo("error: aborted", err=True)
        sys.exit(1)
    except (SimkitError, OSError) as exc:
        if _DEBUG["on"] or os.environ.get("SIMKIT_DEBUG"):
            raise
        typer.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - the last line of defence, see docstring
        if _DEBUG["on"] or os.environ.get("SIMKIT_DEBUG"):
            raise
        if _interrupt_in_chain(exc):
            _interrupted()
        typer.echo(f"error: internal error {type(exc).__name__}: {_one_line(exc)} "
                   "(a simkit bug; rerun with --debug for the traceback)", err=True)
        sys.exit(1)
    from simkit.interrupt import interrupted

    # Typer's silent answer to a Ctrl-C, or a Ctrl-C some library swallowed (simkit.interrupt)
    if code == INTERRUPTED or interrupted():
        _interrupted()
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
