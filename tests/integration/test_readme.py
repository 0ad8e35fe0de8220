"""The README's figures are what its commands print.

Every number in the README's prose (and in the comments of its command blocks) sits in one of
the phrases of QUOTED below, and each phrase's figures are compared with what the command it
describes prints today (CliRunner, shipped profiles, embedded defaults): a stale figure fails
here, and so does a new figure nobody checks. The pasted `simkit predict` output block is
compared line for line by tests/integration/test_report.py
(test_readme_predict_example_is_what_the_command_prints)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkit.cli import app, main

ROOT = Path(__file__).resolve().parents[2]

# the phrases that quote a figure; each is checked by the test named beside it
QUOTED = {
    "ladder": r"K-pad at K in \{([\d, ]+)\}",
    "versions": r"your vLLM version \((\d+\.\d+), (\d+\.\d+) or (\d+\.\d+);",
    "carried": (r"; (\d+\.\d+)'s cost model is carried over from (\d+\.\d+) until runs on "
                r"(\d+\.\d+) measure it\)"),
    "oracle": r"puts vLLM (\d+\.\d+\.\d+)'s own suffix-drafter kernels",
    "fleet": (r"recorded vLLM (\d+\.\d+) fleet runs: each replica's accepted tokens per step "
              r"within (\d+) % of vLLM's on all (\d+) speculative runs"),
    "arctic": r"builds arctic-inference (\d+\.\d+\.\d+)",
    "exit": r"or field; exit (\d+)\)",
    "shipped": r"fitted on an (H\d+) with vLLM (\d+\.\d+\.\d+) and (\d+\.\d+\.\d+)\.",
    "budget": r"make your own in about (\d+) GPU-minutes",
    "tour_budget": r"calibrate: the runs to make on your GPU and vLLM, about (\d+) GPU-minutes",
    "tour_predict": r"\(one (H\d+), vLLM (\d+\.\d+)\)",
    "gpu_host": r"with vLLM (\d+\.\d+)\.\.(\d+\.\d+) and simkit installed",
    "plan": r"by default (\d+) engines of (\d+) runs each, about ([\d.]+) of (\d+) GPU-minutes",
    "accuracy": (r"On the recorded vLLM (\d+\.\d+) runs \((H\d+)\) it misses a single held-out "
                 r"run by ([\d.]+) % on average and the mean of a setting's repeated runs by "
                 r"([\d.]+) %"),
}


def refused(capsys, *argv: str) -> tuple[int, list[str]]:
    """Exit status and stderr lines of a command line the user gets wrong (through main(), as
    the `simkit` script runs it)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    err = capsys.readouterr().err
    return int(exc.value.code or 0), [ln for ln in err.splitlines() if ln.strip()]


def readme() -> str:
    return (ROOT / "README.md").read_text()


def one_line(text: str) -> str:
    """Whitespace runs as one space, so a phrase matches however the README wraps it."""
    return re.sub(r"\s+", " ", text)


def quoted(name: str) -> tuple[str, ...]:
    """The figures of one QUOTED phrase; the phrase must be in the README exactly once."""
    found = re.findall(QUOTED[name], one_line(readme()))
    assert len(found) == 1, (name, found)
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def figure_text(text: str) -> str:
    """The README with what is not a quoted figure blanked: pasted output and commands (fenced
    blocks, kept: the comments of bash blocks, less the commands they name), inline code, link
    targets, file names."""
    def comment(line: str) -> str:
        text = line.split("#", 1)[1] if "#" in line else ""
        return "" if text.strip().startswith("simkit ") else text

    def keep_comments(m: re.Match) -> str:
        if m.group(1) != "bash":
            return ""
        return "\n".join(comment(ln) for ln in m.group(2).splitlines())

    text = re.sub(r"```([a-z]*)\n(.*?)```", keep_comments, text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"[\w./-]+\.(md|png|sh|py|jsonl)\b", "", text)


def unchecked(text: str) -> list[str]:
    """The figures of `text` outside every QUOTED phrase, each with its context."""
    plain = one_line(figure_text(text))
    spans = [m.span() for pattern in QUOTED.values() for m in re.finditer(pattern, plain)]
    return [plain[max(0, m.start() - 30):m.end() + 10]
            for m in re.finditer(r"(?<![\w.])\d+(?:[.,]\d+)*", plain)
            if not any(a <= m.start() < b for a, b in spans)]


def test_every_figure_in_the_readme_is_one_this_file_checks():
    assert unchecked(readme()) == [], f"README figures with no check in {__file__}"


def test_the_guard_sees_an_unchecked_figure():
    extra = "\nsimkit is 3.5 times faster than a sweep (`--seeds 9`, docs/x-2.md).\n"
    found = unchecked(readme() + extra)
    assert len(found) == 1 and found[0].endswith("simkit is 3.5 times fas")


@lru_cache(maxsize=None)
def _predict_json(version: str | None) -> dict:
    """The README's predict command (the default ladder), one seed, as JSON; None: the default
    vLLM version."""
    pick = ["--vllm-version", version] if version else []
    result = CliRunner().invoke(app, ["predict", "--model", "llama-3.1-8b", "--corpus", "mix",
                                      *pick, "--seeds", "1",
                                      "--num-requests", "128", "--source", "shipped",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_ladder_k_set_is_the_default_ladder_predict_prints():
    ks = sorted(int(k) for k in quoted("ladder")[0].split(","))
    configs = [r["config"] for r in _predict_json(None)["results"]]
    assert sorted(int(c.split("-")[1]) for c in configs if c.startswith("kpad-")) == ks


def known_versions(capsys) -> list[str]:
    """The versions predict names when it refuses a release older than all it knows (a newer
    one is predicted with the newest rules and a warning)."""
    code, err = refused(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "mix",
                        "--vllm-version", "0.20")
    assert code == 2 and len(err) == 1
    return err[0].split("known: ", 1)[1].split(";", 1)[0].split(", ")


def test_versions_are_the_ones_predict_knows_and_the_shipped_calibrations(capsys):
    versions = quoted("versions")
    assert known_versions(capsys) == list(versions)
    hardware, *full = quoted("shipped")
    for short, version in zip(versions, full):      # the measured ones (0.34's is carried over)
        doc = _predict_json(short)
        assert doc["assumptions"]["vllm"]["value"]["version"] == version
        cost = doc["assumptions"]["cost_model"]["value"]
        assert cost["hardware"] == hardware.lower() and cost["label"].startswith("calibrated")


def test_the_carried_over_calibration_is_the_one_shipped():
    """The newest version's calibration is the earlier one's coefficients, said so in its file
    and in every prediction that uses it, with no measured error."""
    from simkit.costmodel.calibrations import read_calibration

    to, source, again = quoted("carried")
    assert to == again == quoted("versions")[-1]
    doc = read_calibration(f"h200-vllm{to.replace('.', '')}")
    assert doc["transferred_from"]["vllm_version"] == source
    assert "validation" not in doc and "interval" not in doc


def test_oracle_version_is_the_one_the_install_script_takes():
    (version,) = quoted("oracle")
    assert f"vllm=={version}" in (ROOT / "tests" / "install_vllm034_oracle.sh").read_text()


def test_tour_defaults_are_what_predict_runs_without_options():
    hardware, version = quoted("tour_predict")
    doc = _predict_json(None)
    assert (doc["hardware"], doc["vllm_version"]) == (hardware.lower(), version)


def test_gpu_host_version_range_is_the_known_versions(capsys):
    known = known_versions(capsys)
    assert quoted("gpu_host") == (known[0], known[-1])


def test_exit_status_of_bad_input_is_the_one_quoted(capsys):
    (status,) = quoted("exit")
    code, err = refused(capsys, "predict", "--model", "llama-3.1-8b", "--corpus", "mix",
                        "--seeds", "0")
    assert code == int(status)
    assert len(err) == 1 and err[0].startswith("error:") and "seeds" in err[0]


def test_arctic_version_is_the_one_the_install_script_pins():
    (version,) = quoted("arctic")
    assert f"arctic-inference=={version}" in (ROOT / "tests" / "install_arctic.sh").read_text()


@pytest.mark.parametrize("corpus", ["chat"])
def test_calibration_plan_figures_are_what_calibrate_plan_prints(corpus, tmp_path):
    engines, runs, minutes, budget = quoted("plan")
    assert quoted("budget") == (budget,) and quoted("tour_budget") == (budget,)
    result = CliRunner().invoke(app, ["calibrate", "plan", "--model", "llama-3.1-8b", "--corpus",
                                      corpus, "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert len(plan["engines"]) == int(engines)
    assert {len(e["runs"]) for e in plan["engines"]} == {int(runs)}
    text = CliRunner().invoke(app, ["calibrate", "plan", "--model", "llama-3.1-8b", "--corpus",
                                    corpus]).output
    assert f"{engines} engines, about {minutes} of {budget} GPU-minutes" in text


def test_calibration_plan_without_the_raw_traces_estimates_from_the_shipped_profile(
        monkeypatch, tmp_path):
    """A fresh clone prints the README's figure too, and says where its mean output comes from
    (it printed a fixed 400 tokens, 9.7 GPU-minutes, as if measured)."""
    engines, _, minutes, budget = quoted("plan")
    monkeypatch.setenv("SIMKIT_TRACES_SRC", str(tmp_path / "absent"))
    text = CliRunner().invoke(app, ["calibrate", "plan", "--model", "llama-3.1-8b", "--corpus",
                                    "chat"]).output
    assert f"{engines} engines, about {minutes} of {budget} GPU-minutes" in text
    assert "from the shipped profile's 128-request sample" in one_line(text)


@pytest.mark.xdist_group("fleet-validation")    # with the other readers of fleet_validation_rows
def test_fleet_validation_figures_are_what_fleet_validate_prints(request, monkeypatch):
    """`fleet validate --format json` as the user runs it, its replay of the recorded runs
    (validate_fleet, the default calibration) the one the fleet validation tests check, computed
    once per pytest run (conftest fleet_validation_rows) instead of once more here."""
    from simkit.fleet import validate
    from simkit.paths import traces_src_dir

    if traces_src_dir() is None:
        pytest.skip("fleet validate replays the raw traces (../shared/traces-src)")
    shared, real = request.getfixturevalue("fleet_validation_rows"), validate.validate_fleet

    def validate_fleet(root=None, calibration=None, run_ids=None):
        if (root, calibration, run_ids) == (None, None, None):
            return [dict(r) for r in shared]
        return real(root, calibration, run_ids)

    monkeypatch.setattr(validate, "validate_fleet", validate_fleet)
    version, goal, runs = quoted("fleet")
    result = CliRunner().invoke(app, ["fleet", "validate", "--format", "json"])
    assert result.exit_code == 0, result.output
    spec = [r for r in json.loads(result.output)["runs"] if r["config"] != "vanilla"]
    assert len(spec) == int(runs)
    assert {r["vllm_version"].rsplit(".", 1)[0] for r in spec} == {version}
    assert all(abs(r["accepted_error"]) <= int(goal) / 100 for r in spec)


def test_calibrate_plan_refuses_a_corpus_that_is_not_there(capsys):
    """The tour plans runs on the user's imported traffic: before the import, the plan says
    so instead of planning runs on a corpus the GPU host cannot load."""
    code, err = refused(capsys, "calibrate", "plan", "--model", "llama-3.1-8b", "--corpus",
                        "not-imported-yet")
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: unknown corpus 'not-imported-yet'; known: chat")
    assert "simkit traces import FILE --name not-imported-yet" in err[0]


def test_accuracy_figures_are_the_shipped_calibrations_held_out_block():
    """The README's error figures are the 0.33 calibration's stored block (which the refresh
    writes from validate's own predictions: tests/unit/test_refresh.py keeps it current)."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration

    version, gpu, per_run, vs_mean = quoted("accuracy")
    block = read_calibration(default_calibration(gpu.lower(), version))["validation"]
    assert per_run == f"{block['held_out_mape_pct']:.1f}"
    assert vs_mean == f"{block['held_out_mape_vs_setting_mean_pct']:.1f}"
