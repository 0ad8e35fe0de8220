"""Discrete-event model of vLLM 0.26's V1 engine under speculative decoding (SimPy + tight Python).

Public entry points: `simulate` (one run), `parse_configs` (the ladder), `Workload` (what is
replayed), `EngineConfig` (server limits), `ClosedLoop` / `OpenLoop` (load).
"""

from simkit.engine.config import EngineConfig, SpecConfig, parse_configs
from simkit.engine.cudagraph import CudagraphMode, Dispatcher, capture_sizes
from simkit.engine.metrics import RunMetrics
from simkit.engine.sim import ClosedLoop, OpenLoop, RunResult, simulate
from simkit.engine.workload import DrafterUnavailable, Workload

__all__ = ["ClosedLoop", "CudagraphMode", "Dispatcher", "DrafterUnavailable", "EngineConfig",
           "OpenLoop", "RunMetrics", "RunResult", "SpecConfig", "Workload", "capture_sizes",
           "parse_configs", "simulate"]
