"""The error per GPU sitting, and on a day the fit never saw: what `simkit validate` reports when
the runs of one vLLM version were measured on more than one day.

A sitting here is a UTC date of `started_utc` (the runs of one day were made on one GPU machine,
back to back; simkit.validation.sittings splits a day further by gaps). For every day after the
first, the unseen-day figure refits the calibration on the calibration runs of the earlier days
only (validation runs never enter a fit) and predicts every run of that day, calibration runs
included: none of them informed that fit. The refit carries its own interval, from the drift and
residuals of the earlier days' runs it was fitted on (simkit.validation.spread.rerun_interval),
so the day's interval coverage is scored with nothing measured on that day.

Where that refit is the shipped calibration itself (fitted on the same runs to the same
coefficients, its interval made from those runs the same way: vLLM 0.33, fitted on its first
day), its predictions are the ones `simkit validate` has already made: those are reused instead
of simulating every run of the day a second time (the same figures, about a third of validate's
CPU time).

The refits themselves (reading the fit frame, one fit per day: about 4 s on one core) need no
prediction, so `simkit validate` starts them in a forked process (`Refits.start`) before it
predicts the runs and reads them here: on a fresh install they fit while the drafter's kernels
compile and a core would otherwise wait.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any


def run_days(runs) -> dict[str, str]:
    """run id -> the UTC date its run started ('YYYY-MM-DD')."""
    import pandas as pd

    start = pd.to_datetime(runs["started_utc"], utc=True)
    return dict(zip(runs["run_id"].astype(str), start.dt.strftime("%Y-%m-%d")))


def _mape(cells: list[dict[str, Any]]) -> float | None:
    errs = [abs(c["error"]) for c in cells if c["error"] == c["error"]]
    return 100.0 * sum(errs) / len(errs) if errs else None


def _figures(cells: list[dict[str, Any]]) -> dict[str, Any]:
    from simkit.validation.spread import coverage

    hot = [c for c in cells if c.get("history", "cold") != "cold"]
    cov = coverage(cells, None)
    return {"runs": len(cells), "mape": _mape(cells), "hot_repeat_runs": len(hot),
            "mape_hot_repeat": _mape(hot), "interval_inside": cov["inside"],
            "interval_cells": cov["cells"], "interval_median_half_width": cov["median_half_width"]}


def by_day(cells: list[dict[str, Any]], days: dict[str, str]) -> dict[str, Any]:
    """Per day: the held-out cells' figures and the calibration cells' (where present)."""
    out = {}
    for day in sorted({days[c["run_id"]] for c in cells}):
        mine = [c for c in cells if days[c["run_id"]] == day]
        out[day] = {p: _figures([c for c in mine if c["purpose"] == p])
                    for p in ("validation", "calibration") if any(c["purpose"] == p for c in mine)}
    return out


def shipped_interval_by_runner(version: str) -> bool:
    """Whether the version's shipped H200 calibration takes its interval's drift per runner
    class (so that a refit on fewer days carries the same kind of interval)."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration

    name = default_calibration("h200", version)
    return bool(name and (read_calibration(name).get("interval") or {}).get("by_runner"))


def shipped_step_terms(version: str) -> bool:
    """Whether the version's shipped H200 calibration was fitted with the step terms (so that a
    refit on fewer days is fitted the same way)."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration
    from simkit.costmodel.coefficients import OPTIONAL_TERMS

    name = default_calibration("h200", version)
    coefs = read_calibration(name)["coefficients"] if name else {}
    return "async_runner" in coefs or any(k in coefs for k in OPTIONAL_TERMS)


def _fit_on(fittable, version: str, run_ids: set[str], out: Path) -> int:
    """The version's calibration refitted on these runs only, the way its shipped calibration
    was fitted (with or without the step terms); returns its step count. `fittable`: the
    version's H200 fit frame (costmodel.fit.load_record_dir), read once for every day."""
    from simkit.costmodel.calibrations import write_calibration
    from simkit.costmodel.estimator import StepTimeEstimator

    X = fittable[fittable["run_id"].astype(str).isin(run_ids)].reset_index(drop=True)
    est = StepTimeEstimator(hardware="h200", step_terms=shipped_step_terms(version)).fit(X)
    doc = est.to_calibration(out.stem)
    doc["vllm_version"] = version
    write_calibration(doc, out)
    return est.n_steps_


def _add_interval(cal: Path, runs, steps, fit_runs: set[str], progress: Any = None,
                  by_runner: bool = False, pools: dict | None = None) -> None:
    """Write into the refit `cal` the interval of its own fitted runs (each predicted with it),
    its drift per runner class where `by_runner` (as the shipped calibration's is)."""
    from simkit.costmodel.calibrations import read_calibration, write_calibration
    from simkit.validation.report import build_cells
    from simkit.validation.spread import rerun_interval

    cells = build_cells(runs, steps, purpose="calibration", run_ids=sorted(fit_runs),
                        compare_orderings=False, calibration=str(cal), progress=progress,
                        pools=pools, diagnosis=False)       # the interval reads the errors only
    doc = read_calibration(cal)
    doc["interval"] = rerun_interval(cells, runs, fit_runs, by_runner=by_runner)
    write_calibration(doc, cal)


def shipped_fit(refit: Path, version: str) -> str | None:
    """The shipped H200 calibration of `version` when the refit is that calibration's fit (the
    same fitted runs, the same coefficients) and it carries the interval those runs give; else
    None. Its predictions are then the refit's, interval included."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration

    name = default_calibration("h200", version)
    if not name:
        return None
    shipped, doc = read_calibration(name), read_calibration(refit)
    same = all(shipped.get(k) == doc.get(k) for k in ("runs", "coefficients", "hardware",
                                                       "vllm_version"))
    return name if same and "interval" in shipped else None


def _selection(runs):
    """(the runs a day's figure predicts, run id -> day, the days in order)."""
    from simkit.validation.report import FLEET_PREFIX

    sel = runs[runs["purpose"].isin(["calibration", "validation"])
               & ~runs["corpus"].astype(str).str.startswith(FLEET_PREFIX)]
    days = run_days(sel)
    return sel, days, sorted(set(days.values()))


def _fit_runs(sel, days: dict[str, str], day: str) -> set[str]:
    """The calibration runs of the days before `day` (what its refit is fitted on)."""
    return {r for r, d in days.items() if d < day} & set(
        sel.loc[sel["purpose"] == "calibration", "run_id"].astype(str))


class Refits:
    """The refit of every day after the first (fit-before-DAY.json in a temporary folder, with
    its step count), fitted here or in a forked process started ahead (`start`). `loaded`: the
    (steps, runs) of every record, as simkit.validation.measured.load_records read them
    (else they are read from `records` again)."""

    def __init__(self, runs, version: str, records: Path | None, loaded=None) -> None:
        self.sel, self.days, self.order = _selection(runs)
        self.version, self.records, self.loaded = version, records, loaded
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self._tmp.name)
        self._job = None                          # a validation.background.Background

    @classmethod
    def start(cls, runs, version: str, records: Path | None = None, loaded=None) -> "Refits":
        """Begin fitting in a forked process (validation.background; where fork is missing the
        fits wait for `fitted`). Its failure is no error here: `fitted` then fits in this
        process and raises what the fit raises."""
        from simkit.validation.background import Background

        refits = cls(runs, version, records, loaded)
        if len(refits.order) > 1:
            refits._job = Background(refits._fit_all)
        return refits

    def _fit_all(self) -> dict[str, int]:
        """Fit each day that has earlier calibration runs (the refits written under `dir`);
        returns day -> fitted steps."""
        from simkit.costmodel.fit import fit_frame, load_record_dir
        from simkit.validation.measured import DEFAULT_DIR

        steps: dict[str, int] = {}
        fittable = None                       # made once, fitted once per day
        for day in self.order[1:]:
            fit_runs = _fit_runs(self.sel, self.days, day)
            if not fit_runs:
                continue
            if fittable is None:
                fittable, _ = (fit_frame(*self.loaded, "h200", self.version)
                               if self.loaded is not None else
                               load_record_dir(Path(self.records or DEFAULT_DIR), "h200",
                                               self.version))
            steps[day] = int(_fit_on(fittable, self.version, fit_runs, self.path(day)))
        return steps

    def path(self, day: str) -> Path:
        """The refit of `day` (fitted on the earlier days' calibration runs)."""
        return self.dir / f"fit-before-{day}.json"

    def fitted(self) -> dict[str, int]:
        """day -> fitted steps, every refit written (waiting for the forked fit, if any)."""
        if self._job is not None:
            job, self._job = self._job, None
            return job.result()
        return self._fit_all()

    def close(self) -> None:
        """End a fit still running and remove the refits."""
        if self._job is not None:
            self._job.close()
            self._job = None
        self._tmp.cleanup()


def refit_runs(runs, version: str) -> frozenset[str]:
    """The runs unseen_days predicts under a refit that is not the shipped calibration (fitted
    on other runs than it): validate keeps their trajectories when it first predicts them, so
    that the refit prices them again instead of simulating them again."""
    from simkit.costmodel.calibrations import default_calibration, read_calibration

    name = default_calibration("h200", version)
    shipped = set(read_calibration(name).get("runs", ())) if name else set()
    sel, days, order = _selection(runs)
    out: set[str] = set()
    for day in order[1:]:
        fit = _fit_runs(sel, days, day)
        if fit and fit != shipped:
            out |= {r for r, d in days.items() if d == day}
    return frozenset(out)


def unseen_days(runs, steps, version: str, records: Path | None = None,
                progress: Any = None,
                predicted: dict[str, dict[str, Any]] | None = None,
                refits: Refits | None = None, pools: dict | None = None,
                kept: dict[str, Any] | None = None) -> dict[str, Any]:
    """For each day after the first: fit on the earlier days' calibration runs, predict every
    calibration and validation run of that day (fleet replica streams aside); MAPE overall, on
    hot/repeat runs and on the held-out runs alone. 'not measured' with one day. `predicted`:
    run id -> the cell validate made with the shipped calibration (build_cells, this version's
    default), reused where the refit is that calibration (shipped_fit). `refits`: the same
    runs' Refits, started ahead (Refits.start; closed here). `pools`: build_cells' request
    pools, shared with the caller's predictions. `kept`: build_cells' kept trajectories of the
    caller's predictions (of refit_runs), priced again under each refit."""
    from simkit.costmodel.step_records import hardware_of
    from simkit.validation.report import build_cells

    refits = refits or Refits(runs, version, records)
    try:
        sel, days, order = refits.sel, refits.days, refits.order
        if len(order) < 2:
            return {"status": "not measured", "days": order,
                    "why": f"every run of vLLM {version} was measured on one day "
                           f"({', '.join(order)})"}
        # validate predicted each run with its own GPU's default calibration: reusable only for
        # H200's
        gpus = sel["gpu"].astype(str) if "gpu" in sel else [""] * len(sel)
        on_h200 = {str(r) for r, g in zip(sel["run_id"], gpus)
                   if (hardware_of(g) or "h200") == "h200"}
        fitted = refits.fitted()
        out = []
        for i, day in enumerate(order[1:], start=1):
            if day not in fitted:             # no calibration run before that day
                continue
            fit_runs = _fit_runs(sel, days, day)
            cal, n_steps = refits.path(day), fitted[day]
            ids = [r for r, d in days.items() if d == day]
            shipped = shipped_fit(cal, version)
            known = {} if shipped is None else {r: c for r, c in (predicted or {}).items()
                                                if r in ids and r in on_h200}
            if shipped is None:
                _add_interval(cal, sel, steps, fit_runs, progress,
                              shipped_interval_by_runner(version), pools)
            rest = [r for r in ids if r not in known]
            cells = [] if not rest else build_cells(
                sel, steps, purpose="all", run_ids=rest, compare_orderings=False,
                calibration=shipped or str(cal), progress=progress, pools=pools, kept=kept,
                diagnosis=False)                  # _figures reads the errors and intervals
            cells = sorted([*known.values(), *cells], key=lambda c: c["run_id"])
            held = [c for c in cells if c["purpose"] == "validation"]
            out.append({"day": day, "fitted_on_days": order[:i], "fitted_runs": len(fit_runs),
                        "fitted_steps": n_steps, **_figures(cells),
                        "held_out_runs": len(held), "mape_held_out": _mape(held)})
    finally:
        refits.close()
    return {"status": "measured", "rule": "fit on the calibration runs of the earlier days only "
            "(as the shipped calibration is fitted), predict every run of the day", "days": out}


__all__ = ["Refits", "by_day", "refit_runs", "run_days", "shipped_fit", "shipped_step_terms",
           "unseen_days"]
