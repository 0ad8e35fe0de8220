"""Hardware catalogue: per-GPU memory, bandwidth and peak throughput, NVLink, and the host CPU
as a speed factor. Datasheet values are the starting point; a calibrated profile says so."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from simkit.errors import InputError, UnknownNameError


@dataclass(frozen=True)
class HardwareSpec:
    """One GPU type (values per GPU) plus the speed of the host CPU that drives it."""

    name: str
    display: str
    hbm_gib: float              # memory the driver reports as total (GiB)
    hbm_tbps: float             # peak HBM bandwidth, TB/s (1e12 bytes/s)
    bf16_tflops: float          # dense (no sparsity) tensor-core peaks
    fp8_tflops: float
    fp4_tflops: float           # 0 when the GPU has no FP4 tensor cores
    nvlink_gbps: float          # NVLink bandwidth per GPU, both directions together, GB/s
    host_cpu: str
    host_speed: float           # host CPU speed relative to the reference host (h200 machine = 1.0)
    source: str
    notes: str = ""
    calibrated: str | None = None   # None = datasheet values; else the profile that replaced them

    @property
    def hbm_bytes(self) -> float:
        """Total device memory in bytes."""
        return self.hbm_gib * 2**30

    def peak_flops(self, dtype: str) -> float:
        """Dense tensor-core peak in FLOP/s for weights of `dtype` (bf16, fp8, fp4)."""
        tf = {"bf16": self.bf16_tflops, "fp16": self.bf16_tflops, "fp8": self.fp8_tflops,
              "fp4": self.fp4_tflops}.get(dtype)
        if not tf:
            raise InputError(f"{self.name} has no {dtype} tensor-core throughput", field="weight_dtype")
        return tf * 1e12

    @property
    def label(self) -> str:
        """'datasheet' or 'calibrated <profile>', shown wherever the values are."""
        return f"calibrated {self.calibrated}" if self.calibrated else "datasheet"

    def summary(self) -> dict[str, Any]:
        """All fields plus the label, for `simkit hardware show` and JSON output."""
        return {**asdict(self), "label": self.label}


# the figures that price a step; a hardware file equal to a catalogue entry in these (and its
# name) is that entry
_FIGURES = ("hbm_gib", "hbm_tbps", "bf16_tflops", "fp8_tflops", "fp4_tflops", "nvlink_gbps",
            "host_speed")
_REQUIRED = ("display", "hbm_gib", "hbm_tbps", "bf16_tflops", "fp8_tflops", "fp4_tflops",
             "nvlink_gbps", "host_cpu", "host_speed", "source")


def hardware_from_dict(doc: dict, path: str) -> HardwareSpec:
    """Validate one hardware JSON document; errors name the file and the field."""
    for key in _REQUIRED:
        if key not in doc:
            raise InputError("required key missing", path=path, field=key)
    for key in _FIGURES:
        if not isinstance(doc[key], (int, float)) or isinstance(doc[key], bool) or doc[key] < 0:
            raise InputError(f"expected a non-negative number, got {doc[key]!r}", path=path, field=key)
        if not math.isfinite(doc[key]):     # JSON's NaN/Infinity parse as floats; never priceable
            raise InputError(f"expected a finite number, got {doc[key]!r}", path=path, field=key)
    for key in ("hbm_gib", "hbm_tbps", "bf16_tflops", "host_speed"):
        if doc[key] <= 0:
            raise InputError("must be positive", path=path, field=key)
    fields = {k: doc[k] for k in _REQUIRED}
    return HardwareSpec(name=doc.get("name", path), notes=doc.get("notes", ""),
                        calibrated=doc.get("calibrated"), **fields)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, HardwareSpec]:
    """Every embedded hardware entry (simkit/data/hardware/*.json), by id."""
    out = {}
    for entry in resources.files("simkit.data").joinpath("hardware").iterdir():
        if entry.name.endswith(".json"):
            path = f"simkit/data/hardware/{entry.name}"
            try:
                doc = json.loads(entry.read_text())
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
            spec = hardware_from_dict(doc, path)
            out[spec.name] = spec
    return out


def list_hardware() -> list[str]:
    """Ids of the embedded hardware entries, sorted."""
    return sorted(_catalog())


def hardware_from_json(path: str) -> HardwareSpec:
    """A user hardware entry from a JSON file with the catalogue's fields (errors name the field)."""
    from pathlib import Path

    from simkit.jsonfile import read_json_file

    doc = read_json_file(path)
    if not isinstance(doc, dict):
        raise InputError("expected a JSON object", path=str(path))
    doc.setdefault("name", Path(path).stem)
    return hardware_from_dict(doc, str(path))


def get_hardware(name: str) -> HardwareSpec:
    """An embedded hardware entry by id (case-insensitive), or a user entry from a .json path."""
    cat = _catalog()
    key = name.lower()
    if key in cat:
        return cat[key]
    if name.endswith(".json"):
        return hardware_from_json(name)
    raise UnknownNameError("hardware", name, list(cat))


def catalogue_entry(spec: HardwareSpec) -> str | None:
    """The id of the catalogue entry `spec` is (same name, case-insensitive, and the same
    figures), else None: a user file that only borrows an entry's name is not that entry."""
    entry = _catalog().get(str(spec.name).lower())
    if entry is None or any(getattr(spec, k) != getattr(entry, k) for k in _FIGURES):
        return None
    return entry.name


def figures_differing(spec: HardwareSpec) -> list[str]:
    """The figures in which `spec` differs from the catalogue entry of its name (empty when
    no entry has that name or none differs)."""
    entry = _catalog().get(str(spec.name).lower())
    if entry is None:
        return []
    return [k for k in _FIGURES if getattr(spec, k) != getattr(entry, k)]


def canonical_hardware(name: str) -> str:
    """The catalogue id of `name` matched case-insensitively (H200 -> h200), or of a hardware
    JSON file equal to a catalogue entry (catalogue_entry), else `name` as given (another
    hardware JSON path or an unknown name, which get_hardware refuses). Labels, default
    calibrations and reports key on the id, so one spelling must reach them all."""
    key = str(name).lower()
    if key in _catalog():
        return key
    if str(name).endswith(".json"):
        return catalogue_entry(hardware_from_json(name)) or name
    return name


__all__ = ["HardwareSpec", "canonical_hardware", "catalogue_entry", "figures_differing", "get_hardware", "list_hardware", "hardware_from_dict", "hardware_from_json"]
