"""Checks of user-given numbers and output paths, done before any work starts.

Each check raises InputError naming the option, so a bad value costs the user one line and no
simulation time; output paths are checked up front because a plot or table that cannot be
written used to fail only after minutes of work (and lose the printed results)."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from simkit.errors import InputError

# extensions matplotlib's Agg backend writes (fig.savefig picks the format from the suffix)
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff",
                 ".webp", ".pgf", ".svgz", ".raw", ".rgba")


# Upper bounds of counts that size what a run holds in memory: one entry per request of a run
# (and 4 x concurrency requests by default), one job per (config, seed). Far above any useful
# value; a larger one used to die with a MemoryError (or run for days) instead of one line.
MAX_REQUESTS = 1_000_000
LIMITS = {"num-requests": (MAX_REQUESTS, "requests per run"),
          "min-requests": (MAX_REQUESTS, "requests per run"),
          "max-requests": (MAX_REQUESTS, "requests per run"),
          "concurrency": (MAX_REQUESTS // 4, "clients (a run sends 4 x as many requests)"),
          "levels": (MAX_REQUESTS // 4, "clients (a run sends 4 x as many requests)"),
          "seeds": (1000, "seeds (one simulation each per config)")}


def positive_int(value: int | None, field: str) -> int | None:
    """`value` when it is None or >= 1 (and, for the counts in LIMITS, at most their bound);
    else InputError naming `field`."""
    if value is not None and value < 1:
        raise InputError(f"must be >= 1, got {value}", field=field)
    most, what = LIMITS.get(field, (None, ""))
    if value is not None and most is not None and value > most:
        raise InputError(f"at most {most:,} {what}, got {value:,}", field=field)
    return value


def positive_rate(value: float | None, field: str) -> float | None:
    """`value` when it is None or a finite number > 0 (nan, inf, 0 and negatives are refused)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InputError(f"must be a finite number > 0, got {value}", field=field)
    return value


def _writable_dir(folder: Path, field: str, what: str) -> None:
    if not folder.exists():
        raise InputError(f"folder {folder} does not exist (for {what})", field=field)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder (for {what})", field=field)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"folder {folder} is not writable (for {what})", field=field)
    try:                         # access() trusts root and mode bits; a real file tells the truth
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".simkit-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write in folder {folder} ({exc.strerror or exc}; for {what})",
                         field=field) from None


def not_empty(path: str | Path, field: str) -> None:
    """Refuse an empty path ('' from a script's unset variable): it used to mean no plot for
    --plot and the current folder for sweep --out, silently."""
    if not str(path).strip():
        raise InputError("empty path: give a file or folder name, or leave the option out",
                         field=field)


def output_file(path: str | Path | None, field: str,
                suffixes: tuple[str, ...] = PLOT_SUFFIXES) -> Path | None:
    """Check that a file can be written at `path` (its folder exists and is writable, it is not
    a folder, its extension is one of `suffixes`); None passes, an empty path is refused."""
    if path is None:
        return None
    not_empty(path, field)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p} is a folder; give a file name", field=field)
    if p.suffix.lower() not in suffixes:
        raise InputError(f"unknown extension {p.suffix or '(none)'!r} for {p}; use one of "
                         + ", ".join(suffixes), field=field)
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{p} is not writable", field=field)
    _writable_dir(p.parent if str(p.parent) else Path("."), field, str(p))
    return p


def output_dir(path: str | Path, field: str) -> Path:
    """Check that `path` is, or can be created as, a writable folder (the nearest existing
    ancestor must be a writable folder)."""
    not_empty(path, field)
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise InputError(f"{p} exists and is not a folder", field=field)
        _writable_dir(p, field, str(p))
        return p
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    _writable_dir(parent, field, str(p))
    return p


def input_dir(path: str | Path, field: str | None = None) -> Path:
    """`path` when it is an existing folder; else InputError saying whether it is missing or a
    file ('no such folder' for a file misled)."""
    p = Path(path)
    if p.is_dir():
        return p
    if p.exists():
        raise InputError("is a file; give a folder", path=str(p), field=field)
    raise InputError("no such folder", path=str(p), field=field)
