"""Golden outputs: fixed simkit command lines print exactly the committed bytes (tests/golden).

A failure here means some user-visible output changed. If the change is intended, regenerate
with `python3 tests/golden/regen.py NAME` and commit the new golden file with its cause."""

from __future__ import annotations

import difflib

import pytest

from golden.cases import CASES, HERE, SHARED_PREDICTION, run_case, traces_present

HAVE_TRACES = traces_present()


# the cases that read the shared prediction run on one xdist worker: the first builds it, the
# others read it, and no worker waits on the run lock while another builds it
PARAMS = [pytest.param(c, id=c.name, marks=pytest.mark.xdist_group("golden-shared-prediction"))
          if c.name in SHARED_PREDICTION else pytest.param(c, id=c.name) for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_golden_output(case, tmp_path, request):
    if case.needs_traces and not HAVE_TRACES:
        pytest.skip("needs the raw traces (SIMKIT_TRACES_SRC)")
    if case.name in SHARED_PREDICTION:                 # one prediction, three formats
        shared = request.getfixturevalue("golden_shared_prediction")
        outputs = {f"{case.name}.out": shared[f"{case.name}.out"]}
    else:
        outputs = run_case(case, tmp_path)
    for fname, data in outputs.items():
        golden = HERE / fname
        assert golden.is_file(), f"no golden file {fname}: run python3 tests/golden/regen.py"
        want = golden.read_bytes()
        if data != want:
            diff = "".join(difflib.unified_diff(
                want.decode(errors="replace").splitlines(True),
                data.decode(errors="replace").splitlines(True), f"golden/{fname}", "now", n=1))
            pytest.fail(f"{fname} differs from its golden file (regenerate with python3 "
                        f"tests/golden/regen.py {case.name} if intended):\n{diff[:6000]}")
