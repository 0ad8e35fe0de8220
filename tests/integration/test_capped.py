"""Capped outputs: the sources' generation caps, the per-corpus counts, and --capped-outputs
keep (the default, unchanged figures) vs extend (only capped requests change)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from engine_doubles import make_table
from simkit.app.capped import TAIL_WINDOW, apply_capped_outputs, extend_capped
from simkit.engine.workload import Workload
from simkit.errors import InputError
from traces.caps import CAP_TOLERANCE, OutputCap, is_capped, threshold


def _workload(capped):
    tab = make_table([10, 20, 30], [100, 50, 80], lambda r, t, k: (r + t) % 3,
                     lambda r, t, k: (t % 5) + 1, kmax=4)
    w = Workload.from_table(tab, name="t/t", provenance={"capped_sample": capped})
    return w, tab


def test_threshold_is_one_percent_below_the_cap():
    cap = OutputCap(4096, "output", "stated", "x")
    assert threshold(cap) == 4096 - int(np.ceil(CAP_TOLERANCE * 4096))
    assert is_capped(10, threshold(cap), cap) and not is_capped(10, threshold(cap) - 1, cap)
    ctx = OutputCap(15000, "context", "stated", "x")      # prompt + output counts
    assert is_capped(14000, threshold(ctx) - 14000, ctx)
    assert not is_capped(0, 4096, None)                   # no known cap: never capped


def test_keep_returns_the_same_workload_object():
    w, _ = _workload([0])
    assert apply_capped_outputs(w, "keep", 8192) is w
    with pytest.raises(InputError, match="capped-outputs"):
        apply_capped_outputs(w, "stretch", 8192)


def test_extend_changes_only_capped_requests_and_repeats_their_tail():
    w, tab = _workload([0, 2])
    ext = extend_capped(w, 300)
    assert ext.output_len.tolist() == [300, 50, 300]
    for name in ("accepted", "drafted"):
        old, new = getattr(tab, name), getattr(ext.tables["suffix"], name)
        # the uncapped request's rows are byte-identical
        lo, hi = ext.tables["suffix"].offsets[1], ext.tables["suffix"].offsets[2]
        assert np.array_equal(new[lo:hi], old[tab.offsets[1]:tab.offsets[2]])
        # capped request 0 (L=100, kmax 4): rows t < 96 kept, then rows [1, 96) repeated
        keep_to = 100 - 4
        start = max(1, keep_to - TAIL_WINDOW)
        assert np.array_equal(new[:keep_to], old[:keep_to])
        for t in (keep_to, keep_to + 7, 299):
            src = start + (t - keep_to) % (keep_to - start)
            assert np.array_equal(new[t], old[src])
    assert ext.tables["suffix"].offsets[-1] == 300 + 50 + 300


def test_extend_never_shortens_and_needs_the_record():
    w, _ = _workload([1])
    assert extend_capped(w, 20).output_len.tolist() == [100, 50, 80]   # max_tokens below L
    old, _ = _workload(None)
    old.provenance.pop("capped_sample")
    with pytest.raises(InputError, match="capped_sample"):
        extend_capped(old, 8192)


def _predict(args):
    from simkit.cli import app

    res = CliRunner().invoke(app, ["predict", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


SMALL = ["--model", "llama-3.1-8b", "--corpus", "math", "--seeds", "1", "--configs",
         "vanilla,kpad:4", "--source", "raw"]


@pytest.mark.skipif("not __import__('simkit.paths').paths.traces_src_dir()")
@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_default_is_keep_byte_identical_and_extend_changes_figures():
    default = _predict(SMALL)
    keep = _predict(SMALL + ["--capped-outputs", "keep"])
    assert json.dumps(default) == json.dumps(keep)
    assert default["assumptions"]["capped_outputs"]["value"] == "keep"
    # a run long enough for capped requests to pass their cap inside the steady window
    longer = SMALL + ["--num-requests", "512"]
    k = _predict(longer)
    e = _predict(longer + ["--capped-outputs", "extend"])
    assert e["assumptions"]["capped_outputs"]["value"] == "extend"
    assert [r["config"] for r in k["results"]] == [r["config"] for r in e["results"]]
    assert any(a["output_tok_s"] != b["output_tok_s"]
               for a, b in zip(k["results"], e["results"]))


def test_whatif_workloads_take_the_same_choice():
    from simkit.profiles.corpus_profile import load_shipped
    from simkit.app.cells import load_workload

    shipped = load_shipped("llama-3.1-8b", "math")
    capped = shipped.provenance["capped_sample"]
    keep = load_workload("llama-3.1-8b", "math", "shipped")
    ext = load_workload("llama-3.1-8b", "math", "shipped", capped_outputs="extend",
                        max_tokens=8192)
    changed = np.flatnonzero(ext.output_len != keep.output_len).tolist()
    assert changed == [i for i in capped if keep.output_len[i] < 8192]
    assert changed and (ext.output_len[changed] == 8192).all()
