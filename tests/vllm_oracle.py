"""vLLM 0.34's own pure-Python files as test oracles, read from a copy of the vLLM 0.34.0 wheel
unpacked into a folder (SIMKIT_VLLM_ORACLE, default `.oracles/vllm-0.34.0` in the repository), never
from the environment: a vLLM without torch on the path would look to `simkit calibrate run` like a
broken install. Files are executed one by one, without importing the vllm package (which needs
torch). Tests that use them skip, saying why, when the folder is absent."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

ORACLE_VERSION = "0.34.0"
_DEFAULT = Path(__file__).resolve().parent.parent / ".oracles" / f"vllm-{ORACLE_VERSION}"


def oracle_root() -> Path:
    """The folder holding the unpacked wheel (its `vllm/` package and dist-info)."""
    return Path(os.environ.get("SIMKIT_VLLM_ORACLE") or _DEFAULT)


def vllm_file(relative: str) -> Path:
    """The path of a file of the unpacked vLLM 0.34.0 wheel (skip when absent)."""
    root = oracle_root()
    if not (root / f"vllm-{ORACLE_VERSION}.dist-info").is_dir():
        pytest.skip(f"vLLM {ORACLE_VERSION}'s source is not unpacked at {root} "
                    "(tests/install_oracles.sh unpacks it)")
    path = root / "vllm" / relative
    if not path.is_file():
        pytest.skip(f"vllm/{relative} is not in vLLM {ORACLE_VERSION}")
    return path


def load_file(relative: str, name: str) -> ModuleType:
    """Execute one self-contained vLLM source file as a module (no package import)."""
    spec = importlib.util.spec_from_file_location(name, vllm_file(relative))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dynamic_schedule_module() -> ModuleType:
    """vllm/v1/spec_decode/dynamic/utils.py: the batch-size K schedule's checks and expansion."""
    return load_file("v1/spec_decode/dynamic/utils.py", "vllm034_dynamic_schedule")
