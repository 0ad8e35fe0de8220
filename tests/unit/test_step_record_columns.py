"""The column-wise readers of step records equal their row-wise definitions on the committed
records: `batches` gives batch_from_row's descriptors, `versions_of` version_of's keys (both
exist only because the per-row forms took seconds on ~500 k steps)."""

from pathlib import Path

import pandas as pd
import pytest

from simkit.costmodel.step_records import (batch_from_row, batches, records, version_of,
                                           versions_of)

DATA = Path(__file__).resolve().parents[2] / "calibrate" / "data"


@pytest.fixture(scope="module")
def recorded():
    from simkit.validation.measured import load_records

    steps, runs = load_records(DATA)
    if steps is None:
        pytest.skip("no committed step records")
    return steps, runs


def test_batches_are_batch_from_row_of_every_row(recorded):
    steps, _ = recorded
    # every graph mode, both runner kinds and every drafter of the records, in one sample
    sample = pd.concat([g.head(300) for _, g in steps.groupby(
        ["graph_mode", "async_scheduling", "config"], sort=True)])
    assert len(sample) > 1000
    assert batches(sample) == [batch_from_row(r) for r in records(sample)]


def test_batches_read_a_missing_accepted_count_as_zero(recorded):
    steps, _ = recorded
    rows = steps.head(50).copy()
    rows["num_accepted"] = rows["num_accepted"].astype("Int64")
    rows.loc[rows.index[:10], "num_accepted"] = pd.NA
    got = batches(rows)
    assert [b.num_accepted_tokens for b in got[:10]] == [0] * 10
    assert got[10:] == [batch_from_row(r) for r in records(rows.iloc[10:])]
    assert batches(rows.drop(columns="num_accepted")) == \
        [batch_from_row(r) for r in records(rows.drop(columns="num_accepted"))]


def test_versions_of_is_version_of_per_value(recorded):
    _, runs = recorded
    col = pd.concat([runs["vllm_version"].astype(object),
                     pd.Series(["0.26.0", "0.33.0", "not-a-version", None, float("nan")])],
                    ignore_index=True)
    assert versions_of(col).tolist() == [version_of(v) for v in col]
    assert set(versions_of(runs["vllm_version"])) >= {"0.26", "0.33"}
