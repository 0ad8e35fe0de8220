"""Which vLLM is installed here and which harness adapter and rules it gets (pure; no vLLM import).

The version is read from the installed distribution's metadata, so `calibrate run` can check
its options and name the harness before it imports vLLM or starts an engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from calibrate.harness import HARNESS_BY_VERSION
from simkit.catalog.nearest_version import ResolvedVersion, release_key, resolve_vllm_version
from simkit.errors import SimkitError


@dataclass(frozen=True)
class HarnessChoice:
    """A release, the rules that stand in for it, and the adapter its runs use."""

    release: str                  # what is installed or asked for, e.g. '0.34.0'
    resolved: ResolvedVersion
    adapter: str                  # 'forcing' or 'trace_replay'
    warning: str = ""

    @property
    def key(self) -> str:
        return self.resolved.key


def installed_vllm_release() -> str | None:
    """The installed vLLM's release ('0.34.0'), or None when vLLM is not installed here."""
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def _adapter_name(resolved: ResolvedVersion) -> tuple[str, str]:
    """(adapter, warning): the catalogue's adapter of the rules that apply; a release newer than
    simkit knows is driven as the nearest known one is, and says so."""
    adapter = resolved.rules.harness_adapter
    if resolved.exact:
        return adapter, ""
    near = resolved.rules.key
    return adapter, (f"the calibration harness was written for vLLM up to {near}: vLLM "
                     f"{resolved.key} is driven as {near} is ({adapter}); a renamed vLLM internal "
                     "stops the run with its name")


def choose(release: str) -> HarnessChoice:
    """The harness choice for a release string ('0.34.0', '0.34', 'v0.35.1')."""
    resolved = resolve_vllm_version(release, tuple(HARNESS_BY_VERSION))
    adapter, why = _adapter_name(resolved)
    warning = "; ".join(w for w in (resolved.warning, why) if w)
    return HarnessChoice(str(release), resolved, adapter, warning)


def choose_installed() -> HarnessChoice:
    """The choice for the vLLM installed here; one clear error when there is none."""
    release = installed_vllm_release()
    if release is None:
        raise SimkitError("vLLM is not installed here: `simkit calibrate run` drives your vLLM "
                          f"({', '.join(sorted(HARNESS_BY_VERSION))} or newer) on a GPU host; "
                          "install it there (pip install vllm) and run this command there")
    if not release_key(release):
        raise SimkitError(f"the installed vLLM reports version {release!r}, which is not a "
                          "release number simkit can read")
    return choose(release)


__all__ = ["HarnessChoice", "choose", "choose_installed", "installed_vllm_release"]
