"""A vLLM release the user has (installed, recorded or named) mapped to the rules simkit holds.

`get_vllm_version` refuses a release simkit has no rules for. Calibration is where a newer vLLM
first shows up (the user installs the latest and calibrates it), so a release newer than every
known one gets the newest known rules with a stated warning instead of a refusal; an older or
in-between unknown release is still refused. The records keep their own release key ('0.35'), so
a fit of a newer vLLM's runs is named after the vLLM that made them, not after the rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simkit.catalog.vllm_versions import VERSIONS, VllmVersion, get_vllm_version
from simkit.errors import UnknownNameError

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[.+\-]?\S*)?$")


def release_key(text: object) -> str:
    """'0.34' of '0.34.0', 'v0.34.1', '0.34.0+cu130'; '' when it is not a vLLM release string."""
    m = _RELEASE.match(str(text or "").strip().lower())
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else ""


def _order(key: str) -> tuple[int, int]:
    major, minor = key.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class ResolvedVersion:
    """A release and the known rules that stand in for it (`warning` says when they differ)."""

    key: str                   # the release's own key, '0.35': what its records and fit carry
    rules: VllmVersion         # the known version whose rules and calibration apply
    warning: str = ""          # non-empty when `rules` is not the release itself

    @property
    def exact(self) -> bool:
        return not self.warning


def resolve_vllm_version(text: object, known_keys: tuple[str, ...] = (),
                         what: str = "vLLM version") -> ResolvedVersion:
    """The rules for a vLLM release: its own when simkit knows it, else (a newer release) the
    newest known version's, with a warning that says so. `known_keys` adds releases a caller
    supports beyond the catalogue (the calibration harness knows releases the simulator may not
    yet have rules for); they resolve to the newest catalogue rules at or below them. `what`:
    the words an error names the version with (the option that gave it)."""
    try:
        v = get_vllm_version(str(text))
        return ResolvedVersion(v.key, v)
    except UnknownNameError:
        pass
    key = release_key(text)
    catalog = sorted(VERSIONS, key=_order)
    if not key:
        raise UnknownNameError(what, str(text), catalog)
    if key in VERSIONS:               # a patch or local build of a known minor ('0.33.1+cu128')
        return ResolvedVersion(key, VERSIONS[key])
    newest = catalog[-1]
    below = [k for k in catalog if _order(k) <= _order(key)]
    if key in known_keys or _order(key) > _order(max((newest, *known_keys), key=_order)):
        if not below:
            raise UnknownNameError(what, str(text), catalog)
        rules = VERSIONS[below[-1]]
        return ResolvedVersion(key, rules, (
            f"vLLM {key} is newer than the vLLM versions simkit has engine rules for "
            f"({', '.join(catalog)}): using {rules.label}'s rules, the nearest; its figures are "
            f"estimates until simkit knows {key}"))
    raise UnknownNameError(what, str(text), sorted({*catalog, *known_keys}, key=_order),
                           "only a release newer than all of these is run with the nearest "
                           "known rules")


__all__ = ["ResolvedVersion", "release_key", "resolve_vllm_version"]
