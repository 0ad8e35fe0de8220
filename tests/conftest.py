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

- the order: the tests marked slow first, then the other integration tests, the unit tests
  last (start_rank), each rank in pytest-randomly's shuffled order: on the xdist workers the
  long tests start first and the short ones fill the end.
- the run's own simkit cache (SIMKIT_CACHE_DIR in the run's temporary folder; session start),
  and no_environment_leak (autouse): a test that leaves a SIMKIT_* variable changed fails.
- reset_process_caches (autouse): each test starts with simkit's per-process memory empty (the
  workloads and cost models load_cell keeps, the ladder cells), so no test sees what an earlier
  one loaded under another profile folder or cache directory, and the order tests run in (or the
  worker they run on) changes nothing.
- golden_shared_prediction (session): the README's prediction, printed as a table, JSON and CSV
  by one process that predicts once (tests/golden/shared_prediction.py), once per pytest run
  whichever xdist workers its tests land on.
- once_per_run (session): a result computed once per pytest run across the xdist workers;
  fleet_validation_rows (session) is every recorded fleet run replayed (validate_fleet) so.
- readme_prediction (session): the README's pasted prediction command, run once per pytest run
  in a fresh clone of its own (tests/slow/test_readme_fresh.py and test_report read it).
- one_ray_instance: the tests that start a local Ray instance take turns, across the xdist
  workers too (a file lock), so that two Ray instances never compete for the same cores.

The suffix drafter's numba kernels are compiled once per run, in the background from the start
(simkit.drafters.suffix.jit_lock, as `simkit validate` does, holding a file lock while it
compiles): a test's first compiled replay waits for that lock instead of compiling the same
kernels again in every xdist worker (on a fresh clone, about 14 CPU-s each).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "slow")
HERE = Path(__file__).resolve().parent
_WARMUP = pytest.StashKey[object]()   # the background compile's handle, in the controller


@pytest.hookimpl(tryfirst=True)        # before pytest-xdist starts the workers (they inherit it)
def pytest_sessionstart(session):
    """The run's one process that is not an xdist worker gives the run its own simkit cache
    (SIMKIT_CACHE_DIR, session_cache_dir) and starts simkit's background compile of the
    drafter's kernels (simkit.drafters.suffix.jit_lock, holding a file lock); every process of
    the run (the workers, the commands tests start) inherits both: one cache shared within the
    run, none with other runs or with whatever else uses the machine's ~/.cache/simkit, and a
    first compiled replay that waits for the compile (numba's cache of the compiled kernels
    lives beside the drafter's sources, not in simkit's cache: it is kept between runs)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        from simkit.drafters.suffix import jit_lock

        os.environ["SIMKIT_CACHE_DIR"] = str(session_cache_dir(session.config))
        session.config.stash[_WARMUP] = jit_lock.start()


def session_cache_dir(config) -> Path:
    """The run's simkit cache: SIMKIT_TEST_CACHE_DIR when set (to reuse a warm cache on purpose),
    else a folder in the run's temporary folder (pytest keeps the last three runs' folders)."""
    chosen = os.environ.get("SIMKIT_TEST_CACHE_DIR")
    if chosen:
        return Path(chosen)
    return config._tmp_path_factory.getbasetemp() / "simkit-cache"


def pytest_terminal_summary(terminalreporter, config):
    """The shuffled order's seed, also under -q (pytest-randomly names it only in the header,
    which -q leaves out): a failure that depends on the order is reproduced with it."""
    seed = getattr(config.option, "randomly_seed", None)
    if seed is not None and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"test order shuffled with seed {seed} (again: "
                                    f"--randomly-seed={seed}; the file order: -p no:randomly)")


def pytest_report_header(config):
    """Name the run's simkit cache in the header (the controller's, set at session start)."""
    return f"simkit cache: {os.environ.get('SIMKIT_CACHE_DIR')}"


def pytest_sessionfinish(session):
    """Stop the background compile if the run ended first (a few tests that replay nothing: numba
    writes each cache file whole, so the next run compiles what is missing); remove its lock."""
    from simkit.drafters.suffix import jit_lock

    jit_lock.stop(session.config.stash.get(_WARMUP, None))


def pytest_collection_modifyitems(items):
    """Mark each test with its tier (its folder under tests/), then put the long tests first
    (start_rank): the xdist workers take tests in this order, so the long ones start early and
    the many short ones fill the end of the run, instead of one worker finishing a long test
    alone while the other idles (pytest-randomly's shuffle is kept within each rank; runs
    after it, and every worker computes the same order)."""
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIERS:
            item.add_marker(tier)
    items.sort(key=start_rank)                      # stable


def start_rank(item) -> int:
    """0: marked slow (tests/slow, and the long ones elsewhere: pytest.mark.slow); 1: the other
    integration tests; 2: the rest (unit: seconds in all)."""
    names = {m.name for m in item.iter_markers()}
    return 0 if "slow" in names else 1 if "integration" in names else 2


@pytest.fixture(autouse=True)
def no_environment_leak(request):
    """A test that leaves a SIMKIT_* variable of os.environ changed fails (its name in the
    message) and the variables are put back: a later test on the same worker would otherwise
    read another test's cache or trace folder, and fail or pass by the order tests ran in."""
    before = {k: v for k, v in os.environ.items() if k.startswith("SIMKIT_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("SIMKIT_")}
    if after != before:
        for k in set(after) - set(before):
            del os.environ[k]
        os.environ.update(before)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        pytest.fail(f"{request.node.nodeid} left {', '.join(changed)} changed in os.environ "
                    "(use monkeypatch.setenv)", pytrace=False)


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


@pytest.fixture(scope="session")
def readme_prediction(tmp_path_factory):
    """The README's pasted prediction command (readme_commands.README_PREDICTION) run once per
    pytest run as a fresh clone runs it (its own process, raw traces hidden, a new cache, in a
    folder with docs/img for its --plot), as a CompletedProcess (text): the fresh-clone test
    checks it ran, test_report that it prints the README's example."""
    import subprocess

    from readme_commands import README_PREDICTION, fresh_env, run_fresh

    folder = _run_folder(tmp_path_factory) / "readme-prediction"
    with _run_lock(tmp_path_factory, "readme-prediction"):
        if not (folder / "done").is_file():
            (folder / "docs" / "img").mkdir(parents=True, exist_ok=True)
            proc = run_fresh(folder, fresh_env(folder), README_PREDICTION)
            for name in ("stdout", "stderr"):
                (folder / name).write_text(getattr(proc, name))
            (folder / "done").write_text(str(proc.returncode))
    return subprocess.CompletedProcess(README_PREDICTION, int((folder / "done").read_text()),
                                       (folder / "stdout").read_text(),
                                       (folder / "stderr").read_text())


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory):
    """once_per_run(name, compute) -> compute(), computed once per pytest run: the first xdist
    worker to ask runs it, the others read its result (pickled: the same values). For what a
    module fixture would compute again on every worker its tests land on."""
    import pickle

    def once(name: str, compute):
        path = _run_folder(tmp_path_factory) / f"{name}.pickle"
        with _run_lock(tmp_path_factory, name):
            if not path.is_file():
                path.write_bytes(pickle.dumps(compute()))
        return pickle.loads(path.read_bytes())

    return once


@pytest.fixture(scope="session")
def fleet_validation_rows(once_per_run) -> list[dict]:
    """simkit.fleet.validate.validate_fleet() (the default calibration), once per pytest run
    (18 CPU-s): tests/integration/test_fleet_validation.py checks the rows and the README's fleet
    figures are checked on `fleet validate`'s rendering of them (test_readme)."""
    from simkit.fleet.validate import validate_fleet

    return once_per_run("fleet-validation", validate_fleet)


@pytest.fixture
def one_ray_instance(tmp_path_factory):
    """Hold a lock shared by every xdist worker of this run while the test runs."""
    with _run_lock(tmp_path_factory, "ray"):
        yield
