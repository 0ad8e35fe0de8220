"""The pure parts of the vLLM 0.34 deployment what-ifs: the K set of whatif concurrency and its
best K per level, the one static K of whatif ktable, and the version what-if's runner classes and
calibration errors (simkit.whatif.concurrency, batch_size_table, vllm_version)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from simkit.catalog.vllm_versions import get_vllm_version
from simkit.engine.config import parse_configs
from simkit.errors import InputError
from simkit.whatif.batch_size_table import config_text, name_of_k, static_over_range
from simkit.whatif.concurrency import best_k_lines, k_set_configs
from simkit.whatif.vllm_version import calibration_error, runner_class, vllm_version


def test_k_set_adds_suffix_k_on_034_only():
    text, kset = k_set_configs("vanilla,suffix", None, "0.34")
    assert kset == [0, 2, 4, 8, 12, 16]
    names = [s.name for s in parse_configs(text, "0.34")]
    assert names == ["vanilla", "suffix", "suffix-2", "suffix-4", "suffix-12", "suffix-16"]
    assert k_set_configs("vanilla,kpad:4", None, "0.33") == ("vanilla,kpad:4", [])
    with pytest.raises(InputError, match="ks"):
        k_set_configs("vanilla", "2,4", "0.33")
    with pytest.raises(InputError, match="0..64"):
        k_set_configs("vanilla", "4,80", "0.34")


def test_best_k_per_level_and_where_no_k_pays():
    specs = parse_configs("vanilla,suffix:2,8", "0.34")
    tok = {("vanilla", 8): 100.0, ("suffix-2", 8): 150.0, ("suffix", 8): 180.0,
           ("vanilla", 64): 500.0, ("suffix-2", 64): 480.0, ("suffix", 64): 300.0}
    rows = [{"concurrency": c, "config": n, "output_tok_s": v} for (n, c), v in tok.items()]
    lines, best = best_k_lines(rows, specs, [0, 2, 8], [8, 64])
    assert best == {"8": 8, "64": 0}
    assert "8: K 8, 64: K 0" in lines[0] and "no K beats vanilla at 64" in lines[0]


def test_one_static_k_weighs_every_level_alike():
    # K 4 is best at neither level but within 5 % of both; K 8 wins one level and loses 40 %
    tok = {0: [50.0, 100.0], 4: [95.0, 95.0], 8: [100.0, 60.0]}
    k, score = static_over_range([8, 64], tok)
    assert k == 4 and score == pytest.approx((0.95 * 0.95) ** 0.5)


def test_k_set_config_names():
    specs = parse_configs(config_text([0, 4, 8]), "0.34")
    assert name_of_k(specs, [0, 4, 8]) == {0: "vanilla", 4: "suffix-4", 8: "suffix"}


def test_runner_classes_per_version():
    v33, v34 = get_vllm_version("0.33"), get_vllm_version("0.34")
    van, suf = parse_configs("vanilla,suffix", "0.33")
    assert runner_class(v33, van) == "async" and runner_class(v33, suf) == "synchronous"
    assert runner_class(v34, parse_configs("suffix", "0.34")[0]) == "async"


def test_calibration_errors_measured_on_033_unmeasured_on_034():
    e33 = calibration_error(SimpleNamespace(label="calibrated h200-vllm033"))
    assert e33["measured"] and set(e33["by_runner"]) == {"async", "synchronous"}
    e34 = calibration_error(SimpleNamespace(
        label="calibrated h200-vllm034 (transferred from the vLLM 0.33 calibration, not yet "
              "measured on vLLM 0.34 runs)"))
    assert not e34["measured"] and e34["by_runner"] == {} and "unmeasured" in e34["text"]
    assert not calibration_error(SimpleNamespace(label="analytic"))["measured"]
    e26 = calibration_error(SimpleNamespace(label="calibrated h200-vllm026"))
    assert e26["by_runner"] == {} and e26["held_out_mape_pct"] > 0
    assert "no rerun interval stated; held-out error" in e26["text"]


def test_version_whatif_refuses_bad_input_before_work():
    from simkit.app.options import RunOptions

    with pytest.raises(InputError, match="both vLLM 0.34"):
        vllm_version(RunOptions(), from_version="0.34", to_version="0.34")
    with pytest.raises(InputError, match="2 on 0.34"):
        vllm_version(RunOptions(), configs="vanilla,suffix,kpad:8")
    with pytest.raises(InputError, match="from"):
        vllm_version(RunOptions(), from_version="0.12")
