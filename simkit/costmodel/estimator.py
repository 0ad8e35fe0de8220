"""StepTimeEstimator: fits the non-negative coefficients of the device and host terms to measured
step records (scikit-learn style fit / predict / score), reports run-grouped cross-validated
error per component, and writes the calibration JSON that load_cost_model(calibration=...) reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.metrics import r2_score
from sklearn.model_selection import GroupKFold, KFold

from simkit.catalog.hardware import get_hardware
from simkit.costmodel.coefficients import ASYNC_RUNNER_COEFS, DRAFTER_COEFS, OPTIONAL_TERMS, Coefficients
from simkit.costmodel.model import CostModel
from simkit.costmodel.calibrations import CALIBRATION_KIND, load_cost_model, write_calibration
from simkit.costmodel.step_records import batch_from_row, check_records, drafter_of, drop_untimed, records
from simkit.errors import InputError

DEVICE_TERMS = tuple(CostModel.DEVICE_TERM_COEF)
# target column(s) -> (feature names, coefficient names); features are built in _features
HOST_BLOCKS = {
    "schedule": (("t_schedule_s",), ("sched_step_s", "sched_req_s", "sched_accept_s")),
    "prepare": (("t_prepare_s",), ("prep_step_s", "prep_req_s", "prep_token_s", "prep_accept_s")),
    "draft": (("t_draft_s",), tuple(name for names in DRAFTER_COEFS.values() for name in names)),
    "update": (("t_update_s",), ("update_step_s", "update_req_s", "update_accept_s")),
}
FRONTEND_COEFS = ("frontend_req_s", "frontend_accept_s")
SAMPLE_COEFS = ("sample_step_s", "sample_req_s", "rejection_token_s")
DISPATCH_COEFS = ("dispatch_piecewise_s", "dispatch_none_s", "dispatch_token_s")
ASYNC_PREFIX = "async_runner."        # how the async runner's own coefficients are named in reports
COMPONENTS = ("schedule", "prepare", "forward_sample", "draft", "update", "step")
# forward_sample = GPU time of the forward pass plus sampling (t_forward_s + t_sample_s)


def _mape(y: np.ndarray, p: np.ndarray) -> float:
    """Mean absolute percentage error over rows with a positive measurement (nan if none)."""
    mask = y > 0
    return float(np.mean(np.abs(p[mask] - y[mask]) / y[mask]) * 100) if mask.any() else float("nan")


class StepTimeEstimator(RegressorMixin, BaseEstimator):
    """Fits Coefficients to step records of one hardware.

    X: DataFrame of step records (STEP_COLUMNS) plus run settings 'model', 'tp',
    'async_scheduling' and 'drafter' or 'config' (columns win over the model/tp parameters).
    y=None fits every component column; a Series y is taken as t_step_s and fits the whole
    step as one linear sum (only valid for synchronous runs). prior_weight pulls terms the
    data cannot identify toward their analytic defaults (relative weight; 0 = plain NNLS);
    relative=True weights each step of the device fit by 1/measured time (relative error, so the
    few long prefill steps do not decide the decode terms); host components are fitted on
    absolute seconds, so their mean -- what throughput depends on -- is unbiased.
    balance_runs=True weights every step by 1 / (steps of its run): each calibration run counts
    once, so long runs and settings repeated three times do not outweigh the rest.
    pinned coefficients keep their analytic value: by default the per-step device constant,
    which a few model sizes cannot separate from the per-kernel gaps (those scale with depth
    and so transfer to other models; a constant would not).
    step_terms=True also fits what the step holds beyond the per-step sums: the host dispatch of
    PIECEWISE/eager forwards (t_exec_host_s - t_prepare_s), the front-end's work per prefilling
    request, and, where the records hold both runners, the async-scheduling runner's own
    schedule/prepare/sample/update/dispatch coefficients (Coefficients.async_runner);
    step_terms=False fits the model as calibrations fitted before those terms existed."""

    def __init__(self, model: str | None = None, hardware: str = "h200", tp: int | None = None,
                 prior_weight: float = 1e-4, relative: bool = True,
                 pinned: tuple[str, ...] = ("device_fixed_s",), balance_runs: bool = True,
                 step_terms: bool = True) -> None:
        self.model = model
        self.hardware = hardware
        self.tp = tp
        self.prior_weight = prior_weight
        self.relative = relative
        self.pinned = pinned
        self.balance_runs = balance_runs
        self.step_terms = step_terms

    # ---- features --------------------------------------------------------------------------
    def _groups(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Model and TP of every row (columns, else the parameters)."""
        n = len(X)
        models = X["model"].astype(str).to_numpy() if "model" in X else np.array([self.model] * n, dtype=object)
        if any(m is None for m in models):
            raise InputError("no model: give a 'model' column or the model parameter", field="model")
        tps = X["tp"].to_numpy() if "tp" in X else np.array([self.tp or 0] * n)
        return models, tps

    def _features(self, X: pd.DataFrame) -> dict[str, np.ndarray]:
        """Device terms (unscaled, per row) and host regressors, by name."""
        models, tps = self._groups(X)
        rows = records(X)
        dev = np.zeros((len(X), len(DEVICE_TERMS)))
        cms: dict[tuple, CostModel] = {}
        for i, row in enumerate(rows):
            key = (models[i], int(tps[i]))
            if key not in cms:
                cms[key] = load_cost_model(key[0], self.hardware, key[1] or None, calibration="analytic")
            terms = cms[key].device_terms(row)
            dev[i] = [terms[t] for t in DEVICE_TERMS]
        if not self.step_terms:       # the per-prefill-token device term is one of the step terms
            dev[:, DEVICE_TERMS.index("prefill")] = 0.0
        reqs = X["num_reqs"].to_numpy(float)
        one = np.ones(len(X))
        drafter = np.array([drafter_of(r) for r in rows])
        nd = X["num_drafting_reqs"].to_numpy(float)
        drafting = (nd > 0).astype(float)
        acc = (X["num_accepted"].fillna(0).to_numpy(float) if "num_accepted" in X
               else np.zeros(len(X)))
        draft_cols = []
        for d in DRAFTER_COEFS:      # per drafter with host terms: steps, requests, accepted
            is_d = (drafter == d).astype(float)
            draft_cols += [is_d * drafting, is_d * nd, is_d * acc]
        layers = np.array([cms[(models[i], int(tps[i]))].model.layers for i in range(len(X))], float)
        mode = X["graph_mode"].astype(str).to_numpy()
        eager = (mode != "FULL").astype(float)
        return {
            "device": dev,
            "dispatch": np.column_stack([layers * (mode == "PIECEWISE"), layers * (mode == "NONE"),
                                         layers * eager * X["num_tokens"].to_numpy(float)]),
            "frontend_prefill": np.column_stack([reqs, acc, X["num_prefill_reqs"].to_numpy(float)]),
            "schedule": np.column_stack([one, reqs, acc]),
            "prepare": np.column_stack([one, reqs, X["num_tokens"].to_numpy(float), acc]),
            "sample": np.column_stack([one, reqs, X["num_spec_tokens"].to_numpy(float)]),
            "draft": np.column_stack(draft_cols),
            "update": np.column_stack([one, reqs, acc]),
            "frontend": np.column_stack([reqs, acc]),
        }

    @staticmethod
    def _run_weights(X: pd.DataFrame) -> np.ndarray:
        """Per-row weight 1 / (steps of its run), scaled to mean 1: every calibration run counts
        once, so a long run or a setting repeated three times does not outweigh the others."""
        counts = X.groupby("run_id")["run_id"].transform("size").to_numpy(float)
        w = 1.0 / counts
        return w * (len(w) / w.sum())

    # ---- solving ---------------------------------------------------------------------------
    def _solve(self, A: np.ndarray, y: np.ndarray, prior: np.ndarray,
               relative: bool = False, row_weight: np.ndarray | None = None
               ) -> tuple[np.ndarray, list[bool]]:
        """NNLS on max-scaled columns with a weak pull toward `prior`; columns that are zero
        everywhere keep their prior and are reported as not fitted. row_weight: weighted least
        squares (each row's squared residual counts row_weight times)."""
        coef = prior.astype(float).copy()
        if A.shape[0] == 0:       # no step exercises this block (no drafting run; vLLM 0.34)
            return coef, [False] * A.shape[1]
        used = np.abs(A).max(axis=0) > 0
        if not used.any() or len(y) == 0:
            return coef, [False] * A.shape[1]
        Au, y = A[:, used], np.asarray(y, float)
        if relative:
            # minimise relative error: long prefill steps do not dominate the device fit
            w = 1.0 / np.maximum(np.abs(y), 0.05 * (np.median(np.abs(y)) or 1.0))
            Au, y = Au * w[:, None], y * w
        if row_weight is not None:
            r = np.sqrt(row_weight)
            Au, y = Au * r[:, None], y * r
        scale = np.abs(Au).max(axis=0)
        ys = float(np.abs(y).mean()) or 1.0
        # unknowns w = coef * scale / ys: dimensionless, so one prior weight suits every term
        M, t = Au / scale, y / ys
        lam = np.sqrt(self.prior_weight * len(y)) if self.prior_weight > 0 else 0.0
        if lam > 0:
            M = np.vstack([M, lam * np.eye(M.shape[1])])
            t = np.concatenate([t, lam * prior[used] * scale / ys])
        w, _ = nnls(M, t, maxiter=50 * M.shape[1])
        coef[used] = w * ys / scale
        return coef, list(used)

    def fit(self, X: pd.DataFrame, y: Any = None) -> "StepTimeEstimator":
        """Fit the coefficients; sets coefs_ (Coefficients, host values in reference-host
        seconds), fitted_, not_fitted_ (name -> reason), skipped_ (reason -> rows), n_steps_, runs_.

        y=None, per component: device terms on t_forward_s + t_sample_s (GPU time of forward and
        sampling); schedule/prepare/draft/update on their columns; the host part of sampling on
        what synchronous steps leave over (t_step_s minus every other component), else on
        t_sample_host_s when the records have it; async_serial_s on asynchronous steps."""
        check_records(X, need_times=y is None)
        self.skipped_: dict[str, int] = {}
        if y is None:
            X, self.skipped_ = drop_untimed(X)
            if len(X) == 0:
                raise InputError("no step record has every time column", field="t_step_s")
        hw = get_hardware(self.hardware)
        feats = self._features(X)
        values = Coefficients().to_dict()
        runner_values: dict[str, float] = {}     # the async runner's own (step_terms, both runners)
        fitted, not_fitted = [], {}
        dev_names = [CostModel.DEVICE_TERM_COEF[t] for t in DEVICE_TERMS]

        balance = self._run_weights(X) if self.balance_runs else None

        def solve(block, names, target, mask=None, what=None, relative=False, runner=False):
            A = feats[block] if mask is None else feats[block][mask]
            rw = None if balance is None else (balance if mask is None else balance[mask])
            prior = np.array([values.get(n) or 0.0 for n in names])
            pin = np.array([n in self.pinned for n in names])
            if pin.any():   # pinned terms: subtract their analytic contribution, fit the rest
                target = target - A[:, pin] @ prior[pin]
                A = np.where(pin[None, :], 0.0, A)
            coef, used = self._solve(A, target, prior, relative, rw)
            for name, c, u, p in zip(names, coef, used, pin):
                key = ASYNC_PREFIX + name if runner else name
                if runner:          # unexercised: the async runner keeps the shared value
                    if u:
                        runner_values[name] = float(c)
                elif u or name not in OPTIONAL_TERMS:   # an unexercised optional term stays absent
                    values[name] = float(c)
                if p:
                    not_fitted[key] = "pinned at its analytic value (estimator parameter 'pinned')"
                elif u:
                    fitted.append(key)
                else:
                    not_fitted[key] = f"no {what or block} steps exercise it"

        for name in FRONTEND_COEFS:
            not_fitted[name] = "runs in the front-end process; step records do not measure it"
        col = lambda c: X[c].to_numpy(float)  # noqa: E731
        if y is None:
            solve("device", dev_names, col("t_forward_s") + col("t_sample_s"), what="device", relative=self.relative)
            asy = X["async_scheduling"].astype(bool).to_numpy()
            sync = ~asy
            split = self.step_terms and asy.any() and sync.any()   # each runner its own host terms
            for block, (cols, names) in HOST_BLOCKS.items():   # measured on the fit host
                if block == "draft":          # the drafter's work, whichever runner calls it
                    masks = [(X["num_drafting_reqs"].to_numpy() > 0, False)]
                else:
                    masks = [(sync, False), (asy, True)] if split else [(None, False)]
                for mask, runner in masks:
                    target = col(cols[0]) if mask is None else col(cols[0])[mask]
                    solve(block, names, target * hw.host_speed, mask, runner=runner)
            if self.step_terms:
                self._fit_dispatch(X, hw, solve, split)
            if sync.any():
                rest = (col("t_step_s") - col("t_forward_s") - col("t_sample_s") - col("t_schedule_s")
                        - col("t_prepare_s") - col("t_draft_s") - col("t_update_s") - self._forcing(X))
                solve("sample", SAMPLE_COEFS, rest[sync] * hw.host_speed, sync, "synchronous")
                if split:
                    self._fit_async_sample(X, hw, solve)
            elif "t_sample_host_s" in X and X["t_sample_host_s"].notna().all():
                solve("sample", SAMPLE_COEFS, col("t_sample_host_s") * hw.host_speed)
            else:
                for name in SAMPLE_COEFS:
                    not_fitted[name] = "no synchronous steps and no t_sample_host_s column"
            if "t_gap_s" in X and X["t_gap_s"].notna().all() and (col("t_gap_s") > 0).any():
                # time between steps: output processing outside the engine step (recorder column)
                for name in FRONTEND_COEFS:
                    not_fitted.pop(name)
                if self.step_terms:
                    solve("frontend_prefill", (*FRONTEND_COEFS, "frontend_prefill_s"),
                          col("t_gap_s") * hw.host_speed, what="front-end")
                else:
                    solve("frontend", FRONTEND_COEFS, col("t_gap_s") * hw.host_speed, what="front-end")
            if runner_values:
                values["async_runner"] = runner_values
            self.coefs_ = Coefficients.from_dict(values)
            self._fit_async_serial(X, hw, values, fitted, not_fitted)
        else:
            if X["async_scheduling"].astype(bool).any():
                raise InputError("a single step-time target needs synchronous runs (async steps overlap "
                                 "host and device); pass y=None to fit the component columns",
                                 field="async_scheduling")
            hs = 1.0 / hw.host_speed
            blocks = ("schedule", "prepare", "sample", "draft", "update")
            feats["all"] = np.hstack([feats["device"]] + [feats[b] * hs for b in blocks])
            names = dev_names + [n for b in blocks for n in
                                 (SAMPLE_COEFS if b == "sample" else HOST_BLOCKS[b][1])]
            solve("all", names, np.asarray(y, float), what="recorded")
            not_fitted["async_serial_s"] = "no asynchronous steps in a single-target fit"
            self.coefs_ = Coefficients.from_dict(values)
        self.fitted_ = sorted(set(fitted) - set(not_fitted))
        self.not_fitted_ = dict(sorted(not_fitted.items()))
        self.runs_ = sorted(map(str, X["run_id"].unique()))
        models, _ = self._groups(X)
        self.models_ = sorted(set(map(str, models)))
        self.n_steps_ = int(len(X))
        return self

    @staticmethod
    def _fit_dispatch(X: pd.DataFrame, hw: Any, solve: Any, split: bool) -> None:
        """Host dispatch of PIECEWISE/eager forwards, per layer (and per layer and token): the
        model runner's host time beyond input preparation (t_exec_host_s - t_prepare_s) on the
        steps that do not replay one FULL graph; per runner when `split`. A synchronous step
        whose host time reaches 97 % of the forward's GPU time waited for the forward there (a
        large eager prefill), so its host time says nothing of the dispatch and is left out;
        the async runner does not wait there."""
        if "t_exec_host_s" not in X:
            return
        exec_host = X["t_exec_host_s"].to_numpy(float)
        target = exec_host - X["t_prepare_s"].to_numpy(float)
        asy = X["async_scheduling"].astype(bool).to_numpy()
        waited = ~asy & (target >= 0.97 * X["t_forward_s"].to_numpy(float))
        issued = (X["graph_mode"].astype(str).to_numpy() != "FULL") & np.isfinite(exec_host) & ~waited
        target = target * hw.host_speed
        masks = [(issued & ~asy, False), (issued & asy, True)] if split else [(issued, False)]
        for mask, runner in masks:
            if mask.any():
                solve("dispatch", DISPATCH_COEFS, target[mask], mask, "PIECEWISE/eager", runner=runner)

    def _fit_async_sample(self, X: pd.DataFrame, hw: Any, solve: Any) -> None:
        """The async runner's host side of sampling, from its host-bound steps (a dispatched
        forward whose model-runner host time exceeds the forward's GPU time): the step time left
        after schedule, the model runner's host time (preparation and dispatch), drafting,
        update and the recorder's forcing. On FULL steps that work hides behind the forward."""
        if "t_exec_host_s" not in X:
            return
        col = lambda c: X[c].to_numpy(float)  # noqa: E731
        exec_host = col("t_exec_host_s")
        mask = (X["async_scheduling"].astype(bool).to_numpy()
                & (X["graph_mode"].astype(str).to_numpy() != "FULL") & np.isfinite(exec_host)
                & (exec_host > col("t_forward_s") + col("t_sample_s")))
        if not mask.any():
            return
        rest = (col("t_step_s") - col("t_schedule_s") - exec_host - col("t_draft_s") - col("t_update_s")
                - self._forcing(X))
        solve("sample", SAMPLE_COEFS, rest[mask] * hw.host_speed, mask, "host-bound asynchronous",
              runner=True)

    @staticmethod
    def _synced(X: pd.DataFrame) -> np.ndarray:
        """Rows whose forcing hook synchronised the stream (records.SYNCED_FORCE_COPIES):
        there t_force_s contains the wait for the forward pass, and async overlap was lost."""
        if "force_copy" not in X:
            return np.zeros(len(X), bool)
        from simkit.costmodel.step_records import SYNCED_FORCE_COPIES

        return X["force_copy"].astype(str).isin(SYNCED_FORCE_COPIES).to_numpy()

    @classmethod
    def _forcing(cls, X: pd.DataFrame) -> np.ndarray | float:
        """Host time the recorder spent forcing trace tokens (not vLLM's work), where it is that
        alone; where the hook synchronised, t_force_s holds the GPU wait too and is kept."""
        if "t_force_s" not in X:
            return 0.0
        return np.where(cls._synced(X), 0.0, X["t_force_s"].fillna(0.0).to_numpy(float))

    def _fit_async_serial(self, X, hw, values, fitted, not_fitted) -> None:
        """The serial host part of async steps: median of measured minus modelled step time."""
        mask = X["async_scheduling"].astype(bool).to_numpy().copy()
        if not mask.any():
            not_fitted["async_serial_s"] = "no asynchronous steps in the records"
            return
        if (mask & self._synced(X)).any():
            mask = mask & ~self._synced(X)
            if not mask.any():
                not_fitted["async_serial_s"] = ("asynchronous steps of these records lost their overlap "
                                                "(forcing synchronised the stream)")
                return
        Xa = X[mask]
        base = self._predict_parts(Xa, replace(self.coefs_, async_serial_s=0.0, frontend_req_s=0.0,
                                             frontend_accept_s=0.0, frontend_prefill_s=None))["step"]
        resid = Xa["t_step_s"].to_numpy(float) - self._forcing(Xa) - base
        values["async_serial_s"] = max(0.0, float(np.median(resid))) * hw.host_speed
        fitted.append("async_serial_s")
        self.coefs_ = Coefficients.from_dict(values)

    # ---- prediction ------------------------------------------------------------------------
    def _predict_parts(self, X: pd.DataFrame, coefs: Coefficients) -> dict[str, np.ndarray]:
        """Predicted seconds per component for every row."""
        models, tps = self._groups(X)
        synced = self._synced(X)
        cms: dict[tuple, CostModel] = {}
        out = {c: np.zeros(len(X)) for c in COMPONENTS}
        for i, row in enumerate(records(X)):
            key = (models[i], int(tps[i]), bool(synced[i]))
            if key not in cms:
                base = load_cost_model(key[0], self.hardware, key[1] or None, calibration="analytic")
                # steps whose measurement synchronised the stream are predicted without overlap
                cms[key] = CostModel(base.model, base.hw, base.tp, coefs, "fit", async_overlap=not key[2])
            cm = cms[key]
            b = batch_from_row(row)
            dev = cm.device_time(b)
            host = cm.host_time(b)
            out["schedule"][i], out["prepare"][i] = host.schedule, host.prepare
            out["forward_sample"][i] = dev
            out["draft"][i], out["update"][i] = host.draft, host.update
            out["step"][i] = cm.step_time(dev, host, b.async_scheduling)
        return out

    def predict_components(self, X: pd.DataFrame) -> pd.DataFrame:
        """Predicted seconds of each component (schedule, prepare, forward_sample, draft, update, step)."""
        check_records(X, need_times=False)
        return pd.DataFrame(self._predict_parts(X, self.coefs_), index=X.index)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted wall time of each step (seconds)."""
        return self.predict_components(X)["step"].to_numpy()

    def score(self, X: pd.DataFrame, y: Any = None, sample_weight: Any = None) -> float:
        """R^2 of the predicted step time against y (default: the t_step_s column)."""
        y = X["t_step_s"] if y is None else y
        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))

    # ---- validation ------------------------------------------------------------------------
    def cross_validate_report(self, X: pd.DataFrame, n_splits: int = 5) -> dict[str, Any]:
        """K-fold cross-validated MAPE (%) per component, folds grouped by run_id (whole runs
        held out); with a single run, contiguous blocks of steps instead (said in 'grouping')."""
        check_records(X)
        runs = X["run_id"].astype(str).to_numpy()
        n_runs = len(set(runs))
        if n_runs >= 2:
            k = min(n_splits, n_runs)
            splits = GroupKFold(n_splits=k).split(X, groups=runs)
            grouping = f"by run ({n_runs} runs, {k} folds)"
        else:
            k = min(n_splits, len(X))
            splits = KFold(n_splits=k, shuffle=False).split(X)
            grouping = f"contiguous step blocks (one run, {k} folds)"
        measured = {"schedule": "t_schedule_s", "prepare": "t_prepare_s", "draft": "t_draft_s",
                    "update": "t_update_s", "step": "t_step_s"}
        folds = []
        for train, test in splits:
            est = clone(self).fit(X.iloc[train])
            pred = est.predict_components(X.iloc[test])
            Xt = X.iloc[test]
            row = {c: _mape(Xt[col].to_numpy(float), pred[c].to_numpy()) for c, col in measured.items()}
            row["forward_sample"] = _mape((Xt["t_forward_s"] + Xt["t_sample_s"]).to_numpy(float),
                                          pred["forward_sample"].to_numpy())
            row["n_test_steps"] = int(len(test))
            folds.append(row)
        mean = {c: float(np.nanmean([f[c] for f in folds])) if any(f[c] == f[c] for f in folds) else None
                for c in COMPONENTS}
        self.cv_report_ = {"grouping": grouping, "metric": "MAPE %", "folds": folds, "mean": mean}
        return self.cv_report_

    # ---- calibrations ----------------------------------------------------------------------
    def to_calibration(self, name: str) -> dict[str, Any]:
        """The fitted coefficients as a calibration dict (host values in reference-host seconds)."""
        if not hasattr(self, "coefs_"):
            raise InputError("fit the estimator before writing a calibration", field="coefs_")
        return {
            "kind": CALIBRATION_KIND, "version": 1, "name": name, "hardware": self.hardware,
            "models": self.models_, "runs": self.runs_, "n_steps": self.n_steps_,
            "coefficients": self.coefs_.to_dict(), "fitted": self.fitted_, "not_fitted": self.not_fitted_,
            "cv": getattr(self, "cv_report_", None), "default_for": [],
            "created_by": "simkit.costmodel.estimator.StepTimeEstimator",
            "note": "host coefficients are seconds on the reference host (host_speed 1.0); "
                    "not_fitted coefficients keep their analytic defaults",
        }

    def save_calibration(self, path: str, name: str | None = None) -> str:
        """Write to_calibration(name) as JSON; returns the path."""
        from pathlib import Path

        return str(write_calibration(self.to_calibration(name or Path(path).stem), path))


__all__ = ["StepTimeEstimator", "COMPONENTS"]

