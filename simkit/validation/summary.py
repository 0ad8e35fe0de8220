"""The measured-error block a shipped calibration carries (its "validation" key, which `simkit
predict` quotes under cost_model), computed from `simkit validate`'s cells instead of typed in.

    python -m simkit.validation.summary --vllm-version 0.33 \
        --calibration simkit/data/calibrations/h200-vllm033.json

predicts every measured run of that version (fleet replica runs aside) with the calibration and
writes the block into the file, and beside it the calibration's "interval" (the drift and fit
residuals of its fitted runs, simkit.validation.spread.rerun_interval) that the block's coverage
is scored with: one sigma, or the drift per runner class where simkit.validation.interval_rule's
rule says so (the block's "interval_choice" scores both); nothing else in the file changes.
"""

from __future__ import annotations

import argparse
from typing import Any

from simkit.validation.report import (FLEET_PREFIX, acceptance_check, best_config_agreement,
                                      best_k_agreement, mape, mape_by_history, repeatability,
                                      setting_mean_mape)
from simkit.validation.floor import repeat_floor
from simkit.validation.spread import class_sigma, coverage, interval, repeat_tie, rerun_interval

COMMAND = ("simkit validate --vllm-version {v} --format json; --purpose all for the calibration "
           "MAPE and the repeat spread (python -m simkit.validation.summary writes this block)")


def _widths(held: list[dict[str, Any]]) -> str:
    """' (+-14.3 %)', or the half-width per runner class where the classes' bands differ."""
    per = {r: coverage([c for c in held if c.get("runner") == r], None)["median_half_width"]
           for r in ("synchronous", "async")}
    per = {r: w for r, w in per.items() if w is not None}
    if len(per) == 2 and abs(per["synchronous"] - per["async"]) > 1e-9:
        return (f" (+-{100 * per['synchronous']:.1f} % synchronous runner, "
                f"+-{100 * per['async']:.1f} % async runner)")
    width = coverage(held, None)["median_half_width"]
    return f" (+-{100 * width:.1f} %)" if width is not None else ""


def machines_note(fitted_sittings: set[str], held_sittings: set[str]) -> str:
    """Whether the held-out error was measured on GPU machines the fit never saw (a sitting: one
    machine started, its runs back to back; named by its first run's start)."""
    unseen = sorted(held_sittings - fitted_sittings)
    if not unseen:
        return ("its held-out runs were measured on the same machine and day as the fitted ones "
                "(error on another machine not measured yet)")
    machines = "1 GPU machine" if len(held_sittings) == 1 else \
        f"{len(held_sittings)} separately started GPU machines"
    return (f"its held-out runs were measured on {machines}, {len(unseen)} of them (started "
            f"{', '.join(unseen)} UTC) unseen by the fit")


def validation_block(cells: list[dict[str, Any]], version: str,
                     sittings: dict[str, str] | None = None,
                     fitted_ids: set[str] | None = None) -> dict[str, Any]:
    """The block from cells of every calibration and validation run of one version.
    sittings: run id -> GPU sitting name (simkit.validation.sittings), for the machines note;
    fitted_ids: the run ids the calibration was fitted on (its "runs"; default every calibration
    run), so a calibration run made after the fit counts as unseen, not as fitted."""
    held = [c for c in cells if c["purpose"] == "validation"]
    if fitted_ids is None:
        fitted_ids = {c["run_id"] for c in cells if c["purpose"] == "calibration"}
    fit_cells = [c for c in cells if c["run_id"] in fitted_ids]
    worst = max(held, key=lambda c: abs(c["error"]))
    best = best_config_agreement(cells, "validation")
    hot = best_config_agreement([c for c in cells if c.get("history", "cold") != "cold"], "validation")
    bk = best_k_agreement(cells, "validation")
    cov = coverage(cells, "validation")
    rep = repeatability(cells)
    acc = acceptance_check(held).get("used", {})
    vs_mean = setting_mean_mape(cells, "validation")
    block = {
        "metric": "MAPE % of predicted vs measured steady output tok/s, one value per measured run",
        "held_out_runs": len(held), "held_out_mape_pct": round(mape(cells, "validation"), 2),
        "held_out_mape_by_history_pct": {h: round(v, 2) for h, v in mape_by_history(cells).items()
                                         if v is not None},
        "held_out_mape_vs_setting_mean_pct": (None if vs_mean["mape_pct"] is None
                                              else round(vs_mean["mape_pct"], 2)),
        "held_out_settings_vs_mean": f"{vs_mean['settings']} settings measured >= 2 times "
                                     f"({vs_mean['runs']} runs)",
        "held_out_within_5pct": sum(abs(c["error"]) <= 0.05 for c in held),
        "held_out_within_10pct": sum(abs(c["error"]) <= 0.10 for c in held),
        "worst_held_out_pct": round(100 * worst["error"], 1), "worst_held_out_run": worst["run_id"],
        "best_config_held_out": (f"{best['matched']} of {best['total']} groups ({hot['matched']} of "
                                 f"{hot['total']} under a hot or repeat history)"),
        "best_k_held_out": f"{bk['matched']} of {bk['total']} groups",
        **({"best_config_held_out_within_repeat_spread": (
            f"{best['within_repeat_spread']} of {best['total']} groups (the measured best leads "
            f"the predicted best by <= {100 * best['repeat_tie_frac']:.1f} %, two runs of one "
            "setting apart 90 % of the time)")} if best.get("within_repeat_spread") is not None
           else {}),
        "drift_interval_coverage": f"{cov['inside']} of {cov['cells']} held-out runs inside the 90 % band"
                                   + _widths(held),
        "interval_inside": cov["inside"], "interval_runs": cov["cells"],
        "calibration_runs": len(fit_cells),
        "calibration_mape_pct": round(mape(fit_cells, "calibration"), 2),
        "repeat_spread_settings": len(rep["groups"]),
        "repeat_spread_max_pct": round(100 * (rep["max_spread"] or 0.0), 1),
        "acceptance_replay_error_pct": round(100 * acc.get("mean_abs_rel_error", 0.0), 2),
        "source": f"docs/validation.md (vLLM {version})",
        "command": COMMAND.format(v=version),
    }
    if sittings:
        fitted = {sittings[c["run_id"]] for c in fit_cells}
        unseen = {sittings[c["run_id"]] for c in cells if c["run_id"] not in fitted_ids}
        block["machines"] = machines_note(fitted, unseen)
    return block


def host_diagnostic(runs, steps, calibration: str) -> dict[str, Any]:
    """The held-out MAPE if each run's host speed were known (simkit.validation.host_speed; a
    diagnostic: one more simulation per held-out run), rounded as the block stores it."""
    from simkit.validation.host_speed import host_indices, known_host_error

    diag = known_host_error(runs, steps, host_indices(runs, steps, calibration), calibration)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in diag.items()}


def floor_figures(floor: dict[str, Any]) -> dict[str, Any]:
    """The repeat floor (simkit.validation.floor) as the block stores it: MAPE % overall, per
    runner class, within one sitting and across sittings, and against the settings' true means."""
    def pct(d: dict[str, Any]) -> float | None:
        return None if d["mape_pct"] is None else round(d["mape_pct"], 2)

    return {"definition": floor["definition"], "runs": floor["runs"],
            "settings": floor["settings"], "mape_pct": pct(floor),
            "true_mean_mape_pct": (None if floor["true_mean_mape_pct"] is None
                                   else round(floor["true_mean_mape_pct"], 2)),
            **{f"{part}_pct": {c: pct(d) for c, d in floor[part].items()}
               for part in ("by_runner", "within_sitting", "across_sittings")},
            "runs_by_runner": {c: d["runs"] for c, d in floor["by_runner"].items()},
            "runs_within_sitting": {c: d["runs"] for c, d in floor["within_sitting"].items()}}


def with_interval(doc: dict[str, Any], cells: list[dict[str, Any]], runs,
                  fitted_ids: set[str] | None, by_runner: bool = True) -> None:
    """Set doc["interval"] from the cells of the calibration's fitted runs (default every
    calibration run) and re-band every cell with it, so the coverage written beside it is this
    interval's, not the one the file carried before. `by_runner`: the drift term per runner
    class (simkit.validation.spread.rerun_interval), each cell banded by its class's sigma."""
    if fitted_ids is None:
        fitted_ids = {c["run_id"] for c in cells if c["purpose"] == "calibration"}
    doc["interval"] = rerun_interval(cells, runs, fitted_ids, by_runner=by_runner)
    tie = repeat_tie(doc["interval"]["drift_sigma_log"])
    for c in cells:
        c["predicted_interval"] = interval(c["predicted_tok_s"],
                                           class_sigma(doc["interval"], c.get("runner")))
        c["interval_source"] = f"calibration {doc.get('name', '')}"
        c["repeat_tie_frac"] = tie


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-version", required=True)
    ap.add_argument("--calibration", required=True, help="calibration JSON file to write the block into")
    ap.add_argument("--records", default=None, help="records folder (default calibrate/data)")
    args = ap.parse_args(argv)
    import json
    from pathlib import Path

    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.costmodel.calibrations import read_calibration, write_calibration
    from simkit.costmodel.step_records import select_version
    from simkit.errors import SimkitError
    from simkit.validation.measured import load_records
    from simkit.validation.interval_rule import choose
    from simkit.validation.report import build_cells
    from simkit.validation.sittings import assign_sittings

    try:
        version = get_vllm_version(args.vllm_version).key
        doc = read_calibration(args.calibration)
        steps, runs = load_records(args.records)
        runs = select_version(runs, version).reset_index(drop=True)
        runs = runs[~runs["corpus"].astype(str).str.startswith(FLEET_PREFIX)
                    & runs["purpose"].isin(["calibration", "validation"])]
        sittings = dict(zip(runs["run_id"], assign_sittings(runs)))
        cells = build_cells(runs, steps, purpose="all", compare_orderings=False,
                            calibration=args.calibration)
    except SimkitError as exc:
        print(f"error: {exc}")
        return 2
    fitted_ids = set(doc["runs"]) if doc.get("runs") else None
    fit = fitted_ids or {c["run_id"] for c in cells if c["purpose"] == "calibration"}
    by_runner, compared = choose(cells, runs, fit, sittings)
    with_interval(doc, cells, runs, fitted_ids, by_runner=by_runner)
    doc["validation"] = validation_block(cells, version, sittings, fitted_ids)
    doc["validation"]["repeat_floor"] = floor_figures(repeat_floor(runs))
    doc["validation"]["interval_choice"] = compared
    doc["validation"]["host_speed_diagnostic"] = host_diagnostic(runs, steps, args.calibration)
    write_calibration(doc, Path(args.calibration))
    print(json.dumps({"interval": doc["interval"], "validation": doc["validation"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
