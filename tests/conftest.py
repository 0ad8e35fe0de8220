"""Fixtures every test shares.

- reset_process_caches (autouse): each test starts with simkit's per-process memory empty (the
  workloads and cost models load_cell keeps, the ladder cells), so no test sees what an earlier
  one loaded under another profile folder or cache directory, and the order tests run in (or the
  worker they run on) changes nothing.
- golden_shared_prediction (session): the README's prediction, printed as a table, JSON and CSV
  by one process that predicts once (tests/golden/shared_prediction.py).
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def reset_process_caches():
    """Empty simkit's per-process caches (load_cell's, the ladder cells) before and after each
    test. The lru_caches of the embedded catalogues and tokenizers stay: they hold files shipped with
    simkit or keyed by their path and mtime, the same whatever a test changes."""
    from simkit.app.cells import clear_loaded
    from simkit.engine import runner

    clear_loaded()
    runner._CELLS.clear()
    yield
    clear_loaded()
    runner._CELLS.clear()


@pytest.fixture(scope="session")
def golden_shared_prediction(tmp_path_factory) -> dict[str, bytes]:
    """{golden file name: bytes} of the golden cases SHARED_PREDICTION, run once per session."""
    from golden.cases import CASES, SHARED_PREDICTION, run_shared_prediction

    cases = tuple(c for c in CASES if c.name in SHARED_PREDICTION)
    return run_shared_prediction(cases, tmp_path_factory.mktemp("golden-predict"))
