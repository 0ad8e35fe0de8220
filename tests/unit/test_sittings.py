"""Sittings: runs of one machine, told apart by the pauses between their start times."""

from pathlib import Path

import pandas as pd

from simkit.validation.sittings import assign_sittings


def test_a_pause_longer_than_a_machine_idles_starts_a_new_sitting():
    """Runs 9.9 minutes apart (the longest pause inside one machine's sitting in the records) stay
    one sitting; 23 minutes apart (two 0.33 machines of 2026-12-03 evening) are two."""
    runs = pd.DataFrame({"started_utc": ["2026-12-03T17:59:11+00:00", "2026-12-03T18:09:05+00:00",
                                         "2026-12-03T18:32:05+00:00", "2026-12-03T18:34:21+00:00"]})
    assert assign_sittings(runs).tolist() == ["2026-12-03T17:59", "2026-12-03T17:59",
                                              "2026-12-03T18:32", "2026-12-03T18:32"]


def test_the_recorded_033_machines_are_nine_sittings():
    """The vLLM 0.33 records come from nine machine sittings (day 1, six on 2026-12-03 and the
    two long-run machines of 2026-12-04)."""
    runs = pd.read_parquet(Path(__file__).parents[2] / "calibrate/data/vllm-0.33/runs.parquet")
    assert assign_sittings(runs).nunique() == 9
