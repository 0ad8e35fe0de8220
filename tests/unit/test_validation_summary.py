"""The shipped calibration's measured-error block counts as fitted only the runs its fit used."""
import json
from pathlib import Path

from simkit.validation.summary import machines_note

CAL = Path(__file__).resolve().parents[2] / "simkit/data/calibrations/h200-vllm033.json"


def test_machines_note_names_the_sittings_the_fit_never_saw():
    assert "not measured yet" in machines_note({"d1"}, {"d1"})
    note = machines_note({"d1"}, {"d1", "d2"})
    assert "d2" in note and "d1 " not in note and "not measured" not in note
    assert "2 separately started GPU machines, 1 of them" in note
    assert "sitting" not in note        # the user reads machines, not our word for a GPU session


def test_shipped_033_block_counts_its_fitted_runs_and_its_unseen_day():
    doc = json.loads(CAL.read_text())
    block = doc["validation"]
    # calibration runs measured after the fit (2026-12-03) are not counted as fitted
    assert block["calibration_runs"] == len(doc["runs"])
    assert all("-v033-1203" not in r for r in doc["runs"])
    assert "2026-12-03" in block["machines"] and "not measured" not in block["machines"]
