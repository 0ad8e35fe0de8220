"""The repeat floor: the error a perfect model could not beat, read from the measured runs alone.

A setting measured more than once (same model, corpus, configuration, concurrency, requests,
cap, forcing regime and request history: the grouping of `simkit validate`'s "repeated runs")
gives each of its runs a prediction no model can improve on without knowing that run's own
drift: the mean of the setting's other runs. The leave-one-out error of that prediction,
mean / measured - 1 (the sign and scale of validate's error), averaged over every repeated run,
is the repeat floor. It is split
- by runner class: the async runner (vanilla on Model Runner V2 with async scheduling, whose
  GPU work hides the host's) against the synchronous runner (suffix, K-pad and dynamic-K on the
  V1 runner, and vanilla where the forcing synchronised the stream), whose step waits on the
  host, so a slower or faster host CPU moves its throughput;
- by where the other runs were made: in the same GPU sitting (one machine, back to back:
  simkit.validation.sittings) or in other sittings (another machine or day).
The mean of m other runs carries their drift too, so the leave-one-out error overstates the
error against the setting's true mean by about sqrt(1 + 1/m) (independent drifts of one size);
`true_mean_mape_pct` divides each run's error by that factor: the floor for a model that
predicts the setting's true mean exactly. Both figures use measured tok/s only: no simulation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

FLEET_PREFIX = "fleet-"   # one replica's stream of a fleet run: replayed by the fleet validation
ASYNC, SYNC = "async", "synchronous"
CLASS_LABELS = {ASYNC: "async runner (vanilla)", SYNC: "synchronous runner (speculative)"}
PURPOSES = ("calibration", "validation")
DEFINITION = ("each run of a setting measured >= 2 times predicted by the mean measured tok/s of "
              "the setting's other runs: MAPE of mean / measured - 1 (simkit.validation.floor)")


def config_label(run: dict[str, Any]) -> str:
    """vanilla / suffix-24 / kpad-8: a run's configuration as validate names it."""
    k = int(run["k"] or 0)
    return str(run["config"]) if str(run["config"]) == "vanilla" else f"{run['config']}-{k}"


def runner_class(run: dict[str, Any]) -> str:
    """'async' where the run's engine overlapped host and GPU work (async scheduling, and the
    forcing did not synchronise the stream), else 'synchronous'."""
    from simkit.costmodel.step_records import forcing_synchronised

    flag = run.get("async_scheduling")
    if flag is None or flag != flag:                      # older records: vanilla ran async
        flag = str(run["config"]) == "vanilla"
    return ASYNC if bool(flag) and not forcing_synchronised(run.get("force_copy", "")) else SYNC


def setting_key(run: dict[str, Any]) -> tuple:
    """What makes two runs repeats of one setting (validate's repeated-runs grouping)."""
    from simkit.app.cells import run_history
    from simkit.costmodel.step_records import forcing_regime
    return (str(run["model"]), str(run["corpus"]), int(run["concurrency"]),
            int(run["num_requests"]), int(run.get("max_tokens_cap") or 0),
            forcing_regime(run.get("force_copy", "")), run_history(run).label, config_label(run))


def leave_one_out(runs) -> list[dict[str, Any]]:
    """One row per run of a repeated setting among the calibration and validation runs of
    `runs` (fleet replica streams aside): its runner class, sitting, and the error of the mean of
    its other runs (all of them; those of its own sitting; those of other sittings), with the
    number of runs each mean took."""
    from simkit.validation.sittings import assign_sittings

    sel = runs[runs["purpose"].isin(PURPOSES)
               & ~runs["corpus"].astype(str).str.startswith(FLEET_PREFIX)]
    if sel.empty:
        return []
    sel = sel.assign(_sitting=assign_sittings(sel))
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for run in sel.sort_values("run_id").to_dict("records"):
        groups[setting_key(run)].append(run)
    out = []
    for key, group in sorted(groups.items()):
        if len(group) < 2:
            continue
        for run in group:
            others = [r for r in group if r is not run]
            same = [r for r in others if r["_sitting"] == run["_sitting"]]
            rest = [r for r in others if r["_sitting"] != run["_sitting"]]
            out.append({"run_id": str(run["run_id"]), "runner": runner_class(run),
                        "sitting": run["_sitting"], "setting": key,
                        "measured_tok_s": float(run["output_tok_s"]),
                        "error": _error(others, run), "others": len(others),
                        "error_within": _error(same, run), "others_within": len(same),
                        "error_across": _error(rest, run), "others_across": len(rest)})
    return out


def _error(others: list[dict[str, Any]], run: dict[str, Any]) -> float | None:
    if not others:
        return None
    mean = sum(float(r["output_tok_s"]) for r in others) / len(others)
    return mean / float(run["output_tok_s"]) - 1


def _mape(rows: list[dict[str, Any]], err: str = "error", n: str = "others",
          true_mean: bool = False) -> dict[str, Any]:
    vals = [abs(r[err]) / (math.sqrt(1 + 1 / r[n]) if true_mean else 1.0)
            for r in rows if r[err] is not None]
    return {"runs": len(vals), "mape_pct": 100 * sum(vals) / len(vals) if vals else None}


def repeat_floor(runs) -> dict[str, Any]:
    """The repeat floor of `runs` (one vLLM version's records): overall, per runner class, within
    one sitting and across sittings (module docstring); 'runs' 0 where nothing was repeated."""
    rows = leave_one_out(runs)
    classes = {c: [r for r in rows if r["runner"] == c] for c in (SYNC, ASYNC)}
    overall = _mape(rows)
    return {"definition": DEFINITION, "runs": overall["runs"],
            "settings": len({r["setting"] for r in rows}), "mape_pct": overall["mape_pct"],
            "true_mean_mape_pct": _mape(rows, true_mean=True)["mape_pct"],
            "by_runner": {c: {**_mape(rs), "true_mean_mape_pct": _mape(rs, true_mean=True)[
                "mape_pct"], "label": CLASS_LABELS[c]} for c, rs in classes.items()},
            "within_sitting": {c: _mape(rs, "error_within", "others_within")
                               for c, rs in classes.items()},
            "across_sittings": {c: _mape(rs, "error_across", "others_across")
                                for c, rs in classes.items()}}


def floor_line(floor: dict[str, Any]) -> str | None:
    """validate's text line for the floor, or None when no setting was measured twice."""
    if not floor.get("runs"):
        return None

    def part(d: dict[str, Any]) -> str:
        return "-" if d["mape_pct"] is None else f"{d['mape_pct']:.1f} % ({d['runs']} runs)"

    by = floor["by_runner"]
    classes = [c for c in (SYNC, ASYNC) if by[c]["runs"]]
    return (f"repeat floor (a run predicted by its repeats' mean): {floor['mape_pct']:.1f} % over "
            f"{floor['runs']} runs of "
            f"{floor['settings']} settings measured >= 2 times; "
            + ", ".join(f"{CLASS_LABELS[c]} {part(by[c])}" for c in classes)
            + "; repeats on the same GPU machine, back to back: "
            + ", ".join(f"{c} {part(floor['within_sitting'][c])}" for c in classes)
            + "; on other machines or days: "
            + ", ".join(f"{c} {part(floor['across_sittings'][c])}" for c in classes)
            + f"; a model exact on every setting's mean would still miss by about "
            f"{floor['true_mean_mape_pct']:.1f} %")


__all__ = ["ASYNC", "SYNC", "floor_line", "leave_one_out", "repeat_floor", "runner_class",
           "setting_key"]
