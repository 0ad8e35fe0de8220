"""What a ladder runs on, loaded once per process: a (model, corpus) workload and its cost model.

`load_cell` loads a (model, corpus) workload profile and its cost model once per process (the
same arguments give the same objects); `clear_loaded` frees them (a sweep does after each cell).
This is the application side of the engine: it reads profiles and calibrations from disk, which
the simulator (simkit.engine) never does.
"""

from __future__ import annotations

from typing import Any

from simkit.engine.workload import Workload

_LOADED: dict[tuple, tuple[Workload, Any]] = {}


def load_workload(model: str, corpus: str, source: str = "auto", history: str | None = None,
                  capped_outputs: str = "keep", max_tokens: int = 8192) -> Workload:
    """The acceptance-replay workload of one (model, corpus) under a request history
    (simkit.history; None = the profile's own): simkit.profiles.corpus_profile.load_profile; capped outputs
    kept or extended to max_tokens (simkit.app.capped)."""
    from simkit.catalog.models import canonical_model
    from simkit.app.capped import apply_capped_outputs, check_mode
    from simkit.profiles.corpus_profile import load_profile

    check_mode(capped_outputs)
    model = canonical_model(model)
    prof = load_profile(model, corpus, source=source, tree=history)
    workload = Workload.from_profile(prof)
    if not workload.name:
        workload.name = f"{model}/{corpus}"
    return apply_capped_outputs(workload, capped_outputs, max_tokens)


def load_cell(model: str, corpus: str, hardware: str, tp: int | None, calibration: str | None,
              source: str = "auto", max_model_len: int = 16384,
              max_num_batched_tokens: int = 8192, history: str | None = None,
              capped_outputs: str = "keep", max_tokens: int = 8192,
              vllm_version: str | None = None) -> tuple[Workload, Any]:
    """(workload, cost model) of a (model, corpus, hardware) cell, loaded once per process:
    load_workload and simkit.costmodel.load_cost_model (TP None = the smallest that fits)."""
    from simkit.catalog.hardware import canonical_hardware
    from simkit.catalog.models import canonical_model
    from simkit.app.capped import check_mode

    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(vllm_version).key
    model, hardware = canonical_model(model), canonical_hardware(hardware)
    key = (model, corpus, hardware, tp, calibration, source, max_model_len,
           max_num_batched_tokens, version)
    if history is not None:
        from simkit.history import parse_history

        key = key + (parse_history(history).label,)
    if check_mode(capped_outputs) != "keep":
        key = key + (capped_outputs, max_tokens)
    if key not in _LOADED:
        from simkit.costmodel import load_cost_model

        workload = load_workload(model, corpus, source, history, capped_outputs, max_tokens)
        cost = load_cost_model(model, hardware, tp=tp, calibration=calibration,
                               max_model_len=max_model_len,
                               max_num_batched_tokens=max_num_batched_tokens,
                               vllm_version=version)
        _LOADED[key] = (workload, cost)
    return _LOADED[key]


def clear_loaded() -> None:
    """Forget every workload and cost model load_cell kept (frees their memory)."""
    _LOADED.clear()


__all__ = ["clear_loaded", "load_cell", "load_workload"]
