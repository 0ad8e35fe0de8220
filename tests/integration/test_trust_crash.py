"""Bad input that used to crash or mislead (issue 41): each case is one `error:` line naming the
option, file, line or field, exit 2, before any work; or, for the poor class, a prompt stop,
no empty file left behind, and messages that say what is wrong. Each test failed before its
fix."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import one_line_error, run
from cli_helpers import own_cache as _own_cache  # noqa: F401 (autouse)

ROOT = Path(__file__).resolve().parents[2]
PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "code-edit", "--seeds", "1",
           "--num-requests", "16", "--source", "shipped", "--workers", "1")


# -- unreadable JSON: binary files, deep nesting, huge numbers ---------------------------------

@pytest.mark.parametrize("option", ["--hardware", "--calibration"])
def test_a_binary_file_as_hardware_or_calibration_is_one_line(capsys, tmp_path, option):
    f = tmp_path / "blob.json"
    f.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)     # a PNG header, say
    code, out, err = run(capsys, *PREDICT, option, str(f))
    assert code == 2 and out == ""
    one_line_error(err, str(f), "not UTF-8")


def test_a_binary_or_deeply_nested_model_file_is_one_line(capsys, tmp_path):
    """A model's config.json goes through the same reader as the hardware and calibration files
    (it ended in a traceback for binary or 100k-deep input)."""
    blob = tmp_path / "config.json"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    code, _, err = run(capsys, "models", "show", str(blob))
    assert code == 2
    one_line_error(err, str(blob), "not UTF-8")
    blob.write_text("[" * 100_000)
    code, _, err = run(capsys, "models", "show", str(blob))
    assert code == 2
    one_line_error(err, str(blob), "nested")


@pytest.mark.parametrize("option", ["--hardware", "--calibration"])
def test_a_folder_as_hardware_or_calibration_is_named_a_folder(capsys, tmp_path, option):
    folder = tmp_path / "mine.json"
    folder.mkdir()
    code, _, err = run(capsys, *PREDICT, option, str(folder))
    assert code == 2
    line = one_line_error(err, str(folder), "folder")
    assert "no such" not in line


NESTED = "[" * 100_000
LONG_INT = "9" * 5000


@pytest.mark.parametrize("fmt,line,where,reason", [
    ("openai", NESTED, "line 2", "nested too deeply"),
    ("sharegpt", NESTED, "", "nested too deeply"),        # a whole JSON document: no line
    ("vllm-custom", '{"prompt": "hi", "output": ' + NESTED + "}", "line 2", "nested too deeply"),
    ("openai", '{"messages": [{"role": "user", "content": "hi"}], "response": "x", '
               f'"temperature": {LONG_INT}}}', "line 2", "digits"),
    ("tokens", f'{{"prompt_ids": [{LONG_INT}], "output_ids": [1]}}', "line 2", "digits"),
], ids=["openai-nested", "sharegpt-nested", "custom-nested", "openai-digits", "tokens-digits"])
def test_unreadable_json_in_an_import_names_the_file_and_line(capsys, tmp_path, fmt, line, where,
                                                              reason):
    f = tmp_path / "t.jsonl"
    f.write_text('{"prompt_ids": [1], "output_ids": [2]}\n' if fmt == "tokens" else "\n")
    with f.open("a") as fh:
        fh.write(line + "\n")
    code, out, err = run(capsys, "traces", "import", str(f), "--format", fmt, "--name", "n",
                         "--tokenizer", "llama3")
    if "tokenizer files not found" in err:
        pytest.skip("the tokens format checks ids against the tokenizer (raw traces needed)")
    assert code == 2 and out == ""
    one_line_error(err, str(f), where, reason)


def test_errors_raised_in_worker_processes_pickle_whole():
    """A SimkitError that crosses a process pool used to break it (BrokenProcessPool):
    UnknownNameError could not be rebuilt from its message alone."""
    from simkit.errors import InputError, UnknownNameError

    for exc in (UnknownNameError("calibration", "nosuch", ["a", "b"]),
                InputError("bad", path="f.json", line=3, field="x")):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
        assert back.__dict__ == exc.__dict__


def test_fleet_validate_with_an_unknown_calibration_is_refused_before_work(capsys):
    code, out, err = run(capsys, "fleet", "validate", "--calibration", "nosuch")
    assert code == 2 and out == ""
    one_line_error(err, "unknown calibration 'nosuch'", "h200-vllm033")


# -- calibrate fit: runs without steps, unknown hardware ---------------------------------------

@pytest.fixture(scope="module")
def partial_records(tmp_path_factory):
    """Six calibration runs of the shipped 0.33 records, three of them (vanilla) with their
    steps and three (suffix) without, and a copy where no run has steps."""
    import pandas as pd

    src = ROOT / "calibrate" / "data" / "vllm-0.33"
    runs = pd.read_parquet(src / "runs.parquet")
    runs = runs[(runs.purpose == "calibration") & (runs.model == "llama-3.1-8b")]
    vanilla = runs[runs.config == "vanilla"].run_id.tolist()[:3]
    suffix = runs[runs.config == "suffix"].run_id.tolist()[:3]
    runs = runs[runs.run_id.isin(vanilla + suffix)]
    steps = pd.read_parquet(src / "steps.parquet", filters=[("run_id", "in", vanilla)])
    some, none = tmp_path_factory.mktemp("some"), tmp_path_factory.mktemp("none")
    runs.to_parquet(some / "runs.parquet")
    steps.to_parquet(some / "steps.parquet")
    runs.to_parquet(none / "runs.parquet")
    steps.iloc[:0].to_parquet(none / "steps.parquet")
    return some, none, sorted(vanilla), sorted(suffix)


def test_fit_where_only_some_runs_have_steps_fits_those_and_names_the_rest(capsys,
                                                                           partial_records):
    import json

    some, _, with_steps, without = partial_records
    code, out, err = run(capsys, "calibrate", "fit", "--records", str(some), "--folds", "2",
                         "--vllm-version", "0.33", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["runs_without_steps"] == without
    assert doc["steps"] > 0
    code, out, err = run(capsys, "calibrate", "fit", "--records", str(some), "--folds", "2",
                         "--vllm-version", "0.33")
    assert "runs without step records (not fitted): " + ", ".join(without)[:40] in out


def test_fit_where_no_run_has_steps_names_the_runs(capsys, partial_records):
    _, none, _, _ = partial_records
    code, out, err = run(capsys, "calibrate", "fit", "--records", str(none), "--folds", "2",
                         "--vllm-version", "0.33")
    assert code == 2 and out == ""
    one_line_error(err, str(none), "no step records", "and 1 more")


def test_the_fit_of_a_block_no_step_exercises_keeps_its_prior():
    """The drafting block of a fold with no drafting step used to be a zero-row matrix, and
    max() over it a ValueError."""
    from simkit.costmodel.estimator import StepTimeEstimator

    prior = np.array([1.0, 2.0])
    coef, used = StepTimeEstimator()._solve(np.zeros((0, 2)), np.zeros(0), prior)
    assert coef.tolist() == [1.0, 2.0] and used == [False, False]


def test_fit_on_an_unknown_gpu_says_it_is_unknown(capsys, tmp_path):
    code, out, err = run(capsys, "calibrate", "fit", "--records", str(tmp_path), "--hardware",
                         "a100")
    assert code == 2 and out == ""
    line = one_line_error(err, "unknown hardware 'a100'", "h100", "h200")
    assert "calibration steps" not in line


# -- the installed vLLM, simkit's own version --------------------------------------------------

@pytest.mark.parametrize("installed", ["0.10.1", "0.30.0", "0.x", None])
def test_an_unsupported_vllm_is_refused_in_one_line_naming_it(monkeypatch, installed):
    """It used to fail deep in the harness with 'ImportError ... a simkit bug': a release older
    than or between the ones the harness knows, one that is no release number, or none at all is
    one clear error (a newer release gets the nearest rules with a warning:
    tests/unit/test_calibrate_v034.py)."""
    import calibrate.harness.versions as versions
    from simkit.commands import calibration
    from simkit.errors import SimkitError

    monkeypatch.setattr(versions, "installed_vllm_release", lambda: installed)
    with pytest.raises(SimkitError) as exc:
        calibration._require_vllm()
    msg = str(exc.value)
    assert "\n" not in msg
    assert ("not installed" in msg) if installed is None else (installed in msg)


@pytest.mark.parametrize("installed", ["0.33.0", "0.33.1+cu128", "0.26.0"])
def test_a_supported_vllm_passes(monkeypatch, installed):
    import calibrate.harness.versions as versions
    from simkit.commands import calibration

    monkeypatch.setattr(versions, "installed_vllm_release", lambda: installed)
    choice = calibration._require_vllm()
    assert choice.adapter == "forcing" and not choice.warning


def test_version_option_names_simkit_and_the_vllm_versions(capsys):
    from simkit import __version__
    from simkit.catalog.vllm_versions import VERSIONS

    code, out, err = run(capsys, "--version")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == f"simkit {__version__}"
    assert all(v.release in out.splitlines()[1] for v in VERSIONS.values())


# -- checked before the work, not after it -----------------------------------------------------

@pytest.mark.parametrize("argv,needles", [
    (("whatif", "prefix", "--preamble", "0,100000000"), ("preamble", "16,382", "100,000,000")),
    (("whatif", "prefix", "--preamble", "500,16383"), ("preamble", "16,382", "16,383")),
    (("whatif", "host", "--factors", "1,nan"), ("factors", "nan")),
    (("whatif", "host", "--factors", "inf"), ("factors", "inf")),
    (("whatif", "concurrency", "--levels", "8,100000"), ("levels", "at most", "1,024")),
    (("whatif", "concurrency", "--levels", "300", "--max-num-seqs", "256"), ("levels", "256")),
], ids=["preamble-huge", "preamble-over-len", "factors-nan", "factors-inf", "levels-huge",
        "levels-over-seqs"])
def test_what_if_values_past_their_bounds_are_refused_first(capsys, monkeypatch, argv, needles):
    """Each used to run (2 GB and no end for the preamble; 14 s for the factors; no bound on
    the levels) before failing, if it failed at all."""
    import simkit.profiles.corpus_profile as profiles

    def no_work(*a, **k):
        raise AssertionError("a profile was loaded before the options were checked")

    monkeypatch.setattr(profiles, "load_profile", no_work)
    monkeypatch.setattr("simkit.app.cells.load_workload", no_work)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line_error(err, *needles)


def test_sweep_refuses_a_tp_the_model_cannot_take_before_writing(capsys, tmp_path):
    out_dir = tmp_path / "sweep"
    code, out, err = run(capsys, "sweep", "--out", str(out_dir), "--tp", "3", "--model",
                         "llama-3.1-8b", "--corpus", "chat", "--seeds", "1", "--source",
                         "shipped")
    assert code == 2 and out == ""
    one_line_error(err, "field 'tp'", "TP 3", "llama-3.1-8b", "divisible")
    assert not out_dir.exists()


@pytest.mark.parametrize("option,value,needle", [
    ("--hardware", "nosuch", "unknown hardware 'nosuch'"),
    ("--calibration", "nosuch", "unknown calibration 'nosuch'"),
])
def test_sweep_refuses_an_unknown_hardware_or_calibration_before_writing(capsys, tmp_path,
                                                                         option, value, needle):
    """Each cell used to fail on it, and the sweep wrote empty files and exited 1."""
    out_dir = tmp_path / "sweep"
    code, out, err = run(capsys, "sweep", "--out", str(out_dir), option, value, "--model",
                         "llama-3.1-8b", "--corpus", "chat", "--seeds", "1", "--source",
                         "shipped")
    assert code == 2 and out == ""
    one_line_error(err, needle)
    assert not out_dir.exists()


def _slow_cell(*args, **kwargs):
    """A sweep cell that takes far longer than any Ctrl-C may."""
    import time

    time.sleep(20)


def test_ctrl_c_stops_a_sweep_without_waiting_for_its_cells(tmp_path, monkeypatch):
    """The pool used to finish every cell it had started (and queued) before the Ctrl-C got
    through: 9-11 s. Now the workers are ended at once (a hang guard, not a timing figure)."""
    import threading
    import time

    import simkit.app.sweep as sweep
    import simkit.interrupt as interrupt

    monkeypatch.setattr(sweep, "_cell", _slow_cell)
    flag = [False]                       # this test's own Ctrl-C flag, never the real one
    monkeypatch.setattr(interrupt, "_SEEN", flag)
    ctrl_c = threading.Timer(1.0, flag.__setitem__, (0, True))
    ctrl_c.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.sweep(["m1", "m2"], ["c1", "c2"], tmp_path / "out", workers=2)
    finally:
        ctrl_c.cancel()
    assert time.monotonic() - start < 10
    assert list((tmp_path / "out").iterdir()) == []          # nothing half-written


# -- a full disk: the file named, nothing 0-byte left ------------------------------------------

def _full_disk(monkeypatch, cls, name):
    """Make cls.name write a little, then fail as a full disk does."""
    import errno

    def no_space(self, *a, **k):
        target = self if isinstance(self, Path) else Path(a[0])
        target.write_bytes(b"") if cls is not Path else open(target, "w").close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cls, name, no_space)


def test_a_full_disk_during_fit_names_fit_json_and_leaves_none(capsys, tmp_path, monkeypatch,
                                                               partial_records):
    some, _, _, _ = partial_records
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "fit.json"
    _full_disk(monkeypatch, Path, "write_text")
    code, _, err = run(capsys, "calibrate", "fit", "--records", str(some), "--folds", "2",
                       "--vllm-version", "0.33", "--out", str(target))
    assert code == 2
    one_line_error(err, str(target), "No space left on device")
    assert list(target.parent.iterdir()) == []


def test_a_full_disk_during_plan_names_plan_sh_and_leaves_none(capsys, tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "plan.sh"
    _full_disk(monkeypatch, Path, "write_text")
    code, _, err = run(capsys, "calibrate", "plan", "--out", str(target))
    assert code == 2
    one_line_error(err, str(target), "No space left on device")
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize("writer", ["write_runs", "write_steps"])
def test_a_full_disk_during_a_records_write_names_it_and_leaves_none(tmp_path, monkeypatch,
                                                                    writer):
    import pandas as pd

    import calibrate.records as records

    _full_disk(monkeypatch, pd.DataFrame, "to_parquet")
    columns = records.RUN_COLUMNS if writer == "write_runs" else records.STEP_COLUMNS
    monkeypatch.setattr(records, "_frame", lambda rows, cols: pd.DataFrame(columns=list(cols)))
    target = tmp_path / ("runs.parquet" if writer == "write_runs" else "steps.parquet")
    with pytest.raises(OSError) as exc:
        getattr(records, writer)(target, [{c: 0 for c in columns}])
    assert exc.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_a_request_file_write_leaves_none(tmp_path, monkeypatch):
    import builtins

    from traces.calibration_requests import CalRequest, write_requests

    real_open = builtins.open

    def full_open(path, mode="r", *a, **k):
        fh = real_open(path, mode, *a, **k)
        if "w" in mode:
            import errno

            fh.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return fh

    monkeypatch.setattr(builtins, "open", full_open)
    target = tmp_path / "reqs.jsonl"
    req = CalRequest("r0", np.array([1, 2], np.int32), np.array([3], np.int32), "t")
    with pytest.raises(OSError) as exc:
        write_requests(target, [req])
    assert exc.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


# -- import: requests no model can take, folders, files of another format ----------------------

def _block(prompt_lens, output_lens):
    from traces.cache import TokenizedBlock, pack

    p_tok, p_off = pack([np.ones(n, np.int32) for n in prompt_lens])
    o_tok, o_off = pack([np.ones(n, np.int32) for n in output_lens])
    n = len(prompt_lens)
    return TokenizedBlock([f"f.jsonl:{i + 1}" for i in range(n)], p_tok, p_off, o_tok, o_off,
                          np.zeros(n, bool), np.ones(n, np.int32), ["m"] * n, {}, {})


def test_the_request_length_bound_is_the_context_exactly():
    from simkit.errors import InputError
    from traces.context_limit import MAX_CONTEXT_TOKENS, check_request_lengths

    check_request_lengths(_block([MAX_CONTEXT_TOKENS - 10, 5], [10, 5]), "f.jsonl")
    with pytest.raises(InputError) as exc:
        check_request_lengths(_block([5, MAX_CONTEXT_TOKENS - 10, 7, 10**6], [5, 11, 7, 1]),
                              "f.jsonl")
    msg = str(exc.value)
    assert "f.jsonl:2" in msg and f"{MAX_CONTEXT_TOKENS - 10:,} + output 11" in msg
    assert "1 more" in msg


def test_a_prompt_longer_than_any_model_takes_is_refused_at_import(capsys, tmp_path):
    """A 22M-token prompt used to be accepted here and fail predict after 113 s."""
    import json

    f = tmp_path / "long.jsonl"
    with f.open("w") as fh:
        fh.write(json.dumps({"prompt_ids": [1, 2, 3], "output_ids": [4, 5]}) + "\n")
        fh.write(json.dumps({"prompt_ids": [7] * 140_000, "output_ids": [4, 5]}) + "\n")
    code, out, err = run(capsys, "traces", "import", str(f), "--format", "tokens", "--name",
                         "long", "--tokenizer", "llama3")
    if "tokenizer files not found" in err:
        pytest.skip("the tokens format checks ids against the tokenizer (raw traces needed)")
    assert code == 2 and out == ""
    one_line_error(err, str(f), "long.jsonl:2", "140,000", "131,072")
    code, _, err = run(capsys, "traces", "show", "--corpus", "long")
    assert code == 2                                 # nothing was stored


def test_a_folder_given_as_the_trace_file_is_named_a_folder(capsys, tmp_path):
    code, _, err = run(capsys, "traces", "import", str(tmp_path), "--format", "openai",
                       "--name", "d", "--tokenizer", "llama3")
    assert code == 2
    line = one_line_error(err, str(tmp_path), "folder")
    assert "no such file" not in line


def test_a_file_of_another_format_is_not_called_empty(capsys, tmp_path):
    f = tmp_path / "server.log"
    f.write_text("INFO 12-01 10:00:00 starting\nINFO 12-01 10:00:01 ready\n")
    code, _, err = run(capsys, "traces", "import", str(f), "--format", "vllm-log", "--name",
                       "l", "--tokenizer", "llama3")
    if "tokenizer files not found" in err:
        pytest.skip("the vllm-log reader loads the tokenizer first (raw traces needed)")
    assert code == 2
    line = one_line_error(err, str(f), "2 non-blank line(s)", "--format")
    assert "empty" not in line


# -- empty paths -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,field", [
    (PREDICT + ("--plot", ""), "plot"),
    (PREDICT + ("--html", ""), "html"),
    (("sweep", "--out", "", "--model", "llama-3.1-8b", "--corpus", "chat"), "out"),
    (("whatif", "host", "--plot", ""), "plot"),
    (("fleet", "plan", "--plot", ""), "plot"),
    (("calibrate", "fit", "--records", ""), "records"),
    (("calibrate", "merge", "x", "--into="), "into"),
], ids=["predict-plot", "predict-html", "sweep-out", "whatif-plot", "fleet-plot", "records",
        "into"])
def test_an_empty_path_is_refused_not_read_as_none_or_here(capsys, tmp_path, monkeypatch, argv,
                                                           field):
    """--plot '' used to mean no plot, sweep --out '' and --records '' the current folder,
    silently."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line_error(err, f"field '{field}'", "empty")
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == []   # nothing here


@pytest.mark.parametrize("argv", [("calibrate", "fit", "--records"), ("validate", "--records"),
                                  ("calibrate", "merge", "--into", "merged")],
                         ids=["fit", "validate", "merge"])
def test_a_file_where_a_folder_is_wanted_is_named_a_file(capsys, tmp_path, monkeypatch, argv):
    """'no such folder' for a file that is there misled."""
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "runs.parquet"
    f.write_bytes(b"PAR1")
    code, out, err = run(capsys, *argv, str(f))
    assert code == 2 and out == ""
    line = one_line_error(err, str(f), "is a file; give a folder")
    assert "no such" not in line


def test_whitespace_paths_are_refused_by_the_output_checks():
    from simkit.checks import output_dir, output_file
    from simkit.errors import InputError

    for check in (lambda: output_file("  ", "plot"), lambda: output_dir(" ", "out")):
        with pytest.raises(InputError, match="empty path"):
            check()


def test_an_empty_positional_argument_is_refused(capsys):
    code, _, err = run(capsys, "traces", "import", "", "--format", "openai", "--name", "x",
                       "--tokenizer", "llama3")
    assert code == 2
    one_line_error(err, "empty argument")
