"""The drafter interface and the registry of drafters, in the spirit of vLLM's proposers.

vLLM runs one proposer per speculative method (NgramProposer, SuffixDecodingProposer, ...), each
turning a request's context into draft tokens. simkit does not propose while it simulates: it
replays every request through the drafter once, ahead of time, and records per output position t
how many tokens the drafter proposed at cap K (d(t, K)) and how many of them greedy verification
accepted (a(t, K)); the engine then reads those acceptance tables. So a Drafter here is what
builds those two columns for every K = 1..kmax. (The one exception, where the requests' token ids
are in memory: simkit.drafters.suffix.in_loop drafts on the engine's simulated steps.)

A new drafter is one module: subclass Drafter, decorate it with @register, and add the module
to BUILTIN below (the registry imports it on first use). Its name is the configuration keyword
(`--configs NAME[:K]`, `NAME-kpad:K`), the key of its acceptance table in a workload and the
`drafter` a BatchDescriptor carries; `NO_DRAFTER` ("none") is vanilla's. Code that names a
built-in drafter (the cost model's per-drafter host terms, the suffix-only history tables) uses
SUFFIX_DRAFTER / NGRAM_DRAFTER, never the literal.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from simkit.choices import Ordering

if TYPE_CHECKING:                    # type hints only (keeps this module free of NumPy)
    import numpy as np

NO_DRAFTER = "none"
SUFFIX_DRAFTER = "suffix"     # simkit.drafters.suffix.replay.SuffixDrafter.name
NGRAM_DRAFTER = "ngram"       # simkit.drafters.ngram.NgramDrafter.name

# the modules that define the built-in drafters, imported on first use of the registry
BUILTIN = ("simkit.drafters.suffix.replay", "simkit.drafters.ngram", "simkit.drafters.suffix_gpu.replay")

_REGISTRY: dict[str, "Drafter"] = {}


class Drafter(ABC):
    """One speculative method: how its acceptance tables are built, and its defaults."""

    name: ClassVar[str]               # configuration keyword and table key, e.g. "suffix"
    default_k: ClassVar[int]          # K of the bare keyword ("suffix" = suffix:24)
    kpad_label: ClassVar[str]         # keyword of its padded configs ("kpad" -> kpad-8)
    remembers_history: ClassVar[bool]  # drafts depend on what the server served before
    # its replay also records each draft's source and match length (a `sources=(source,
    # match_len)` keyword of replay/replay_warm; AcceptanceTable.source, .match_len)
    emits_sources: ClassVar[bool] = False
    # every decoding request verifies exactly K slots, unmatched ones holding a filler token
    # (vLLM 0.34's GPU speculators): a(t, K) counts accepted fillers and may exceed d(t, K)
    fills_k_slots: ClassVar[bool] = False

    @abstractmethod
    def default_params(self) -> Any:
        """The drafter's settings at vLLM's defaults (a frozen dataclass with as_dict())."""

    @abstractmethod
    def replay(self, requests: Sequence, params: Any, kmax: int, offsets: np.ndarray,
               accepted: np.ndarray, drafted: np.ndarray, *, ordering: Ordering, concurrency: int,
               progress: Callable[[int], None] | None, engine: str | None,
               prelude: Sequence) -> Ordering:
        """Fill `drafted[row, K-1]` = d(t, K) and `accepted[row, K-1]` = a(t, K) for every
        request (rows offsets[r] + t) and K = 1..kmax, replaying the requests in `ordering`
        (sequential, or concurrent at `concurrency`) after the `prelude` responses; call
        `progress(n)` with each request's output tokens. Returns the ordering it used (a drafter
        whose drafts depend on the request alone replays sequential whatever is asked)."""

    def label(self, k: int) -> str:
        """Row label of the unpadded config at cap K: the name at its default K, else name-K."""
        return self.name if k == self.default_k else f"{self.name}-{k}"

    def kpad_row_label(self, k: int) -> str:
        """Row label of the config padded to exactly K drafts."""
        return f"{self.kpad_label}-{k}"


def register(cls: type[Drafter]) -> type[Drafter]:
    """Class decorator: make the drafter known under its name (a second one of a name fails)."""
    if cls.name in _REGISTRY or cls.name == NO_DRAFTER:
        raise ValueError(f"a drafter named {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls()
    return cls


def _load_builtin() -> None:
    for module in BUILTIN:
        importlib.import_module(module)


def drafter_names() -> tuple[str, ...]:
    """Every registered drafter's name, in registration order (suffix, ngram, ...)."""
    _load_builtin()
    return tuple(_REGISTRY)


def get_drafter(name: str) -> Drafter:
    """The registered drafter `name`; ValueError naming the known ones otherwise."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown drafter {name!r} ({', '.join(_REGISTRY)})")
    return _REGISTRY[name]



# the replay engines of the drafters that have two: "compiled" (numba, the default) and "python"
# (the pure reference; SIMKIT_PURE_DRAFTER=1), the same tables byte for byte
ENGINES = ("compiled", "python")


def resolve_engine(engine: str | None = None) -> str:
    """A replay engine: `engine` if given, else "python" when SIMKIT_PURE_DRAFTER=1, else
    "compiled"."""
    import os

    if engine is None:
        engine = "python" if os.environ.get("SIMKIT_PURE_DRAFTER", "") == "1" else "compiled"
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    return engine


__all__ = ["BUILTIN", "Drafter", "ENGINES", "NGRAM_DRAFTER", "NO_DRAFTER", "SUFFIX_DRAFTER",
           "drafter_names", "get_drafter", "register", "resolve_engine"]
