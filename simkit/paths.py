"""Where simkit finds raw traces and keeps its cache."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The user's cache directory for tokenized corpora and tables (SIMKIT_CACHE_DIR overrides)."""
    from simkit.errors import InputError

    env = os.environ.get("SIMKIT_CACHE_DIR")
    path = Path(env or platformdirs.user_cache_dir("simkit"))
    where = "SIMKIT_CACHE_DIR" if env else "the user cache folder"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {where} {path} ({exc.strerror or exc}); set "
                         "SIMKIT_CACHE_DIR to a writable folder", field="SIMKIT_CACHE_DIR") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{where} {path} is not a writable folder; set SIMKIT_CACHE_DIR to a "
                         "writable folder", field="SIMKIT_CACHE_DIR")
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


def require_traces_src(what: str) -> Path:
    """The raw trace folder, checked before `what` (a command, e.g. 'simkit validate') does
    any work: without it (a fresh machine: the traces are not shipped with simkit) one line
    says what is needed and where it comes from, instead of failing half-way on a missing
    tokenizer file."""
    from simkit.errors import InputError

    src = traces_src_dir()
    env = os.environ.get("SIMKIT_TRACES_SRC")
    where = f"SIMKIT_TRACES_SRC={env}" if env else "../shared/traces-src beside simkit"
    need = (f"{what} needs the raw traces (public prompt/output files of open benchmarks and "
            "the Llama-3 and Qwen tokenizer files, not shipped with simkit; docs/guide.md, "
            "'Getting the raw traces', says which files and where they come from)")
    if src is None:
        raise InputError(f"{need}: none found at {where}; set SIMKIT_TRACES_SRC to that folder")
    if not (src / "tokenizers").is_dir():
        raise InputError(f"{need}: {src} has no tokenizers/ folder; set SIMKIT_TRACES_SRC to "
                         "that folder")
    return src
