"""CLI options more than one command group shares: the vLLM version, the calibration (fitted
cost coefficients) and its deprecated old flag, --cost-profile, kept as an alias for one release."""

from __future__ import annotations

from typing import Optional

import typer

from simkit.errors import InputError

CALIBRATION_HELP = ("calibration (fitted step-time coefficients): an embedded name "
                    "(h200-vllm033, h200-vllm026), a calibration JSON path, or analytic (default: the "
                    "calibration of the hardware and --vllm-version, else analytic)")
DEPRECATED_FLAG = "--cost-profile"
VLLM_VERSION_HELP = ("vLLM version whose engine rules and calibration apply: 0.26 or 0.33 "
                     "(default: 0.33, the newest simkit knows)")

# --wide: the text table with every column (by default it fits 100 columns and names the rest)
WIDE_OPTION = typer.Option(False, "--wide", help="table format: every column (default: the "
                           "columns that fit 100 characters; the others are named under it)")


def vllm_version_option() -> typer.models.OptionInfo:
    """--vllm-version."""
    return typer.Option(None, "--vllm-version", help=VLLM_VERSION_HELP)


def pick_vllm_version(text: Optional[str]) -> str:
    """The version key a command was given (checked before any work; None: the newest)."""
    from simkit.catalog.vllm_versions import get_vllm_version

    return get_vllm_version(text).key


def calibration_option() -> typer.models.OptionInfo:
    """--calibration."""
    return typer.Option(None, "--calibration", help=CALIBRATION_HELP)


def cost_profile_option() -> typer.models.OptionInfo:
    """--cost-profile: the old name of --calibration (hidden; warns when used)."""
    return typer.Option(None, DEPRECATED_FLAG, hidden=True,
                        help="deprecated alias of --calibration (removed in the next release)")


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


__all__ = ["CALIBRATION_HELP", "VLLM_VERSION_HELP", "WIDE_OPTION", "calibration_option", "cost_profile_option",
           "pick_calibration", "pick_vllm_version", "vllm_version_option"]
