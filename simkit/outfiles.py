"""Output files written whole or not at all, each named when it fails.

`write_atomic` writes through a temporary file beside the target and renames it over the
target once complete, so a full disk or a Ctrl-C leaves the earlier file (or none), never a
truncated one; an OSError names the target, not the temporary name. `wrote` is the one line
on stderr that says where a file went (the results themselves go to stdout)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call write(tmp) to write a temporary file beside `path` (same extension, so writers
    that pick a format from it still do), then rename it to `path`; returns `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def wrote(path: str | Path) -> None:
    """Say on stderr where a file was written."""
    print(f"wrote {path}", file=sys.stderr)


__all__ = ["write_atomic", "wrote"]
