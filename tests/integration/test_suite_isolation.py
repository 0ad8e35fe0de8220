"""The test suite's own isolation (tests/conftest.py), checked on a small pytest run of its own:
each run has its own simkit cache folder, and a test that leaves a SIMKIT_* variable changed
fails by name while the next test sees the variable put back (the order tests run in then
changes nothing: a flaky test of test_validate.py read another test's leftovers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]      # tests/
# both tests read the module's two small pytest runs (a few CPU-s each): on one xdist worker,
# so they run once
pytestmark = pytest.mark.xdist_group("suite-isolation")
TESTS = '''
import os

def test_a_leaks():
    os.environ["SIMKIT_TRACES_SRC"] = "/nonexistent/leaked"

def test_b_sees_it_put_back():
    assert os.environ.get("SIMKIT_TRACES_SRC") == os.environ["EXPECTED_TRACES_SRC"]

def test_c_cache(tmp_path_factory):
    print("CACHE=" + os.environ["SIMKIT_CACHE_DIR"])
    print("BASE=" + str(tmp_path_factory.getbasetemp()))
'''


def _run(tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "test_leak.py").write_text(TESTS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent)]),
               SIMKIT_PURE_DRAFTER="1", EXPECTED_TRACES_SRC="/some/traces",
               SIMKIT_TRACES_SRC="/some/traces")
    env.pop("SIMKIT_TEST_CACHE_DIR", None)
    for name in [k for k in env if k.startswith("PYTEST_XDIST")]:   # run inside an xdist worker:
        env.pop(name)                    # the small run is a session of its own, not a worker
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-n", "0", "-s", "-q", "-o", "addopts=",
                           "--basetemp", str(folder / "base"), str(folder / "test_leak.py")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[str]:
    """The output of two runs of the small test file, each in a folder of its own."""
    base = tmp_path_factory.mktemp("isolation")
    return [_run(base, name).stdout for name in ("one", "two")]


def test_a_leaked_variable_fails_its_test_and_is_put_back(two_runs):
    out = two_runs[0]
    assert "test_leak.py::test_a_leaks left SIMKIT_TRACES_SRC changed" in out, out
    assert "1 error" in out and "3 passed" in out, out     # b passed: the variable put back


def test_each_run_has_its_own_cache_in_its_temporary_folder(two_runs):
    caches = []
    for out in two_runs:
        cache = re.search(r"CACHE=(\S+)", out).group(1)
        base = re.search(r"BASE=(\S+)", out).group(1)
        assert Path(cache).parent == Path(base), out
        caches.append(cache)
    assert caches[0] != caches[1]
