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
  by one process that predicts once (tests/golden/shared_prediction.py), once per pytest run
  whichever xdist workers its tests land on.
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


def _run_folder(tmp_path_factory) -> Path:
    """A folder of this pytest run that every xdist worker sees (each worker's own basetemp sits
    inside it); without xdist, the run's basetemp itself (its parent outlives the run)."""
    import os

    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _run_lock(tmp_path_factory, name: str):
    """An exclusive lock of this pytest run, across its xdist workers (no-op without fcntl)."""
    try:
        import fcntl
    except ImportError:                      # not a POSIX system: no turns taken
        yield
        return
    with open(_run_folder(tmp_path_factory) / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def golden_shared_prediction(tmp_path_factory) -> dict[str, bytes]:
    """{golden file name: bytes} of the golden cases SHARED_PREDICTION, run once per pytest run:
    the first worker to need them runs them, the others read the bytes it wrote."""
    from golden.cases import CASES, SHARED_PREDICTION, run_shared_prediction

    cases = tuple(c for c in CASES if c.name in SHARED_PREDICTION)
    folder = _run_folder(tmp_path_factory) / "golden-prediction"
    with _run_lock(tmp_path_factory, "golden-prediction"):
        if not (folder / "done").is_file():
            folder.mkdir(exist_ok=True)
            run_shared_prediction(cases, folder)
            (folder / "done").write_text("")
    return {f"{c.name}.out": (folder / f"{i}.out").read_bytes() for i, c in enumerate(cases)}


@pytest.fixture
def one_ray_instance(tmp_path_factory):
    """Hold a lock shared by every xdist worker of this run while the test runs."""
    with _run_lock(tmp_path_factory, "ray"):
        yield
