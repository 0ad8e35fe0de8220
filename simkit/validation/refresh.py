"""Recompute every shipped error figure from the records, after new runs land:

    python -m simkit.validation.refresh

1. the vLLM 0.33 calibration's error block and interval (simkit.validation.summary on
   simkit/data/calibrations/h200-vllm033.json: held-out MAPE, best configuration, the interval
   the rule chooses and both intervals' coverage, the repeat floor, the host-speed diagnostic);
2. the README's pasted `simkit predict` example (it quotes that block; the README test,
   tests/integration/test_report.py, compares it with what the command prints);
3. the figures of docs/validation.md, "What limits the error" (between its refresh markers),
   from that block and the 0.26 records' repeat floor, and the drift's time scale
   (simkit.validation.drift, between the drift markers).
The 0.26 calibration is not rewritten (its figures and outputs stay as they are). Then run
`simkit validate --vllm-version 0.33` for the per-run table. Same records, same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CAL033 = ROOT / "simkit/data/calibrations/h200-vllm033.json"
CAL026 = ROOT / "simkit/data/calibrations/h200-vllm026.json"
README = ROOT / "README.md"
DOC = ROOT / "docs/validation.md"
BEGIN, END = "<!-- refresh: figures begin -->", "<!-- refresh: figures end -->"
DRIFT_BEGIN, DRIFT_END = "<!-- refresh: drift begins -->", "<!-- refresh: drift ends -->"
PREDICT = "$ simkit predict --model llama-3.1-8b --corpus mix --plot docs/img/predict-llama-3.1-8b-mix.png\n"
GOALS = {"mape": 5.0, "hot": 8.0, "best": 0.90, "interval": 0.90}


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _count(text: str) -> tuple[int, int]:
    """(a, b) of a block's 'a of b groups ...' text."""
    a, _, b = text.split()[:3]
    return int(a), int(b)


def figures_markdown(val033: dict[str, Any], val026: dict[str, Any],
                     floor026: dict[str, Any]) -> str:
    """The generated part of "What limits the error": goals against the figures, the repeat
    floor per version, the host-speed diagnostic and both intervals' coverage."""
    f33, diag = val033["repeat_floor"], val033["host_speed_diagnostic"]
    hist = val033["held_out_mape_by_history_pct"]
    hot = {h: v for h, v in hist.items() if h != "cold"}
    best, tot = _count(val033["best_config_held_out"])
    within, _ = _count(val033["best_config_held_out_within_repeat_spread"])
    choice = val033["interval_choice"]
    one, per = choice["one_sigma"], choice["by_runner"]
    cov = val033["interval_inside"] / val033["interval_runs"]

    def floor_row(name: str, f: dict[str, Any], pct: Any) -> str:
        return (f"| {name} | {pct(f, 'mape_pct')} ({f['runs']} runs, {f['settings']} settings) "
                f"| {pct(f['by_runner']['synchronous'], 'mape_pct')} | "
                f"{pct(f['by_runner']['async'], 'mape_pct')} | "
                f"{pct(f['within_sitting']['synchronous'], 'mape_pct')} / "
                f"{pct(f['within_sitting']['async'], 'mape_pct')} | "
                f"{pct(f['across_sittings']['synchronous'], 'mape_pct')} / "
                f"{pct(f['across_sittings']['async'], 'mape_pct')} | "
                f"{pct(f, 'true_mean_mape_pct')} |")

    def block(d: dict[str, Any], key: str) -> str:
        v = d.get(key)
        return "-" if v is None else f"{v:.1f} %"

    f33_doc = {"runs": f33["runs"], "settings": f33["settings"], "mape_pct": f33["mape_pct"],
               "true_mean_mape_pct": f33["true_mean_mape_pct"],
               **{part: {c: {"mape_pct": v} for c, v in f33[f"{part}_pct"].items()}
                  for part in ("by_runner", "within_sitting", "across_sittings")}}
    lines = [
        f"vLLM 0.33, {val033['held_out_runs']} held-out runs ({val033['machines']}):", "",
        "| goal | figure | |", "|---|---|---|",
        f"| held-out MAPE <= {GOALS['mape']:.0f} % | {val033['held_out_mape_pct']:.2f} % "
        f"(cold {hist.get('cold', 0):.2f} %) | {_met(val033['held_out_mape_pct'] <= GOALS['mape'])} |",
        f"| second figure: held-out MAPE against each setting's mean measured tok/s | "
        f"{val033['held_out_mape_vs_setting_mean_pct']:.2f} % "
        f"({val033['held_out_settings_vs_mean']}) | - |",
        f"| hot and repeat runs <= {GOALS['hot']:.0f} % | "
        + ", ".join(f"{h} {v:.2f} %" for h, v in hot.items())
        + f" | {_met(all(v <= GOALS['hot'] for v in hot.values()))} |",
        f"| best configuration right in >= 90 % of groups | {best} of {tot} strictly; {within} of "
        f"{tot} within the repeat spread | {_met(best >= GOALS['best'] * tot)} strictly |",
        f"| the interval covers >= 90 % | {val033['interval_inside']} of "
        f"{val033['interval_runs']} held-out runs ({100 * cov:.1f} %) | "
        f"{_met(cov >= GOALS['interval'])} |", "",
        "Repeat floor (each run of a setting measured >= 2 times predicted by the mean of its "
        "other runs; synchronous = the speculative configurations on the V1 runner, async = "
        "vanilla; a sitting is one machine, back to back):", "",
        "| records | all | synchronous | async | same sitting (sync / async) | other sittings "
        "(sync / async) | against the true mean |", "|---|---|---|---|---|---|---|",
        floor_row("vLLM 0.33", f33_doc, block), floor_row("vLLM 0.26", floor026, block), "",
        f"Runs per class, vLLM 0.33: {f33['runs_by_runner']['synchronous']} synchronous, "
        f"{f33['runs_by_runner']['async']} async; with a repeat in the same sitting: "
        f"{f33['runs_within_sitting']['synchronous']} / {f33['runs_within_sitting']['async']}. "
        f"vLLM 0.26 held-out MAPE for comparison: {val026['held_out_mape_pct']:.2f} %.", "",
        f"Host-speed diagnostic (not the error a user sees): held-out MAPE {diag['mape_pct']:.2f} "
        f"% as predicted, {diag['mape_if_host_speed_known_pct']:.2f} % if each run's host speed "
        f"were known ({diag['runs']} runs; correlation of the log host-speed index with the log "
        f"error {diag['log_index_vs_log_error']:+.2f}).", "",
        f"Interval ({choice['rule']}; shipped: {choice['shipped']}):", "",
        "| interval | half-width sync / async | held-out inside | unseen sittings inside | "
        "unseen, sync | unseen, async |", "|---|---|---|---|---|---|"]
    for name, s in (("one sigma", one), ("per runner class", per)):
        u = s["unseen_sittings_by_runner"]
        lines.append(f"| {name} | +-{s['half_width_pct']['synchronous']:.1f} % / "
                     f"+-{s['half_width_pct']['async']:.1f} % | {s['held_out']['inside']} of "
                     f"{s['held_out']['runs']} | {s['unseen_sittings']['inside']} of "
                     f"{s['unseen_sittings']['runs']} | {u['synchronous']['inside']} of "
                     f"{u['synchronous']['runs']} | {u['async']['inside']} of "
                     f"{u['async']['runs']} |")
    return "\n".join(lines)


def drift_markdown() -> str:
    """The drift's time scale as `python -m simkit.validation.drift` prints it, fenced."""
    from simkit.validation.drift import drift_summary, render

    return "```\n" + render(drift_summary("0.33")) + "\n```"


def replace_between(text: str, begin: str, end: str, body: str) -> str:
    """`text` with what lies between the markers `begin` and `end` replaced by `body`."""
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i] + "\n" + body + "\n" + text[j:]


def readme_predict(text: str) -> str:
    """The README with its pasted predict example as the command prints it now (this checkout's
    simkit in a fresh process: the command line is the layer above this one)."""
    import os
    import subprocess
    import sys

    start = text.index(PREDICT) + len(PREDICT)
    end = text.index("```\n", start)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "simkit", "predict", "--model", "llama-3.1-8b",
                          "--corpus", "mix", "--source", "shipped"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"error: simkit predict failed: {out.stderr.strip()}")
    return text[:start] + out.stdout + text[end:]


def main(argv: list[str] | None = None) -> int:
    from simkit.costmodel.step_records import select_version
    from simkit.validation import summary
    from simkit.validation.floor import repeat_floor
    from simkit.validation.measured import load_records

    rc = summary.main(["--vllm-version", "0.33", "--calibration", str(CAL033)])
    if rc:
        return rc
    README.write_text(readme_predict(README.read_text()))
    _, runs = load_records(None)
    floor026 = repeat_floor(select_version(runs, "0.26"))
    val033 = json.loads(CAL033.read_text())["validation"]
    val026 = json.loads(CAL026.read_text())["validation"]
    doc = replace_between(DOC.read_text(), BEGIN, END, figures_markdown(val033, val026, floor026))
    DOC.write_text(replace_between(doc, DRIFT_BEGIN, DRIFT_END, drift_markdown()))
    for path in (CAL033, README, DOC):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
