"""The reference study's published rows as data, and simkit's reproduction beside them."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from simkit.paths import traces_src_dir
from simkit.reference import HELD_OUT, PUBLISHED
from simkit.reference.published import published


def _doc_path():
    root = traces_src_dir()
    return None if root is None else root.parent / "docs" / "reference-study.md"


def test_six_published_rows_match_the_shared_document():
    """The carried numbers equal the table in shared/docs/reference-study.md, row for row."""
    path = _doc_path()
    if path is None or not path.is_file():
        pytest.skip("../shared (reference-study.md) not present")
    text = path.read_text()
    rows = re.findall(r"^\| ([^|]+?) \| ([\d,]+) \| ([\d,]+) \| (\w[\w-]*) \| ([\d.]+)x \|$", text,
                      re.M)
    assert len(rows) == 6
    assert len(PUBLISHED) == 6
    for (name, van, final, lever, ratio), pub in zip(rows, PUBLISHED):
        assert pub.study_name == name.strip()
        assert pub.van_off == int(van.replace(",", ""))
        assert pub.final == int(final.replace(",", ""))
        assert pub.final_lever == lever and pub.ratio == float(ratio)


def test_published_ratios_are_final_over_vanilla_to_rounding():
    for r in PUBLISHED:
        assert abs(r.final / r.van_off - r.ratio) <= 0.006, r


def test_every_study_model_is_in_the_catalogue():
    from simkit.reference.reproduce import study_models

    names = study_models()
    assert len(names) == 11 and len(set(names)) == 11
    assert set(HELD_OUT).isdisjoint(r.model for r in PUBLISHED)


def test_errors_are_computed_from_the_published_numbers():
    from simkit.reference.reproduce import with_published

    row = with_published({"model": "llama-3.1-8b", "van_pred": 8000.0, "final_pred": 30000.0,
                          "ratio_pred": 3.75})
    assert row["van_err"] == pytest.approx(8000 / 8850 - 1)
    assert row["final_err"] == pytest.approx(30000 / 33531 - 1)
    assert row["ratio_err"] == pytest.approx(3.75 / 3.79 - 1)
    held = with_published({"model": "qwen2.5-7b", "van_pred": 1.0, "final_pred": 2.0,
                           "ratio_pred": 2.0})
    assert not held["published"] and held["van_err"] is None and held["ratio_err"] is None
    assert published("qwen2.5-7b") is None


@pytest.fixture(scope="module")
def profiles():
    """The workload profiles module (a real import: a broken one fails, never skips)."""
    import simkit.profiles.corpus_profile

    return simkit.profiles.corpus_profile


def test_reproduction_side_by_side_on_real_profiles(profiles):
    """Two published models and one held out, small runs: the table has predictions, published
    figures and errors computed from them; the held-out row has predictions only."""
    from simkit.reference.reproduce import STUDY, reproduce

    res = reproduce(STUDY.but(num_requests=64, workers=2),
                    models=["llama-3.1-8b", "qwen2.5-72b", "qwen2.5-7b"])
    rows = {r["model"]: r for r in res.rows}
    for name in ("llama-3.1-8b", "qwen2.5-72b"):
        r = rows[name]
        pub = published(name)
        assert r["published"] and r["van_pub"] == pub.van_off and r["final_pub"] == pub.final
        assert r["van_pred"] > 0 and r["final_pred"] >= r["van_pred"] * 0.5
        assert r["van_err"] == pytest.approx(r["van_pred"] / pub.van_off - 1)
        assert r["final_err"] == pytest.approx(r["final_pred"] / pub.final - 1)
        assert r["ratio_pred"] == pytest.approx(r["final_pred"] / r["van_pred"])
        assert r["best_k"] in (4, 6, 8, 12)
        assert r["final_lever"] == "bestKpad" or r["final_lever"].startswith("dynamic")
    held = rows["qwen2.5-7b"]
    assert not held["published"] and held["final_pred"] > 0 and held["final_err"] is None
    assert rows["qwen2.5-72b"]["tp"] >= 2            # simkit's TP choice is stated per row
    assert any("TP degrees are simkit's choice" in n for n in res.notes)


def test_reference_cli_json(profiles, tmp_path):
    from simkit.cli import app

    png = tmp_path / "ref.png"
    out = CliRunner().invoke(app, ["whatif", "reference", "--model", "llama-3.1-8b",
                                   "--num-requests", "48", "--workers", "2", "--format", "json",
                                   "--plot", str(png)])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)             # stderr says where the plot went
    assert doc["whatif"] == "reference" and doc["rows"][0]["van_pub"] == 8850
    assert png.stat().st_size > 1000 and f"wrote {png}" in out.stderr.splitlines()


def test_dynamic_verdict_counts_small_gaps_as_ties():
    from simkit.engine.summary import Row
    from simkit.app.verdict import dynamic_verdict

    def row(t, std=0.0):
        return Row("x", 4, t, std, None, 0.9, 1.0, 0.1, 1.0, 1.0)

    assert dynamic_verdict(row(1005), row(1000)) == "ties"          # +0.5 % < 1 % drift
    assert dynamic_verdict(row(1030), row(1000)) == "beats"
    assert dynamic_verdict(row(1030), row(1000, std=40)) == "ties"   # within the seed spread
    assert dynamic_verdict(row(950), row(1000)) == "loses"
    assert dynamic_verdict(None, row(1000)) is None
