"""The CLI's failure behaviour, through its real entry point (simkit.cli.main): bad input is one
`error:` line naming the option / file / line on stderr and exit 2, before any work; a run where
some requested cell or point failed prints the rest and exits 1; --debug shows the traceback.
Numeric options are fuzzed with hypothesis."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkit.cli import main
from simkit.paths import traces_src_dir

ROOT = Path(__file__).resolve().parents[2]
needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="../shared/traces-src (tokenizer files) not present")
FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


from cli_helpers import one_line_error, run  # noqa: E402
from cli_helpers import own_cache as _own_cache  # noqa: E402,F401 (autouse)


PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--configs", "vanilla",
           "--seeds", "1")
bad_counts = st.integers(max_value=0)
bad_rates = st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf]) | st.floats(max_value=0)


@FAST
@given(n=bad_counts)
def test_nonsense_request_counts_are_refused(capsys, n):
    code, out, err = run(capsys, *PREDICT, "--num-requests", str(n))
    assert code == 2 and out == ""
    one_line_error(err, "num-requests", str(n))


@FAST
@given(n=bad_counts, opt=st.sampled_from(["--workers", "--seeds", "--concurrency"]))
def test_other_predict_counts_are_refused(capsys, n, opt):
    code, out, err = run(capsys, *PREDICT, opt, str(n))
    assert code == 2 and out == ""
    one_line_error(err, f"field '{opt.lstrip('-')}'")


@FAST
@given(rate=bad_rates)
def test_nonsense_rates_are_refused(capsys, rate):
    code, out, err = run(capsys, *PREDICT, "--request-rate", str(rate))
    assert code == 2 and out == ""
    one_line_error(err, "request-rate")


COUNT_OPTIONS = {"concurrency": ["--seeds", "--min-requests", "--workers"],
                 "hardware": ["--seeds", "--concurrency", "--num-requests"],
                 "host": ["--seeds", "--concurrency", "--num-requests"],
                 "quantization": ["--seeds", "--concurrency", "--num-requests"],
                 "capacity": ["--seeds", "--min-requests", "--max-requests"],
                 "reference": ["--seeds", "--num-requests"]}


@FAST
@given(data=st.data(), n=bad_counts)
def test_whatif_counts_are_refused(capsys, data, n):
    cmd = data.draw(st.sampled_from(sorted(COUNT_OPTIONS)))
    opt = data.draw(st.sampled_from(COUNT_OPTIONS[cmd]))
    code, out, err = run(capsys, "whatif", cmd, opt, str(n))
    assert code == 2 and out == ""
    one_line_error(err, f"field '{opt.lstrip('-')}'", str(n))


@pytest.mark.parametrize("argv", [("whatif", "concurrency", "--num-requests", "5"),
                                  ("predict", "--model"), ("predict", "--seeds", "abc"),
                                  ("nope",)])
def test_usage_errors_are_one_line_too(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line_error(err)


@FAST
@given(rate=bad_rates, opt=st.sampled_from(["--target-rate", "--ttft-p99-ms", "--tpot-p99-ms"]))
def test_whatif_capacity_rates_are_refused(capsys, rate, opt):
    code, _, err = run(capsys, "whatif", "capacity", opt, str(rate))
    assert code == 2
    one_line_error(err, f"field '{opt.lstrip('-')}'")


@pytest.mark.parametrize("plot, why", [("{tmp}/missing/p.png", "does not exist"),
                                       ("{tmp}", "is a folder"),
                                       ("{tmp}/p.xyz", "unknown extension")])
def test_bad_plot_paths_fail_before_the_work(capsys, tmp_path, plot, why):
    path = plot.format(tmp=tmp_path)
    for argv in (PREDICT, ("whatif", "concurrency"), ("whatif", "hardware"), ("validate",)):
        code, out, err = run(capsys, *argv, "--plot", path)
        assert code == 2 and out == "", argv
        one_line_error(err, "plot", why)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_no_file_can_be_made_in_fails_before_the_work(capsys):
    """/proc passes os.access for root (as CI runs) yet holds no new file: the check makes
    one, so the run never starts."""
    for argv in (PREDICT, ("validate",)):
        code, out, err = run(capsys, *argv, "--plot", "/proc/p.png")
        assert code == 2 and out == "", argv
        one_line_error(err, "plot", "cannot write in folder /proc")


def test_bad_out_folder_fails_before_the_work(capsys, tmp_path):
    afile = tmp_path / "f"
    afile.write_text("x")
    code, _, err = run(capsys, "sweep", "--model", "llama-3.1-8b", "--corpus", "chat",
                       "--out", str(afile))
    assert code == 2
    one_line_error(err, "out", "not a folder")


def test_sweep_name_errors_exit_2_before_any_cell(capsys, tmp_path):
    out = tmp_path / "sw"
    code, _, err = run(capsys, "sweep", "--model", "llama-3.1-8b,nope", "--corpus", "chat",
                       "--out", str(out))
    assert code == 2 and not (out / "sweep.parquet").exists()
    one_line_error(err, "unknown model 'nope'")
    code, _, err = run(capsys, "sweep", "--model", "llama-3.1-8b", "--corpus", "",
                       "--out", str(out))
    assert code == 2
    one_line_error(err, "corpus")


def test_calibrate_merge_of_a_missing_folder(capsys, tmp_path):
    code, _, err = run(capsys, "calibrate", "merge", str(tmp_path / "nope"), "--into",
                       str(tmp_path / "m"))
    assert code == 2
    one_line_error(err, str(tmp_path / "nope"), "no such folder")


def test_garbage_and_wrong_schema_parquet(capsys, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "runs.parquet").write_bytes(b"PAR1 not really")
    (bad / "steps.parquet").write_bytes(b"")
    for argv in (("validate", "--records", str(bad)), ("calibrate", "fit", "--records", str(bad))):
        code, _, err = run(capsys, *argv)
        assert code == 2
        one_line_error(err, "not a readable parquet file")
    pd.DataFrame({"a": [1]}).to_parquet(bad / "runs.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(bad / "steps.parquet")
    code, _, err = run(capsys, "validate", "--records", str(bad))
    assert code == 2
    one_line_error(err, "runs.parquet", "missing column")
    code, _, err = run(capsys, "calibrate", "fit", "--folds", "0")
    assert code == 2
    one_line_error(err, "folds")


def test_debug_lets_the_traceback_through(capsys):
    from simkit.errors import InputError

    with pytest.raises(InputError):
        main(["--debug", *PREDICT, "--num-requests", "0"])


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    cmds = re.findall(r"```bash\n(pip install -e [^\n]+)\n```", readme)
    assert len(cmds) == 2, cmds
    assert any("pytest" in c for c in cmds)
    test_cmd = next(c for c in cmds if "pytest" in c)
    assert test_cmd in (ROOT / ".ci" / "run").read_text().splitlines()
    assert "install_arctic.sh" in test_cmd and (ROOT / "tests" / "install_arctic.sh").is_file()


@needs_traces
def test_tp_that_does_not_fit_says_so(capsys):
    code, _, err = run(capsys, "predict", "--model", "llama-3.1-70b", "--corpus", "chat",
                       "--tp", "1", "--configs", "vanilla", "--seeds", "1")
    assert code == 2
    one_line_error(err, "does not fit on h200 at TP 1", "smallest TP that fits is 2")


@needs_traces
def test_whatif_hardware_all_points_failed_exits_1(capsys):
    code, out, err = run(capsys, "whatif", "hardware", "--model", "llama-3.1-70b", "--corpus",
                         "chat", "--targets", "h100,h200", "--tps", "1", "--configs", "vanilla")
    assert code == 1
    assert "failed: h100 TP1" in err and "failed: h200 TP1" in err
    assert "2 requested point(s) failed" in err


@needs_traces
def test_sweep_with_a_failed_cell_writes_the_rest_and_exits_1(capsys, tmp_path):
    out = tmp_path / "sw"
    code, stdout, err = run(capsys, "sweep", "--model", "llama-3.1-8b,deepseek-r1", "--corpus",
                            "chat", "--hardware", "h100", "--configs", "vanilla",
                            "--num-requests", "64", "--workers", "1", "--out", str(out))
    assert code == 1
    assert "not run: deepseek-r1/chat" in err and "does not fit" in err
    assert "1 of 2 cells failed" in err and "2 cells, 1 rows" in stdout
    frame = pd.read_parquet(out / "sweep.parquet")
    assert list(frame["model"]) == ["llama-3.1-8b"] and frame["output_tok_s"].iloc[0] > 0
