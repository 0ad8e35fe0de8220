"""Harness adapters: how a calibration run makes vLLM reproduce a trace, one module per way.

- `forcing` (vLLM 0.26, 0.33): overwrite the logits of every sampled position so greedy sampling
  picks the trace's token (calibrate.forcing); K-pad and dynamic K through scheduler plugins.
- `trace_replay` (vLLM 0.34+): vLLM's own trace replay (`enable_trace_replay=True` and
  `SamplingParams(trace_decode_token_ids=...)`): drafts are accepted iff they equal the trace,
  read from GPU state, so it is safe under async scheduling; K-pad is built in and dynamic K is
  the engine's `num_speculative_tokens_per_batch_size`.

An adapter is looked up by name (`get_adapter`), the way vLLM picks a speculator class by method.
Which name a vLLM release uses is the catalogue's `VllmVersion.harness_adapter`
(simkit.catalog.vllm_versions; a newer release takes the nearest known version's, with a warning:
calibrate.harness.versions).
"""

from __future__ import annotations

import importlib
from typing import Any

from simkit.catalog.vllm_versions import VERSIONS

# adapter name -> module holding its ADAPTER object
ADAPTERS = {"forcing": "calibrate.harness.forcing", "trace_replay": "calibrate.harness.trace_replay"}
# vLLM release key -> adapter name, read from the catalogue (one place for it)
HARNESS_BY_VERSION = {key: v.harness_adapter for key, v in VERSIONS.items()}


def get_adapter(name: str) -> Any:
    """The adapter registered under `name` (a ValueError naming the known ones otherwise)."""
    if name not in ADAPTERS:
        raise ValueError(f"unknown harness adapter {name!r}; known: {', '.join(sorted(ADAPTERS))}")
    return importlib.import_module(ADAPTERS[name]).ADAPTER


__all__ = ["ADAPTERS", "HARNESS_BY_VERSION", "get_adapter"]
