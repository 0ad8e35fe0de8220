"""Where simkit finds raw traces and keeps its cache."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The user's cache directory for tokenized corpora and tables (SIMKIT_CACHE_DIR overrides)."""
    path = Path(os.environ.get("SIMKIT_CACHE_DIR") or platformdirs.user_cache_dir("simkit"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def traces_src_dir() -> Path | None:
    """The raw trace folder (SIMKIT_TRACES_SRC, else ../shared/traces-src beside the repo), or None."""
    env = os.environ.get("SIMKIT_TRACES_SRC")
    if env:
        return Path(env) if Path(env).is_dir() else None
    here = Path(__file__).resolve().parent.parent
    for candidate in (here.parent / "shared" / "traces-src", here / "shared" / "traces-src"):
        if candidate.is_dir():
            return candidate
    return None
