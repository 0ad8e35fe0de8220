"""The vLLM installed on this host, checked before `simkit calibrate run` starts it: present,
and a release whose engine rules simkit has (the harness hooks into that release's internals;
another one failed deep inside with an ImportError read as a simkit bug)."""

from __future__ import annotations

import importlib.util
import re
from importlib.metadata import PackageNotFoundError, version

from simkit.catalog.vllm_versions import VERSIONS
from simkit.errors import SimkitError


def installed_version() -> str | None:
    """The installed vLLM's version from its package metadata (without importing it, which
    takes seconds), or None when the package on the path has none."""
    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def minor(release: str) -> str:
    """'0.33' of '0.33.0', '0.33.1+cu128' or '0.33.0rc1'."""
    m = re.match(r"(\d+)\.(\d+)", release)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else release


def require_vllm() -> None:
    """One clear line when vLLM is not installed here, or is a release simkit has no rules
    for (naming the installed one and the supported ones)."""
    supported = ", ".join(v.release for v in VERSIONS.values())
    newest = list(VERSIONS.values())[-1].release
    if importlib.util.find_spec("vllm") is None:
        raise SimkitError("vLLM is not installed here: `simkit calibrate run` drives your vLLM "
                          f"({supported}) on a GPU host; install it there (pip install "
                          f"vllm=={newest}) and run this command there")
    installed = installed_version()
    if installed is None or minor(installed) not in VERSIONS:
        raise SimkitError(f"the vLLM installed here ({installed or 'version unknown'}) is not one "
                          f"`simkit calibrate run` supports; supported: {supported} "
                          f"(pip install vllm=={newest})")


__all__ = ["installed_version", "minor", "require_vllm"]
