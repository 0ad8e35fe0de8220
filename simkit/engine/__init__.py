"""Discrete-event model of vLLM 0.26's V1 engine under speculative decoding (SimPy + tight Python).

Public entry points: `simulate` (one run), `parse_configs` (the ladder), `Workload` (what is
replayed), `EngineConfig` (server limits), `ClosedLoop` / `OpenLoop` (load); the ladder runner is
simkit.engine.runner. Names load on first use, so that importing a light submodule (the config
lists the CLI's option defaults read) does not import NumPy and SimPy.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"EngineConfig": "config", "SpecConfig": "config", "parse_configs": "config",
          "CudagraphMode": "cudagraph", "Dispatcher": "cudagraph", "capture_sizes": "cudagraph",
          "RunMetrics": "metrics", "ClosedLoop": "sim", "OpenLoop": "sim", "RunResult": "sim",
          "simulate": "sim", "DrafterUnavailable": "workload", "Workload": "workload"}


def __getattr__(name: str) -> Any:
    """The public names above, imported from their submodule on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module 'simkit.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(f"simkit.engine.{_WHERE[name]}"), name)


__all__ = sorted(_WHERE)
