"""Trust on first use (issue 25): no silently wrong figure, no traceback, vLLM's refusals.

Each test here failed before its fix. The silent-wrong class gets a property test where one
exists: `--capped-outputs extend` on requests none of which is capped changes no figure;
hardware and model names are case-insensitive or refused; a TP that does not divide the
attention heads is refused with vLLM's reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine_doubles import LinearCost, make_table
from simkit.block_hash import pack
from simkit.app.capped import extend_capped
from simkit.engine.config import EngineConfig, kpad, vanilla
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


from cli_helpers import one_line_error, run  # noqa: E402
from cli_helpers import own_cache as _own_cache  # noqa: E402,F401 (autouse)


# -- --capped-outputs extend keeps the prompts' block hashes -----------------------------------

def _shared_prefix_workload(plen, olen, capped, shared_blocks):
    """A workload whose prompts share their first `shared_blocks` blocks (a template header),
    so prefix caching changes the figures when (and only when) the hashes are there."""
    tab = make_table(plen, olen, lambda r, t, k: (r + t) % 3, lambda r, t, k: (t % 5) + 1,
                     kmax=4)
    chains = []
    for r, p in enumerate(plen):
        n = p // 16
        chains.append(np.array([1000 + i if i < shared_blocks else (r + 1) * 10**6 + i
                                for i in range(n)], np.uint64))
    return Workload.from_table(tab, name="t/t", provenance={"capped_sample": capped},
                               block_hashes=pack(chains))


def test_extend_keeps_the_prompt_block_hashes():
    w = _shared_prefix_workload([64, 80, 96], [40, 50, 60], [0], shared_blocks=3)
    ext = extend_capped(w, 200)
    assert ext.block_hashes is not None
    assert ext.hash_chains() == w.hash_chains()


@FAST
@given(plen=st.lists(st.integers(16, 400), min_size=2, max_size=8),
       olen_seed=st.integers(0, 2**16), shared=st.integers(0, 4),
       max_tokens=st.integers(1, 600), spec=st.sampled_from(["vanilla", "kpad"]))
def test_extend_without_a_capped_request_changes_no_figure(plen, olen_seed, shared, max_tokens,
                                                           spec):
    rng = np.random.default_rng(olen_seed)
    olen = rng.integers(1, 120, len(plen)).tolist()
    w = _shared_prefix_workload(plen, olen, [], shared)
    ext = extend_capped(w, max_tokens)
    cfg, s = EngineConfig(), (vanilla() if spec == "vanilla" else kpad(4))
    a = simulate(w, LinearCost(), cfg, s, load=ClosedLoop(2), seed=1, num_requests=12)
    b = simulate(ext, LinearCost(), cfg, s, load=ClosedLoop(2), seed=1, num_requests=12)
    assert a.metrics == b.metrics and a.prefix == b.prefix


def test_extend_on_a_corpus_without_capped_requests_prints_the_same_figures(capsys):
    """llama-3.1-8b/code-edit: 0 capped requests, so extend must print keep's figures."""
    args = ("predict", "--model", "llama-3.1-8b", "--corpus", "code-edit", "--configs",
            "vanilla,suffix", "--seeds", "1", "--num-requests", "96", "--source", "shipped",
            "--format", "json", "--workers", "1")
    code, keep, _ = run(capsys, *args)
    assert code == 0
    code, ext, _ = run(capsys, *args, "--capped-outputs", "extend")
    assert code == 0
    keep, ext = json.loads(keep), json.loads(ext)
    assert keep["results"] == ext["results"]
    assert ext["assumptions"]["prefix_caching"] == keep["assumptions"]["prefix_caching"]


# -- hardware and model names are case-insensitive ---------------------------------------------

def _recase(draw_flags, name: str) -> str:
    return "".join(c.upper() if f else c for c, f in zip(name, draw_flags))


@FAST
@given(data=st.data())
def test_hardware_and_model_names_are_case_insensitive(data):
    from simkit.catalog.hardware import canonical_hardware, list_hardware
    from simkit.catalog.models import canonical_model, get_model, list_models
    from simkit.costmodel.calibrations import default_calibration, load_cost_model

    hw = data.draw(st.sampled_from(list_hardware()))
    model = data.draw(st.sampled_from(["llama-3.1-8b", "qwen2.5-7b"]))
    hw_v = _recase(data.draw(st.lists(st.booleans(), min_size=len(hw), max_size=len(hw))), hw)
    m_v = _recase(data.draw(st.lists(st.booleans(), min_size=len(model),
                                     max_size=len(model))), model)
    assert canonical_hardware(hw_v) == hw and canonical_model(m_v) == model
    assert default_calibration(hw_v) == default_calibration(hw)
    assert get_model(m_v) == get_model(model)
    assert load_cost_model(m_v, hw_v).label == load_cost_model(model, hw).label
    assert model in list_models()


def test_upper_case_hardware_prints_the_lower_case_prediction(capsys):
    """--hardware H200 ran h200's calibrated figures but labelled them analytic."""
    base = ("predict", "--corpus", "chat", "--configs", "vanilla", "--seeds", "1",
            "--num-requests", "64", "--source", "shipped", "--format", "json", "--workers", "1")
    code, low, _ = run(capsys, *base, "--model", "llama-3.1-8b", "--hardware", "h200")
    assert code == 0
    code, up, _ = run(capsys, *base, "--model", "Llama-3.1-8B", "--hardware", "H200")
    assert code == 0
    low, up = json.loads(low), json.loads(up)
    assert up["assumptions"]["cost_model"]["value"]["profile"] == "h200-vllm033"   # newest vLLM
    assert up == low


# -- settings vLLM refuses are refused, with its reason, before any work ----------------------

PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "chat", "--configs", "vanilla",
           "--seeds", "1", "--source", "shipped")


def _models_and_tps():
    from simkit.catalog.models import list_models

    return st.tuples(st.sampled_from(list_models()), st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8]))


@FAST
@given(case=_models_and_tps())
def test_a_tp_that_does_not_divide_the_heads_is_refused_with_the_reason(capsys, case):
    from simkit.catalog.models import get_model

    model, tp = case
    spec = get_model(model)
    code, out, err = run(capsys, "predict", "--model", model, "--corpus", "chat", "--tp",
                         str(tp), "--format", "csv", "--plot", "tp.nope")
    # the plot path is refused after the TP: a TP vLLM accepts reaches that check
    if spec.heads % tp:
        assert code == 2 and out == ""
        one_line_error(err, "field 'tp'", f"attention heads ({spec.heads})",
                       f"divisible by tensor parallel size ({tp})")
    elif spec.attention != "mla" and spec.kv_heads % tp and tp % spec.kv_heads:
        one_line_error(err, "field 'tp'", f"{spec.kv_heads} KV heads")
    else:
        one_line_error(err, "field 'plot'", "tp.nope")


def test_qwen_7b_at_tp_8_is_refused_everywhere(capsys):
    """28 attention heads: vLLM refuses TP 8, so predict and the what-ifs must too."""
    from simkit.costmodel.calibrations import load_cost_model
    from simkit.errors import InputError

    for argv in (("predict", "--model", "qwen2.5-7b", "--corpus", "chat", "--tp", "8"),
                 ("whatif", "concurrency", "--model", "qwen2.5-7b", "--tp", "8"),
                 ("whatif", "capacity", "--model", "qwen2.5-7b", "--tp", "8"),
                 ("whatif", "hardware", "--model", "qwen2.5-7b", "--tps", "1,8")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", argv
        one_line_error(err, "attention heads (28)", "tensor parallel size (8)")
    with pytest.raises(InputError, match="attention heads"):
        load_cost_model("qwen2.5-7b", "h200", tp=8)


@FAST
@given(seqs=st.integers(2, 4096), data=st.data())
def test_fewer_batched_tokens_than_max_num_seqs_is_refused(capsys, seqs, data):
    tokens = data.draw(st.integers(1, seqs - 1))
    code, out, err = run(capsys, *PREDICT, "--max-num-seqs", str(seqs),
                         "--max-num-batched-tokens", str(tokens))
    assert code == 2 and out == ""
    one_line_error(err, "max-num-batched-tokens", f"({tokens:,})", f"max_num_seqs ({seqs:,})")


@FAST
@given(tokens=st.integers(16384, 10**9))
@example(tokens=16384)
def test_max_tokens_of_max_model_len_or_more_is_refused(capsys, tokens):
    """16,384 too: a prompt holds at least one token, so vLLM would refuse every request."""
    for argv in (PREDICT, ("sweep", "--out", "never-written")):
        code, out, err = run(capsys, *argv, "--max-tokens", str(tokens))
        assert code == 2 and out == ""
        one_line_error(err, "max-tokens", "max_model_len (16,384)")
    assert not Path("never-written").exists()


@pytest.mark.parametrize("gmu", [0.0, -0.5, 1.01, float("nan")])
def test_gpu_memory_utilization_outside_0_1_is_refused(gmu):
    from simkit.costmodel.calibrations import load_cost_model
    from simkit.errors import InputError

    with pytest.raises(InputError, match=r"gpu_memory_utilization .*\(0, 1\]"):
        load_cost_model("llama-3.1-8b", "h200", tp=1, gmu=gmu)


@FAST
@given(n=st.integers(1_000_001, 10**15),
       opt=st.sampled_from(["--num-requests", "--concurrency"]))
def test_huge_request_counts_are_refused_not_a_memory_error(capsys, n, opt):
    code, out, err = run(capsys, *PREDICT, opt, str(n))
    assert code == 2 and out == ""
    one_line_error(err, opt.lstrip("-"), f"{n:,}")


@pytest.mark.parametrize("argv", [("whatif", "concurrency", "--levels", "1,99999999999"),
                                  ("whatif", "capacity", "--max-requests", "99999999999"),
                                  ("sweep", "--out", "never-written", "--num-requests",
                                   "99999999999")])
def test_huge_counts_in_the_other_commands_are_refused(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line_error(err, "at most")


# -- whatif concurrency claims nothing it did not run ------------------------------------------

def test_concurrency_whatif_without_a_speculative_config_claims_no_best_one(capsys):
    code, out, err = run(capsys, "whatif", "concurrency", "--configs", "vanilla", "--levels",
                         "1,4", "--min-requests", "16", "--corpus", "chat", "--format", "json",
                         "--workers", "1")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    best = [n for n in notes if n.startswith("best speculative config")]
    assert best == ["best speculative config: none was run (--configs vanilla has no "
                    "speculative config with an acceptance table)"]
    assert not any("beats vanilla" in n for n in notes)


# -- two imports under one new name: one wins, the other is refused ----------------------------

def _tiny_block(marker: int):
    from traces.cache import TokenizedBlock

    return TokenizedBlock(["r0"], np.array([1, 2, marker], np.int32), np.array([0, 3]),
                          np.array([5, 6], np.int32), np.array([0, 2]), np.array([True]),
                          np.array([0], np.int32), ["m"], {}, {"format": "tokens"})


def test_concurrent_imports_under_one_new_name_never_lose_one_silently(tmp_path, monkeypatch):
    """Both imports pass the up-front 'name free?' check before either stores (a barrier
    forces the interleaving); exactly one may succeed and the other must fail naming --name."""
    import threading

    import traces.importers
    from simkit.commands.traces_cmd import _import
    from simkit.errors import InputError
    from traces.user import load_user_block, read_import_record

    barrier = threading.Barrier(2, timeout=30)

    def fake_import(path, fmt, family, producer, template=None):
        barrier.wait()                          # both have checked the name by now
        return _tiny_block(int(path.stem[-1]))

    monkeypatch.setattr(traces.importers, "import_file", fake_import)
    files = []
    for i in (1, 2):
        f = tmp_path / f"trace{i}"
        f.write_text("x")
        files.append(f)
    results: dict[int, object] = {}

    def one(i):
        try:
            _import(files[i - 1], "tokens", "shared", "llama3", None)
            results[i] = "ok"
        except InputError as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ok = [i for i, r in results.items() if r == "ok"]
    refused = [r for r in results.values() if isinstance(r, InputError)]
    assert len(ok) == 1 and len(refused) == 1, results
    assert "field 'name'" in str(refused[0]) and "--replace" in str(refused[0])
    winner = files[ok[0] - 1]
    assert read_import_record("shared")["path"] == str(winner.resolve())
    assert int(load_user_block("shared").prompt_tokens[-1]) == ok[0]


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "vllm-custom", "tokens", "vllm-log"])
@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_import_file_gives_a_reason(capsys, tmp_path, fmt, text):
    f = tmp_path / "empty.jsonl"
    f.write_text(text)
    code, out, err = run(capsys, "traces", "import", str(f), "--format", fmt, "--name", "e",
                         "--tokenizer", "llama3")
    assert code == 2 and out == ""
    line = one_line_error(err, str(f), f"holds no {fmt} record")
    assert "reasons: )" not in line


# -- Ctrl-C: one line, exit 130, the workers stopped ------------------------------------------

@pytest.mark.parametrize("raised", ["plain", "numba"])
def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch, raised):
    """numba's dispatcher turns a Ctrl-C during drafting into a SystemError whose context is
    the KeyboardInterrupt; both used to end in a traceback or 'internal error'."""
    import simkit.app.predict

    def interrupted(*a, **k):
        if raised == "plain":
            raise KeyboardInterrupt
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function sequential_chunk>) returned a result "
                              "with an exception set")

    monkeypatch.setattr(simkit.app.predict, "predict", interrupted)
    code, out, err = run(capsys, *PREDICT)
    assert code == 130 and out == ""
    one_line_error(err, "interrupted")


def test_ctrl_c_stops_a_run_on_worker_processes(tmp_path):
    """A run of minutes on two workers, Ctrl-C to the whole process group (as a terminal
    sends it): exit 130 with one line, and no worker left running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, PYTHONPATH=str(ROOT), SIMKIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("SIMKIT_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "simkit", *PREDICT, "--seeds", "4", "--workers", "2",
         "--num-requests", "200000"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: (os.setpgrp(), signal.signal(signal.SIGINT, signal.SIG_DFL)))
    time.sleep(4)                            # into the simulations (they take minutes)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)  # a hang guard, not a timing assertion
    assert proc.returncode == 130, err
    assert out == ""
    one_line_error(err, "interrupted")
    with pytest.raises(ProcessLookupError):  # the group is gone: no worker survived
        os.killpg(proc.pid, 0)


# -- validate refuses duplicated run records, naming the file and the run ids -----------------

def _records_copy(tmp_path, twice_in_one: bool):
    import pandas as pd

    src = ROOT / "calibrate" / "data"
    runs = pd.read_parquet(src / "runs.parquet")
    steps = pd.read_parquet(src / "steps.parquet")
    rid = str(runs["run_id"].iloc[0])
    keep = runs.iloc[:3]
    folder = tmp_path / "records"
    folder.mkdir()
    steps[steps["run_id"].isin(keep["run_id"])].to_parquet(folder / "steps.parquet")
    if twice_in_one:
        pd.concat([keep, keep.iloc[:1]]).to_parquet(folder / "runs.parquet")
    else:
        keep.to_parquet(folder / "runs.parquet")
        keep.iloc[:1].to_parquet(folder / "runs-again.parquet")
    return folder, rid


@pytest.mark.parametrize("twice_in_one", [True, False])
def test_validate_refuses_duplicated_runs_naming_file_and_ids(capsys, tmp_path, twice_in_one):
    folder, rid = _records_copy(tmp_path, twice_in_one)
    code, out, err = run(capsys, "validate", "--records", str(folder))
    assert code == 2 and out == ""
    line = one_line_error(err, "field 'run_id'", rid)
    assert str(folder / ("runs.parquet" if twice_in_one else "runs-again.parquet")) in line
    assert "predicted" not in err                    # refused before any prediction


# -- output paths: checked before the run, written whole, named on stderr ----------------------

@pytest.mark.parametrize("bad", ["no-such-folder/r.html", "r.txt", "."])
def test_html_path_is_checked_before_the_run(capsys, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *PREDICT, "--html", bad)
    assert code == 2 and out == ""                   # no table printed: nothing was run
    one_line_error(err, "field 'html'")


def test_plot_and_html_say_where_they_wrote(capsys, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    png, page = folder / "p.png", folder / "r.html"
    code, out, err = run(capsys, *PREDICT, "--num-requests", "64", "--plot", str(png),
                         "--html", str(page))
    assert code == 0 and png.stat().st_size > 0 and page.stat().st_size > 0
    assert f"wrote {png}" in err.splitlines() and f"wrote {page}" in err.splitlines()
    assert sorted(p.name for p in folder.iterdir()) == ["p.png", "r.html"]   # no temp left


def test_a_failed_write_names_the_file_and_leaves_no_partial_file(tmp_path):
    import errno

    from simkit.outfiles import write_atomic

    target = tmp_path / "t.csv"
    target.write_text("old\n")

    def full_disk(tmp):
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as exc:
        write_atomic(target, full_disk)
    assert exc.value.filename == str(target) and exc.value.errno == errno.ENOSPC
    assert target.read_text() == "old\n"            # the earlier file survives whole
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_a_full_disk_during_sweep_keeps_the_csv(capsys, tmp_path, monkeypatch):
    """The parquet write fails (full disk): the CSV and the plot are still written, the
    failure is named, and the exit status says the run did not fully succeed."""
    import errno

    import pandas as pd

    def no_space(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", no_space)
    out_dir = tmp_path / "sweep"
    code, out, err = run(capsys, "sweep", "--out", str(out_dir), "--model", "llama-3.1-8b",
                         "--corpus", "chat", "--configs", "vanilla", "--seeds", "1",
                         "--num-requests", "32", "--source", "shipped", "--workers", "1")
    assert code == 1
    assert (out_dir / "sweep.csv").read_text().startswith("model,")
    assert (out_dir / "speedup_per_k.png").stat().st_size > 0
    assert not (out_dir / "sweep.parquet").exists()
    assert f"not written: {out_dir / 'sweep.parquet'}: No space left on device" in err
    assert f"wrote {out_dir / 'sweep.csv'}" in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["speedup_per_k.png", "sweep.csv"]


# -- a recommendation from runs without a steady window says so ----------------------------

def test_a_recommendation_without_a_steady_window_carries_a_caveat(capsys):
    args = (*PREDICT, "--configs", "vanilla,suffix", "--format", "json", "--workers", "1")
    code, out, _ = run(capsys, *args, "--num-requests", "40")
    assert code == 0
    doc = json.loads(out)
    assert not doc["steady_window"]
    line = doc["recommendation"]["line"]
    assert "caution: vanilla, suffix had no steady window" in line
    assert f"--num-requests {doc['suggested_num_requests']} gives one" in line
    code, out, _ = run(capsys, *args, "--num-requests", "128")
    assert json.loads(out)["steady_window"]
    assert "caution" not in json.loads(out)["recommendation"]["line"]


# -- a fresh machine without the raw traces: one line saying what is needed, before any work --

@pytest.mark.parametrize("src", ["empty", "absent"])
@pytest.mark.parametrize("argv", [("traces", "list"), ("traces", "show", "chat"),
                                  ("validate",)])
def test_commands_that_need_raw_traces_say_so_first(capsys, monkeypatch, tmp_path, src, argv):
    folder = tmp_path / "traces-src"
    if src == "empty":
        folder.mkdir()
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(folder))
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "predicted" not in err                    # validate: nothing started
    # where they come from is a page the user has (the folder's SOURCES.md is what is missing)
    one_line_error(err, f"simkit {argv[0]}", "needs the raw traces",
                   "docs/guide.md, 'Getting the raw traces'", "SIMKIT_TRACES_SRC")
    assert "**Getting the raw traces.**" in (ROOT / "docs" / "guide.md").read_text()


@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_traces_list_says_which_corpora_mix_holds(capsys):
    from simkit.paths import traces_src_dir

    if traces_src_dir() is None:
        pytest.skip("raw traces not present")
    code, out, _ = run(capsys, "traces", "list")
    assert code == 0
    flat = " ".join(out.split())
    assert "every corpus" not in flat and "puzzle not included" in flat


# -- no project-internal words in what a user reads --------------------------------------------

INTERNAL = __import__("re").compile(r"\b(session|lease[ds]?|lent)\b", __import__("re").I)


def test_no_project_internal_words_in_user_facing_text(capsys):
    """The data files feed the reports (hardware and calibration text); the report and the
    catalogue commands print them."""
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sorted((ROOT / "simkit" / "data")
                                                                 .rglob("*.json"))
            for m in INTERNAL.finditer(p.read_text())]
    assert not hits, hits
    for argv in ((*PREDICT, "--num-requests", "64"), (*PREDICT, "--num-requests", "64",
                                                      "--format", "json"),
                 ("hardware", "show", "h200"), ("hardware", "list"), ("predict", "--help"),
                 ("whatif", "reference", "--help")):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert not INTERNAL.search(out + err), (argv, INTERNAL.findall(out + err))


DOC_INTERNAL = __import__("re").compile(
    r"\b[Ii]ssue #?\d+|\b[Ss]ession[- ][A-Z]\b|\b[Ss]itting [A-Z]\b|\bthis session\b"
    r"|\b(?i:lease[ds]?|lent)\b")


def test_readme_and_docs_speak_of_the_users_world():
    """The README and docs/ are user-facing: no tracker numbers, session letters or machine loans
    (a GPU sitting is named by its UTC date and time); 'session-affinity' and the session.sh
    script are the user's terms and stay."""
    hits = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
            for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
            for n, line in enumerate(p.read_text().splitlines(), 1)
            for m in DOC_INTERNAL.finditer(line)]
    assert not hits, hits
