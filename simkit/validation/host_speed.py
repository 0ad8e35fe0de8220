"""How fast the host CPU ran during one measured run, read from that run's own step records.

A run's host-speed index is the factor on the calibration's host speed that makes the cost
model's host stages match the host-stage times the run recorded, over the steps of its steady
window (the steps its tok/s is measured on):

    index = sum over the window of the cost model's host seconds (schedule, prepare, draft,
            update, and the dispatch of PIECEWISE/eager forwards) on the recorded batches
          / sum of the same stages as recorded (t_schedule_s, t_prepare_s, t_draft_s,
            t_update_s, and t_exec_host_s - t_prepare_s on those forwards)

Host times are inversely proportional to host speed in the cost model, so `index` is that
host_speed / the calibration's: 1.2 means the host ran 20 % faster than the one the calibration
prices. It reads host stage times only, never the run's throughput, so it can explain a run's
throughput error without being fitted to it. Dispatch is left out on a synchronous step whose
model-runner host time reaches 97 % of its forward (it waited for the GPU there; the estimator
leaves the same steps out of its dispatch fit).

Why: on the synchronous V1 runner (suffix, K-pad) the host stages of one run move together and
the PIECEWISE forward, launched layer by layer from the host, moves with them, while the
async runner (vanilla) hides most of it; so the run-to-run drift that limits the error is mostly
one factor per run, this one (docs/validation.md, "What limits the error"). `spread`
summarises the index over a set of runs, `by_sitting` per GPU machine and sitting
(simkit.validation.sittings), and `known_host_error` is the diagnostic "held-out MAPE if each
run's host speed were known": every held-out run predicted again on the host its own records
show (simkit.costmodel.host_factor). A diagnostic only: a user predicting a run they have not
made cannot know its host speed; it says how much of the error is the host's drift.

    python -m simkit.validation.host_speed --vllm-version 0.33 [--diagnostic]

prints every run's index and the spreads (no simulation: seconds); --diagnostic also predicts
every held-out run on its own host speed (one simulation per run).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

STAGES = ("schedule", "prepare", "draft", "update", "dispatch")
WAITED = 0.97      # a synchronous step's host time at >= this share of its forward waited for it


def run_host_index(run: dict[str, Any], steps, cost) -> dict[str, Any]:
    """The host-speed index of one run from its steps (`steps`: that run's step records) and the
    CostModel `cost` that predicts it (simkit.costmodel.run_conditions.run_cost(run).base):
    {'index', 'log_index', 'steps', 'host_s' (measured), 'stages': stage -> own ratio}; the
    index is None when the window holds no host time."""
    from simkit.costmodel.step_records import batch_from_row, records
    from simkit.validation.run_prediction import window_mask

    win = steps[window_mask(run, steps)]
    pred = dict.fromkeys(STAGES, 0.0)
    meas = dict.fromkeys(STAGES, 0.0)
    for row in records(win):
        row = {**row, "config": run["config"], "async_scheduling": run["async_scheduling"]}
        host = cost.host_time(batch_from_row(row))
        for stage in STAGES[:-1]:
            pred[stage] += getattr(host, stage)
            meas[stage] += float(row[f"t_{stage}_s"])
        issued = _issued_dispatch(row)
        if issued is not None:
            pred["dispatch"] += host.dispatch
            meas["dispatch"] += issued
    total_m, total_p = sum(meas.values()), sum(pred.values())
    index = total_p / total_m if total_m > 0 and total_p > 0 else None
    return {"index": index, "log_index": math.log(index) if index else None, "steps": len(win),
            "host_s": total_m,
            "stages": {s: (pred[s] / meas[s] if meas[s] > 0 else None) for s in STAGES}}


def _issued_dispatch(row: dict[str, Any]) -> float | None:
    """Measured host seconds issuing a PIECEWISE/eager forward, or None where the step replays
    one FULL graph, lacks the column, or (synchronous) waited for its forward."""
    if str(row["graph_mode"]) == "FULL":
        return None
    exec_host = row.get("t_exec_host_s")
    if exec_host is None or not math.isfinite(float(exec_host)):
        return None
    issued = float(exec_host) - float(row["t_prepare_s"])
    if not bool(row["async_scheduling"]) and issued >= WAITED * float(row["t_forward_s"]):
        return None
    return issued


def host_indices(runs, steps, calibration: str | None = None) -> dict[str, dict[str, Any]]:
    """run id -> run_host_index for every run of `runs` (steps joined with runs, as
    simkit.validation.measured.load_records gives them), each with the cost model that predicts
    it (`calibration`, else the default of its GPU and vLLM version)."""
    from simkit.costmodel.run_conditions import run_cost

    by_run = {rid: grp for rid, grp in steps.groupby("run_id", sort=False)}
    out = {}
    for run in runs.sort_values("run_id").to_dict("records"):
        st = by_run.get(run["run_id"])
        if st is None:
            continue
        out[str(run["run_id"])] = run_host_index(run, st, run_cost(run, calibration=calibration).base)
    return out


def spread(indices: dict[str, dict[str, Any]], run_ids=None) -> dict[str, Any]:
    """Over the runs in `run_ids` (default every run with an index): how many, the mean and sd
    of log(index), its rms about 0 (how far a run's host is from the calibration's)
    and the range of the index."""
    logs = [v["log_index"] for r, v in sorted(indices.items())
            if v["log_index"] is not None and (run_ids is None or r in run_ids)]
    if not logs:
        return {"runs": 0, "mean_log": None, "sd_log": None, "rms_log": None,
                "min": None, "max": None}
    arr = np.asarray(logs)
    return {"runs": len(logs), "mean_log": float(arr.mean()),
            "sd_log": float(arr.std(ddof=1)) if len(logs) > 1 else None,
            "rms_log": float(np.sqrt(np.mean(arr ** 2))),
            "min": float(np.exp(arr.min())), "max": float(np.exp(arr.max()))}


def by_sitting(indices: dict[str, dict[str, Any]], sittings: dict[str, str]) -> dict[str, Any]:
    """spread() per GPU sitting (run id -> sitting name, simkit.validation.sittings)."""
    return {name: spread(indices, {r for r, s in sittings.items() if s == name})
            for name in sorted(set(sittings.values()))}


def correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson correlation of two equal-length lists (None under 3 points or no spread)."""
    if len(xs) < 3:
        return None
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def known_host_error(runs, steps, indices: dict[str, dict[str, Any]],
                     calibration: str | None = None,
                     purpose: str = "validation") -> dict[str, Any]:
    """The diagnostic: each run of `purpose` (fleet replica streams aside) predicted under its
    own conditions as `simkit validate` predicts it, once as validate does and once on the host
    speed its index shows; the MAPE of both over the same runs, and the correlation of the
    run's log index with its log error log(predicted / measured) (a host faster than the
    calibration's, index > 1, makes the run measure more than predicted: negative)."""
    from simkit.app.cells import run_history
    from simkit.validation.report import FLEET_PREFIX
    from simkit.validation.requests import request_pool, run_requests
    from simkit.validation.run_prediction import predict_run

    sel = [r for r in runs.sort_values("run_id").to_dict("records")
           if r["purpose"] == purpose and not str(r["corpus"]).startswith(FLEET_PREFIX)
           and (indices.get(str(r["run_id"])) or {}).get("index")]
    pools: dict[tuple, list] = {}
    plain, known, logs, errs = [], [], [], []
    for run in sel:
        key = (run["model"], run["corpus"])
        if key not in pools:
            pools[key] = request_pool(*key)
        reqs, _ = run_requests(pools[key], run)
        m, idx = float(run["output_tok_s"]), indices[str(run["run_id"])]
        p0 = predict_run(reqs, run, calibration=calibration, history=run_history(run)).output_tok_s
        p1 = predict_run(reqs, run, calibration=calibration, history=run_history(run),
                         host_factor=idx["index"]).output_tok_s
        plain.append(abs(p0 / m - 1))
        known.append(abs(p1 / m - 1))
        logs.append(idx["log_index"])
        errs.append(math.log(p0 / m))
    n = len(sel)
    return {"runs": n, "mape_pct": 100 * sum(plain) / n if n else None,
            "mape_if_host_speed_known_pct": 100 * sum(known) / n if n else None,
            "log_index_vs_log_error": correlation(logs, errs),
            "note": "diagnostic, not the error a user sees: each run predicted again on the host "
                    "speed its own host-stage records show (simkit.validation.host_speed)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse_parser()
    args = ap.parse_args(argv)
    import json

    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.costmodel.calibrations import default_calibration, read_calibration
    from simkit.costmodel.step_records import select_version
    from simkit.errors import SimkitError
    from simkit.validation.measured import load_records
    from simkit.validation.sittings import assign_sittings

    try:
        version = get_vllm_version(args.vllm_version).key
        steps, runs = load_records(args.records)
        if runs is None:
            raise SimkitError(f"no records under {args.records or 'calibrate/data'}")
        runs = select_version(runs, version).reset_index(drop=True)
        cal = args.calibration or default_calibration("h200", version)
        fitted = set(read_calibration(cal).get("runs") or []) if cal else set()
        indices = host_indices(runs, steps, args.calibration)
    except SimkitError as exc:
        print(f"error: {exc}")
        return 2
    sittings = dict(zip(runs["run_id"].astype(str), assign_sittings(runs)))
    for rid, v in indices.items():
        idx = "-" if v["index"] is None else f"{v['index']:.3f}"
        print(f"{rid:64} {sittings[rid]} {'fitted' if rid in fitted else '      '} {idx}")
    doc = {"fitted": spread(indices, fitted), "every_run": spread(indices),
           "by_sitting": by_sitting(indices, sittings)}
    if args.diagnostic:
        doc["diagnostic"] = known_host_error(runs, steps, indices, args.calibration)
    print(json.dumps(doc, indent=1))
    return 0


def argparse_parser():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-version", required=True)
    ap.add_argument("--calibration", default=None,
                    help="calibration JSON (default: the version's shipped H200 calibration)")
    ap.add_argument("--records", default=None, help="records folder (default calibrate/data)")
    ap.add_argument("--diagnostic", action="store_true",
                    help="also predict every held-out run on its own host speed (minutes)")
    return ap


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["STAGES", "by_sitting", "correlation", "host_indices", "known_host_error",
           "run_host_index", "spread"]
