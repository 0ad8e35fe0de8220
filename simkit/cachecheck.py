"""Integrity of cached files: a content checksum stored beside the data, verified on load.

Every cache writer stores `content_digest` of what it wrote; every reader recomputes it. A file
that is truncated, emptied or overwritten (even with zeros at the same size, which numpy reads
without complaint) then fails the check instead of silently changing the numbers. A damaged
entry is named on stderr, removed, and rebuilt from its sources by the caller."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Mapping

import numpy as np


class DamagedCache(Exception):
    """A cached file that cannot be trusted; `path` names it, the message says why."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path}: {reason}")


def content_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over each array's name, dtype, shape and bytes, in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype.str).encode())
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def verify(path: str | Path, arrays: Mapping[str, np.ndarray], stored: str | None) -> None:
    """DamagedCache unless `stored` is the content digest of `arrays`."""
    if not stored:
        raise DamagedCache(path, "no content checksum (written by an older simkit or damaged)")
    if content_digest(arrays) != stored:
        raise DamagedCache(path, "content does not match its checksum")


def discard(exc: DamagedCache, action: str = "rebuilding it from its sources") -> None:
    """Say on stderr which cached entry was damaged and why, remove it, and say what happens."""
    print(f"warning: damaged cache entry {exc.path} ({exc.reason}); removed, {action}",
          file=sys.stderr)
    if exc.path.is_dir():
        shutil.rmtree(exc.path, ignore_errors=True)
    else:
        exc.path.unlink(missing_ok=True)
