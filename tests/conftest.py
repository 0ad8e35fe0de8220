"""The test tiers and the fixtures every test shares.

Tiers, one folder each; every test is marked with its folder's name, so `pytest -m unit` runs
one tier (the README's `python3 -m pytest -q` runs them all, on every core: pytest-xdist):
- tests/unit: one module's logic on small inputs written in the test (no command line, no
  committed records, no raw traces); the whole tier runs in seconds.
- tests/integration: through the command line, the shipped profiles, the committed GPU records
  or the raw traces.
- tests/slow: the long end-to-end checks: the golden outputs (one fresh process per command),
  the notebooks, the Ray executors, the compiled drafter against the reference over real
  slices, the parity with arctic-inference.
Helpers the tiers share stay beside this file (engine_doubles, cli_helpers, user_traffic,
golden/, data/); pytest puts this folder on sys.path.

- reset_process_caches (autouse): each test starts with simkit's per-process memory empty (the
  workloads and cost models load_cell keeps, the ladder cells), so no test sees what an earlier
  one loaded under another profile folder or cache directory, and the order tests run in (or the
  worker they run on) changes nothing.
- golden_shared_prediction (session): the README's prediction, printed as a table, JSON and CSV
  by one process that predicts once (tests/golden/shared_prediction.py).
- one_ray_instance: the tests that start a local Ray instance take turns, across the xdist
  workers too (a file lock), so that two Ray instances never compete for the same cores.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "slow")


def pytest_collection_modifyitems(items):
    """Mark each test with its tier (its folder under tests/)."""
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIERS:
            item.add_marker(tier)


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


@pytest.fixture
def one_ray_instance(tmp_path_factory):
    """Hold a lock shared by every xdist worker of this run while the test runs (where the OS
    has no fcntl, tests simply do not take turns)."""
    try:
        import fcntl
    except ImportError:                      # not a POSIX system
        yield
        return
    root = tmp_path_factory.getbasetemp().parent   # the run's folder, above each worker's own
    with open(root / "ray.lock", "w") as fh, contextlib.ExitStack() as stack:
        fcntl.flock(fh, fcntl.LOCK_EX)
        stack.callback(fcntl.flock, fh, fcntl.LOCK_UN)
        yield
