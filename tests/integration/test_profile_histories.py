"""History tables shipped beside the profiles (simkit.profiles.shipped_histories): a machine without the
raw traces predicts mix under cold and hot too, with the tables a raw-trace build gives."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from typer.testing import CliRunner

from simkit.profiles import corpus_profile as profiles
from simkit.acceptance.table import AcceptanceTable
from simkit.errors import InputError
from simkit.history import parse_history
from simkit.paths import traces_src_dir
from simkit.profiles.shipped_histories import (history_file, load_history_table, parse_histories,
                                      shipped_histories, write_history_tables)
from traces.corpora import MIX, list_models


def test_tree_label_is_what_the_suffix_tree_held():
    assert parse_history("hot,evicted").tree_label == "hot"
    assert parse_history("repeat:0.5,diverge:64,evicted").tree_label == "repeat:0.5,diverge:64"
    assert parse_history("repeat:0").tree_label == "cold"
    assert parse_history("repeat:0,diverge:8").tree_label == "cold"     # nobody repeated
    assert parse_history("repeat:1").tree_label == "hot"
    assert parse_history("warm").tree_label == "warm"


def test_parse_histories():
    def labels(text, corpus, own):
        return tuple(h.label for h in parse_histories(text, corpus, parse_history(own)))

    assert labels("auto", MIX, "warm") == ("cold", "hot")
    assert labels("auto", "code", "warm") == ()
    assert labels("none", MIX, "warm") == ()
    # evicted folds into hot; the profile's own tree is not written twice
    assert labels("hot,evicted,cold,repeat:0.25", "code", "cold") == ("hot", "repeat:0.25")
    with pytest.raises(InputError, match="histories"):
        labels("warm", MIX, "cold")
    with pytest.raises(InputError, match="history"):
        labels("tepid", MIX, "warm")


@pytest.mark.parametrize("model", list_models())
def test_every_model_ships_mix_under_cold_and_hot(model):
    """The shipped history tables are listed with their digests, cover the profile's own
    requests, and order as the histories must: hot (every sampled response in the tree first)
    accepts most, cold (the sample alone) least, the warm profile between."""
    warm = profiles.load_profile(model, MIX, source="shipped")
    npz = profiles.shipped_dir() / model / f"{MIX}.npz"
    entries = warm.provenance["history_tables"]
    assert sorted(entries) == sorted(shipped_histories(MIX)) == ["cold", "hot"]
    accepted = {}
    for label, entry in entries.items():
        path = history_file(npz, label)
        assert entry["file"] == path.name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
        prof = profiles.load_profile(model, MIX, source="shipped", history=parse_history(label))
        t = prof.table
        assert prof.provenance["tree"] == prof.provenance["history"] == label
        assert prof.provenance["command"].endswith(f"--tree {label}")
        assert "history_tables" not in prof.provenance and prof.tables["suffix"] is t
        assert np.array_equal(t.output_len, warm.table.output_len)
        assert np.array_equal(t.offsets, warm.table.offsets)
        assert np.array_equal(prof.weights, warm.weights)
        assert np.array_equal(prof.tables["ngram"].accepted, warm.tables["ngram"].accepted)
        assert (t.accepted <= t.drafted).all()
        accepted[label] = int(t.accepted[:, 7].sum())
    accepted["warm"] = int(warm.table.accepted[:, 7].sum())
    assert accepted["hot"] > accepted["warm"] > accepted["cold"]


def test_evicted_reads_the_hot_table_under_its_own_label():
    hot = profiles.load_profile("llama-3.1-8b", MIX, source="shipped", history=parse_history("hot"))
    ev = profiles.load_profile("llama-3.1-8b", MIX, source="shipped", history=parse_history("hot,evicted"))
    assert ev.provenance["tree"] == "hot,evicted" and ev.table.params["history"] == "hot,evicted"
    assert hot.table.params["history"] == "hot"
    assert np.array_equal(ev.table.accepted, hot.table.accepted)
    cold = profiles.load_profile("llama-3.1-8b", MIX, source="shipped", history=parse_history("repeat:0"))
    assert cold.provenance["tree"] == "cold" and "history" not in cold.table.params


def test_a_history_that_is_not_shipped_names_what_is():
    with pytest.raises(InputError, match=r"holds the histories warm, cold, hot; repeat:0.5 needs "
                                         r"the raw traces"):
        profiles.load_profile("llama-3.1-8b", MIX, source="shipped", history=parse_history("repeat:0.5"))
    with pytest.raises(InputError, match=r"llama-3.1-8b/code holds the histories warm; hot"):
        profiles.load_profile("llama-3.1-8b", "code", source="shipped", history=parse_history("hot"))


def _table(n: int) -> AcceptanceTable:
    lens = np.full(2, n, np.int32)
    return AcceptanceTable(model="m", corpus="c", drafter="suffix", params={"history": "hot"},
                           kmax=16, ordering="sequential", prompt_len=lens, output_len=lens,
                           offsets=np.array([0, n, 2 * n], np.int64),
                           accepted=np.zeros((2 * n, 16), np.uint8),
                           drafted=np.ones((2 * n, 16), np.uint8))


def test_write_replaces_the_history_files_of_an_earlier_build(tmp_path):
    npz = tmp_path / "mix.npz"
    first = write_history_tables(npz, {"hot": _table(3), "repeat:0.5": _table(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mix.history-hot.npz",
                                                          "mix.history-repeat-0.5.npz"]
    again = write_history_tables(npz, {"hot": _table(3)})
    assert [p.name for p in tmp_path.iterdir()] == ["mix.history-hot.npz"]
    assert again == {"hot": first["hot"]}                      # byte-stable
    table = load_history_table(npz, {"history_tables": again}, parse_history("hot,evicted"))
    assert table.params["history"] == "hot,evicted" and table.num_requests == 2
    assert load_history_table(npz, {"history_tables": again}, parse_history("cold")) is None
    (tmp_path / "mix.history-hot.npz").unlink()
    with pytest.raises(InputError, match="missing"):
        load_history_table(npz, {"history_tables": again}, parse_history("hot"))


def test_predict_hot_on_a_machine_without_the_raw_traces(monkeypatch, tmp_path):
    """The README's `--history hot` example runs from the shipped files alone and prints what
    --source shipped prints beside the traces."""
    from simkit.cli import app

    args = ["predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--history", "hot",
            "--configs", "vanilla,kpad:12", "--seeds", "1", "--num-requests", "128",
            "--format", "json"]
    shipped = CliRunner().invoke(app, [*args, "--source", "shipped"])
    assert shipped.exit_code == 0, shipped.output
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(tmp_path / "absent"))
    assert traces_src_dir() is None
    fresh = CliRunner().invoke(app, args)
    assert fresh.exit_code == 0, fresh.output
    assert fresh.output == shipped.output and '"history": "hot"' in fresh.output


# llama-3.1-8b/mix from the raw traces replays the whole corpus once per run (its sample's
# statistics, in the run's cache): the tests that build it share one xdist worker, in turn, instead
# of replaying it at once on two (test_predict.py's shipped-equals-raw test too)
RAW_MIX = pytest.mark.xdist_group("raw-llama-3.1-8b-mix")


@RAW_MIX
@pytest.mark.parametrize("label", ["cold", "hot"])
@pytest.mark.slow      # long: starts first (tests/conftest.py start_rank)
def test_shipped_history_tables_are_the_raw_build(label, tmp_path):
    """A rebuild from the raw traces writes the same history bytes, and the raw table is the
    shipped one."""
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    # the warm profile first: the build that replays the whole corpus (to choose the sample)
    # takes the warm rows from that replay; after a cold or hot build it replays again for them
    warm = profiles.profile_from_raw("llama-3.1-8b", MIX, history=parse_history("warm"))
    raw = profiles.profile_from_raw("llama-3.1-8b", MIX, history=parse_history(label))
    shipped = profiles.load_profile("llama-3.1-8b", MIX, source="shipped", history=parse_history(label))
    assert np.array_equal(raw.table.accepted, shipped.table.accepted)
    assert np.array_equal(raw.table.drafted, shipped.table.drafted)
    assert raw.table.params == shipped.table.params
    for key in ("tree", "history", "tree_rule", "command", "sample_indices", "sample_weights"):
        assert raw.provenance[key] == shipped.provenance[key], key
    profiles.write_profile(warm, tmp_path, {label: raw.table})
    name = f"{MIX}.history-{label}.npz"
    assert (tmp_path / "llama-3.1-8b" / name).read_bytes() == \
        (profiles.shipped_dir() / "llama-3.1-8b" / name).read_bytes()
