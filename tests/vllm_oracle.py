"""vLLM 0.34's own pure-Python rules as test oracles: files that tests/install_vllm034_oracle.sh takes
from the vLLM 0.34.0 wheel into the oracle folder (tests/vllm034_oracle.py `oracle_dir`), executed
one by one without importing the vllm package (which needs torch and vLLM's dependencies). Tests
that use them skip, saying why, when the folder lacks the file."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.vllm034_oracle import oracle_dir


def load_file(name: str, module_name: str) -> ModuleType:
    """Execute one self-contained file of the oracle folder as a module."""
    path = oracle_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} absent (run tests/install_vllm034_oracle.sh)")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dynamic_schedule_module() -> ModuleType:
    """vllm/v1/spec_decode/dynamic/utils.py: the batch-size K schedule's checks and expansion."""
    return load_file("dynamic_utils.py", "vllm034_dynamic_schedule")
