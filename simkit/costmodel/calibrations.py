"""Calibrations (fitted step-time coefficients as JSON) and load_cost_model, which picks the
analytic model or a calibration and labels the result accordingly. ("Profile" in simkit means
the corpus workload profile, simkit.profiles.corpus_profile; a calibration is the cost side.)"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from simkit.catalog.hardware import HardwareSpec, catalogue_entry, figures_differing, get_hardware
from simkit.catalog.models import ModelSpec, get_model
from simkit.catalog.vllm_versions import get_vllm_version
from simkit.costmodel.coefficients import Coefficients
from simkit.costmodel.memory import DEFAULT_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, choose_tp, kv_capacity_tokens
from simkit.costmodel.model import CostModel
from simkit.errors import InputError, UnknownNameError
from simkit.jsonfile import parse_json

CALIBRATION_KIND = "simkit-calibration"
# files written before the rename (cost-model "profiles") carry this kind; still read
LEGACY_KINDS = ("simkit-costmodel-profile",)
EMBEDDED_DIR = "calibrations"          # simkit/data/calibrations/*.json


def _embedded() -> dict[str, Any]:
    """Embedded calibration files (simkit/data/calibrations/*.json) by name."""
    out = {}
    folder = resources.files("simkit.data").joinpath(EMBEDDED_DIR)
    if not folder.is_dir():
        return out
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            out[entry.name[:-5]] = entry
    return out


def list_calibrations() -> list[str]:
    """Names of the embedded calibrations."""
    return sorted(_embedded())


def read_calibration(ref: str | Path) -> dict[str, Any]:
    """A calibration from a file path or an embedded name, validated (errors name file and
    field)."""
    path = Path(ref)
    if path.suffix == ".json" and path.is_file():
        text, where = path.read_bytes(), str(path)
    elif path.is_dir():
        raise InputError("is a folder; a calibration is a .json file", path=str(path))
    elif path.suffix == ".json" and str(ref) not in _embedded():
        raise InputError("no such calibration file (a calibration is a .json file that "
                         "`simkit calibrate fit` wrote, or an embedded name: "
                         f"{', '.join(sorted(_embedded()))}, analytic)", path=str(path))
    else:
        emb = _embedded()
        if str(ref) not in emb:
            raise UnknownNameError("calibration", str(ref), list(emb) + ["analytic"])
        text, where = emb[str(ref)].read_text(), f"simkit/data/{EMBEDDED_DIR}/{ref}.json"
    doc = parse_json(text, where)
    if not isinstance(doc, dict) or doc.get("kind") not in (CALIBRATION_KIND, *LEGACY_KINDS):
        raise InputError(f"not a calibration (kind must be {CALIBRATION_KIND!r})", path=where,
                         field="kind")
    for key in ("name", "hardware", "coefficients"):
        if key not in doc:
            raise InputError("required key missing", path=where, field=key)
    if not isinstance(doc["coefficients"], dict):
        raise InputError("expected an object", path=where, field="coefficients")
    if doc.get("vllm_version") is not None:
        try:
            get_vllm_version(str(doc["vllm_version"]))
        except UnknownNameError:
            from simkit.catalog.vllm_versions import VERSIONS

            raise InputError(f"vLLM version {doc['vllm_version']!r} has no engine rules in "
                             f"simkit; known: {', '.join(VERSIONS)}", path=where,
                             field="vllm_version") from None
    doc["_coefs"] = Coefficients.from_dict(doc["coefficients"], path=where)
    doc["_path"] = where
    return doc


def write_calibration(doc: dict[str, Any], path: str | Path) -> Path:
    """Write a calibration dict as sorted, indented JSON (byte-identical for identical
    content)."""
    from simkit.outfiles import write_atomic

    clean = {k: v for k, v in doc.items() if not k.startswith("_")}
    text = json.dumps(clean, indent=2, sort_keys=True) + "\n"
    return write_atomic(path, lambda tmp: tmp.write_text(text))   # a full disk: no 0-byte file


def calibration_version(doc: dict[str, Any]) -> str:
    """The vLLM version a calibration's runs were made with ('0.26' for files written before
    calibrations named it: every one of them was fitted on vLLM 0.26 runs)."""
    return get_vllm_version(str(doc.get("vllm_version") or "0.26")).key


def default_calibration(hardware: str, vllm_version: str | None = None) -> str | None:
    """The embedded calibration marked default for this hardware and fitted on that vLLM version
    (None: the newest simkit knows), or None (then: analytic)."""
    version = get_vllm_version(vllm_version).key
    for name in list_calibrations():
        doc = read_calibration(name)
        if (str(hardware).lower() in (str(h).lower() for h in doc.get("default_for", []))
                and calibration_version(doc) == version):
            return name
    return None


def load_cost_model(model: str | ModelSpec, hardware: str | HardwareSpec = "h200", tp: int | None = None,
                    calibration: str | None = None, *, gmu: float = 0.85, max_model_len: int = 16384,
                    max_num_batched_tokens: int = DEFAULT_BATCHED_TOKENS,
                    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS, async_overlap: bool = True,
                    vllm_version: str | None = None) -> CostModel:
    """The cost model for model x hardware. tp=None chooses the smallest TP with a useful KV cache
    (CostModel.tp_chosen says so; callers print it). calibration=None takes the hardware's
    default calibration if one is embedded, else the analytic coefficients (label "analytic");
    calibration="analytic" forces them; any other value is an embedded name or a JSON path.
    async_overlap=False makes async steps pay host and device in series (for comparing with
    records whose measurement synchronised every step). vllm_version (None: the newest) picks
    the default calibration of that version and is carried by the model (CostModel.vllm_version)
    to the engine's version rules; an explicit calibration of another version is labelled so."""
    spec = get_model(model) if isinstance(model, str) else model
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    mem = {"max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs}
    chosen = tp is None
    from simkit.serving_checks import check_serving

    check_serving(spec, tp, gmu=gmu)          # what vLLM would refuse to start with
    if chosen:
        tp = choose_tp(spec, hw, gmu=gmu, max_model_len=max_model_len, **mem)
    capacity = kv_capacity_tokens(spec, hw, tp, gmu, **mem)
    if capacity < max_model_len:   # vLLM refuses to start then; say so instead of a 0 deep inside
        try:
            hint = f"; the smallest TP that fits is {choose_tp(spec, hw, gmu=gmu, max_model_len=max_model_len, **mem)}"
        except InputError as exc:
            hint = f"; {exc}"
        raise InputError(f"{spec.name} does not fit on {hw.name} at TP {tp}: the KV cache left "
                         f"after weights holds {capacity:,} tokens, less than one "
                         f"{max_model_len:,}-token sequence (gmu {gmu}){hint}", field="tp")
    version = get_vllm_version(vllm_version).key
    entry = catalogue_entry(hw)         # None: a user file, whatever name it carries
    analytic_label = "analytic"
    if calibration is None:
        # a catalogue entry's fit prices only that entry: a file that borrows the name with
        # other figures gets the analytic model unless --calibration names the fit
        calibration = (default_calibration(entry, version) if entry else None) or "analytic"
        differ = figures_differing(hw) if entry is None else []
        if differ and default_calibration(hw.name, version):
            analytic_label = (f"analytic: the hardware file is named {hw.name} but its "
                              f"figures ({', '.join(differ)}) differ from the catalogue's {hw.name}, so "
                              f"{hw.name}'s calibration is not used (--calibration "
                              f"{default_calibration(hw.name, version)} transfers it)")
    if calibration == "analytic":
        return CostModel(spec, hw, tp, Coefficients(), analytic_label, capacity, chosen,
                         async_overlap=async_overlap, vllm_version=version)
    doc = read_calibration(calibration)
    coefs: Coefficients = doc["_coefs"]
    label = f"calibrated {doc['name']}"
    if doc["hardware"] != hw.name or entry is None:
        # device scales carry over as they are; host coefficients are stored in reference-host
        # seconds and CostModel divides them by this hardware's host_speed
        target = hw.name if entry else f"the hardware file named {hw.name}"
        label += f" (fitted on {doc['hardware']}, transferred to {target})"
    fitted_on = calibration_version(doc)
    if fitted_on != version:
        label += f" (fitted on vLLM {fitted_on} runs, used for {version})"
    moved = doc.get("transferred_from")
    if isinstance(moved, dict) and moved.get("note"):   # no runs of its own version yet
        label += f" ({moved['note']})"
    return CostModel(spec, hw, tp, coefs, label, capacity, chosen, async_overlap=async_overlap,
                     vllm_version=version)


__all__ = ["CALIBRATION_KIND", "LEGACY_KINDS", "calibration_version", "default_calibration", "list_calibrations",
           "load_cost_model", "read_calibration", "write_calibration"]
