"""Issue 41, the silently-wrong class: no figure printed that the tool cannot stand behind.

Each test here failed before its fix; where the issue names a property, it is a property test
over the shipped catalogue or inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import one_line_error, run
from cli_helpers import own_cache as _own_cache  # noqa: F401 (autouse)

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=15, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "code-edit", "--configs",
           "vanilla,suffix", "--seeds", "1", "--num-requests", "96", "--source", "shipped",
           "--workers", "1")


def _entry_doc(hw: str) -> dict:
    return json.loads((ROOT / "simkit" / "data" / "hardware" / f"{hw}.json").read_text())


# -- 1. a hardware file equal to a catalogue entry is that entry; a borrowed name is not ------

@FAST
@given(data=st.data())
def test_a_hardware_file_equal_to_an_entry_prices_and_labels_as_the_entry(tmp_path_factory, data):
    from simkit.catalog.hardware import canonical_hardware, list_hardware
    from simkit.costmodel import load_cost_model

    hw = data.draw(st.sampled_from(list_hardware()))
    doc = _entry_doc(hw)
    keys = data.draw(st.permutations(sorted(doc)))
    stem = data.draw(st.sampled_from([hw, "my-gpu", hw.upper()]))
    path = tmp_path_factory.mktemp("hw") / f"{stem}.json"
    path.write_text(json.dumps({k: doc[k] for k in keys}, indent=data.draw(st.sampled_from([None, 2]))))
    assert canonical_hardware(str(path)) == hw
    for version in ("0.26", "0.33"):
        a = load_cost_model("llama-3.1-8b", hw, vllm_version=version)
        b = load_cost_model("llama-3.1-8b", canonical_hardware(str(path)), vllm_version=version)
        assert a.label == b.label and a.coefs == b.coefs and a.tp == b.tp


def test_a_copy_of_h200_json_prints_the_h200_prediction(capsys, tmp_path):
    """It got h200's calibrated figures labelled 'analytic ... error never measured'."""
    path = tmp_path / "copy.json"
    path.write_text((ROOT / "simkit" / "data" / "hardware" / "h200.json").read_text())
    code, entry, _ = run(capsys, *PREDICT, "--hardware", "h200")
    assert code == 0
    code, copy, _ = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 0 and copy == entry
    assert "90 % interval for a rerun" in copy


_FIGURES = ("hbm_gib", "hbm_tbps", "bf16_tflops", "fp8_tflops", "nvlink_gbps", "host_speed")


@FAST
@given(field=st.sampled_from(_FIGURES), factor=st.sampled_from([0.5, 1.25, 2.0]))
def test_a_file_borrowing_a_name_is_never_priced_with_that_entrys_fit(tmp_path_factory, field,
                                                                       factor):
    from simkit.costmodel import load_cost_model

    doc = _entry_doc("h200")
    doc[field] = doc[field] * factor
    path = tmp_path_factory.mktemp("hw") / "h200.json"
    path.write_text(json.dumps(doc))
    cost = load_cost_model("llama-3.1-8b", str(path), tp=1, max_model_len=4096)
    assert cost.label.startswith("analytic: ") and field in cost.label
    assert cost.coefs == load_cost_model("llama-3.1-8b", "h200", calibration="analytic").coefs
    asked = load_cost_model("llama-3.1-8b", str(path), tp=1, max_model_len=4096,
                            calibration="h200-vllm033")
    assert "transferred to the hardware file named h200" in asked.label


def test_a_faster_copy_named_h200_says_which_calibration_it_used(capsys, tmp_path):
    doc = _entry_doc("h200")
    doc["hbm_tbps"] = 6.0
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(doc))
    code, out, _ = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 0
    text = " ".join(out.split())
    assert "analytic coefficients (no calibrated profile): error never measured; the hardware " \
           "file is named h200 but its figures (hbm_tbps) differ" in text
    assert "--calibration h200-vllm033 transfers it" in text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "-1"])
@pytest.mark.parametrize("field", ["hbm_tbps", "fp4_tflops", "host_speed"])
def test_non_finite_or_negative_hardware_figures_are_one_error(capsys, tmp_path, field, value):
    text = json.dumps(_entry_doc("h200"), indent=2)
    text = text.replace(f'"{field}": {json.dumps(_entry_doc("h200")[field])}',
                        f'"{field}": {value}')
    assert value in text
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, _, err = run(capsys, *PREDICT, "--hardware", str(path))
    assert code == 2
    one_line_error(err, str(path), field)
