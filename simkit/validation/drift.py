"""The time scale of the synchronous runner's drift, from the repeated runs of one vLLM version.

Repeats of one setting (floor.py's grouping, synchronous runner) replay the same step sequence,
so each step's wall time (t_step_s + t_gap_s) has a matched reference: the geometric mean of that
step index over the setting's repeats (reference time: the step's mean end time). From it: how
long the host stays slow or fast (autocorrelation of the log deviation in 0.25 s bins of
reference time, each run's series about the setting's matched reference, pooled over runs), the
repeat floor (floor.py's LOO MAPE) of sub-windows L s long, settings whose window is mostly
FULL-graph steps against the others, and an extrapolation to the window length at a 5 % floor.
Why: it says whether longer steady windows or more repeats would bring that floor down.

    python -m simkit.validation.drift [--vllm-version 0.33] [--format table|json]
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

BIN_S = 0.25                        # reference-time bin of the autocorrelation and sub-windows
ACF_LAGS_S = (1, 2, 5, 10)
MIN_BIN_STEPS = 3                   # an autocorrelation bin needs this many steps
SUB_WINDOWS_S = (1, 2, 4, 8, 16)
LONG_S = 16.0                       # settings with this much recorded feed the sub-window floor
FULL_SHARE = 0.6                    # "mostly FULL-graph": this share of window wall time
TARGET_PCT = 5.0
TAUS = np.geomspace(0.25, 200.0, 2401)   # grid of the fit's correlation time (s)


def sync_repeats(version_key: str, records=None):
    """(runs, steps, reps) of the vLLM version as simkit validate reads them; reps: floor.py's
    leave-one-out rows of the synchronous runner (run_id, setting as text, error)."""
    import pandas as pd

    from simkit.costmodel.step_records import select_version
    from simkit.errors import SimkitError
    from simkit.validation.floor import SYNC, leave_one_out
    from simkit.validation.measured import load_records

    steps, runs = load_records(records)
    if runs is None:
        raise SimkitError(f"no records under {records or 'calibrate/data'}")
    runs = select_version(runs, version_key).reset_index(drop=True)
    rows = [r for r in leave_one_out(runs) if r["runner"] == SYNC]
    reps = pd.DataFrame(rows, columns=["run_id", "setting", "error"])
    reps["setting"] = reps["setting"].map(lambda key: "|".join(map(str, key)))
    return runs, steps[steps["run_id"].isin(set(reps["run_id"]))], reps


def matched_steps(steps, reps) -> tuple[Any, dict[str, int]]:
    """Steps of the settings whose repeats ran identical (num_tokens, graph_mode) sequences, with
    wall, its matched reference ref_wall and the reference time tref; and the check's counts."""
    st = steps[steps["run_id"].isin(set(reps["run_id"]))][
        ["run_id", "step", "num_tokens", "graph_mode", "t_step_s", "t_gap_s", "t_end_s",
         "num_emitted_tokens"]].astype({"run_id": str, "graph_mode": str})
    st = st.merge(reps[["run_id", "setting"]], on="run_id").sort_values(["run_id", "step"])
    first = st[st["run_id"] == st.groupby("setting")["run_id"].transform("min")]
    m = st.merge(first[["setting", "step", "num_tokens", "graph_mode"]], how="left",
                 on=["setting", "step"], suffixes=("", "_0"))
    same = (m["num_tokens"] == m["num_tokens_0"]) & (m["graph_mode"] == m["graph_mode_0"])
    counts, of_run = st.groupby("run_id").size(), reps.set_index("run_id")["setting"]
    ok = same.groupby(m["run_id"]).all() & (
        counts == of_run.reindex(counts.index).map(first.groupby("setting").size()))
    setting_ok = ok.groupby(of_run.reindex(ok.index)).all()
    st = st[st["setting"].isin(set(setting_ok[setting_ok].index))].reset_index(drop=True)
    st["wall"] = st["t_step_s"] + st["t_gap_s"]
    key = [st["setting"], st["step"]]
    st["ref_wall"] = np.exp(np.log(st["wall"]).groupby(key).transform("mean"))
    st["tref"] = st["t_end_s"].groupby(key).transform("mean")
    st["b"] = (st["tref"] // BIN_S).astype(int)
    return st, {"settings_matched": int(setting_ok.sum()), "runs": int(st["run_id"].nunique()),
                "settings_differing": int((~setting_ok).sum())}


def _loo_pct(tok_s, setting) -> float | None:
    """floor.py's LOO MAPE (%) of a per-run tok/s Series grouped by `setting` (>= 2 runs each)."""
    n, tot = (tok_s.groupby(setting).transform(f) for f in ("size", "sum"))
    err = ((tot - tok_s) / (n - 1) / tok_s - 1)[n >= 2]
    return float(100 * err.abs().mean()) if len(err) else None


def autocorrelation(st) -> dict[str, Any]:
    """Autocorrelation of y = log(bin wall / bin reference) at ACF_LAGS_S: mean of y(t) y(t + lag)
    over every run's pairs / mean of y^2 over all bins (y about the setting's reference, not the
    run's own mean, which would bias the long lags of short runs negative)."""
    import pandas as pd

    g = st.groupby(["run_id", "b"]).agg(v=("wall", "sum"), ref=("ref_wall", "sum"), n=("b", "size"))
    y = np.log(g["v"] / g["ref"])[g["n"] >= MIN_BIN_STEPS]
    var = float((y ** 2).mean())
    runs, bins = y.index.get_level_values(0), y.index.get_level_values(1)
    lags = []
    for lag in ACF_LAGS_S:
        k = int(round(lag / BIN_S))
        ahead = y.reindex(pd.MultiIndex.from_arrays([runs, bins + k])).to_numpy()
        ok = ~np.isnan(ahead)
        lags.append({"lag_s": lag, "acf": float((y.to_numpy()[ok] * ahead[ok]).mean() / var),
                     "pairs": int(ok.sum()), "runs": int(runs[ok].nunique())})
    return {"bin_s": BIN_S, "sd_bin_pct": 100 * math.sqrt(var), "bins": int(len(y)),
            "runs": int(runs.nunique()), "lags": lags}


def sub_window_floor(st) -> dict[str, Any]:
    """LOO MAPE of sub-windows [a, a + L) of reference time (a on the BIN_S grid, anywhere in the
    run) over the settings with >= LONG_S recorded; tok/s ~ 1 / wall (same steps in each repeat)."""
    span = st.groupby("setting")["b"].max() * BIN_S
    errs: dict[float, list] = {L: [] for L in SUB_WINDOWS_S}
    long_sets = sorted(span[span >= LONG_S].index)
    for setting in long_sets:
        piv = st[st["setting"] == setting].pivot_table(index="b", columns="run_id", values="wall",
                                                       aggfunc="sum")
        piv = piv.reindex(range(int(piv.index.max()) + 1)).fillna(0.0).to_numpy()
        cs = np.vstack([np.zeros(piv.shape[1]), np.cumsum(piv, axis=0)])
        m = piv.shape[1]
        for L in SUB_WINDOWS_S:
            k = int(round(L / BIN_S))
            inv = 1.0 / (cs[k:] - cs[:-k])
            loo = (inv.sum(axis=1, keepdims=True) - inv) / (m - 1) / inv - 1
            errs[L].append(np.abs(loo).ravel())
    runs = int(st.loc[st["setting"].isin(long_sets), "run_id"].nunique())
    return {"min_recorded_s": LONG_S, "settings": len(long_sets), "runs": runs,
            "windows": [{"length_s": L, "mape_pct": float(100 * np.concatenate(errs[L]).mean()),
                         "sub_windows": int(sum(len(e) for e in errs[L]))}
                        for L in SUB_WINDOWS_S if errs[L]]}


def window_floor(st, runs, reps) -> dict[str, Any]:
    """Floor of each run's steady window tok/s from its steps, beside floor.py's (output_tok_s)
    for the same runs, and split by the setting's FULL-graph share of window wall time."""
    import json

    runs = runs.set_index(runs["run_id"].astype(str))     # run_prediction.window_mask's rule:
    steady, w = runs["steady_state"].astype(bool), runs["window"].map(json.loads)
    t0 = st["run_id"].map(w.map(lambda d: d.get("t0")).where(steady, -np.inf))
    t1 = st["run_id"].map(w.map(lambda d: d.get("t1")).where(steady, np.inf))
    win = st[(st["t_end_s"] > t0) & (st["t_end_s"] <= t1)]
    g = win.assign(full=win["wall"].where(win["graph_mode"] == "FULL", 0.0)).groupby(
        ["setting", "run_id"])[["num_emitted_tokens", "wall", "full"]].sum().reset_index()
    g["tok_s"], g["share"] = g["num_emitted_tokens"] / g["wall"], g["full"] / g["wall"]
    mostly = g.groupby("setting")["share"].transform("mean") >= FULL_SHARE
    used = reps[reps["run_id"].isin(set(g["run_id"]))]
    lens = win.groupby("run_id")["wall"].sum()

    def part(sel) -> dict[str, Any]:
        return {"mape_pct": _loo_pct(g.loc[sel, "tok_s"], g.loc[sel, "setting"]),
                "runs": int(sel.sum()), "settings": int(g.loc[sel, "setting"].nunique())}

    return {"runs": len(g), "settings": int(g["setting"].nunique()),
            "median_window_s": float(lens.median()),
            "mape_pct": _loo_pct(g["tok_s"], g["setting"]),
            "floor_py_mape_pct": float(100 * used["error"].abs().mean()),
            "full_share_min": FULL_SHARE, "mostly_full": part(mostly), "others": part(~mostly)}


def _g(x):
    """Variance factor of an exponentially correlated series averaged over x correlation times."""
    return 2 * (x - 1 + np.exp(-x)) / x ** 2


def extrapolate(curve: dict[str, Any], floor_pct: float | None) -> dict[str, Any]:
    """Fit floor(L)^2 = A g(L / tau) + C (C >= 0: a per-run constant) to the sub-window floors
    (tau on a grid, A and C by least squares on relative error) and find the L at 5 %."""
    L = np.array([w["length_s"] for w in curve["windows"]], float)
    f2 = (np.array([w["mape_pct"] for w in curve["windows"]]) / 100) ** 2
    x1 = _g(L[None, :] / TAUS[:, None]) / f2 if len(L) >= 3 else np.empty((0, len(L)))
    x2 = np.broadcast_to(1 / f2, x1.shape)           # rows: tau; weighted so that target = 1
    s11, s12, s22 = (x1 * x1).sum(1), (x1 * x2).sum(1), (x2 * x2).sum(1)
    b1, b2 = x1.sum(1), x2.sum(1)
    det = s11 * s22 - s12 ** 2
    a, c = (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det
    a, c = np.where(c < 0, b1 / s11, a), np.clip(c, 0, None)    # C < 0: refit A alone
    sse = np.where(a > 0, ((a[:, None] * x1 + c[:, None] * x2 - 1) ** 2).sum(1), np.inf)
    out: dict[str, Any] = {
        "method": "floor(L)^2 = A*g(L/tau) + C fitted to the sub-window floors (g: variance of "
                  "an exponentially correlated drift averaged over L), solved for the target; "
                  "repeats: (whole-window floor / target)^2, independent repeats",
        "label": f"extrapolation beyond the measured {L.max() if len(L) else 0:g} s",
        "target_pct": TARGET_PCT, "tau_s": None, "run_constant_pct": None, "window_s": None,
        "repeats": math.ceil((floor_pct / TARGET_PCT) ** 2) if floor_pct else None}
    if len(sse) and np.isfinite(sse.min()):
        i = int(np.argmin(sse))
        grid = np.geomspace(BIN_S, 1e5, 20001)
        below = grid[a[i] * _g(grid / TAUS[i]) + c[i] <= (TARGET_PCT / 100) ** 2]
        out.update(tau_s=float(TAUS[i]), run_constant_pct=100 * math.sqrt(c[i]),
                   window_s=float(below[0]) if len(below) else None)
    return out


def drift_summary(version_key: str, records=None) -> dict[str, Any]:
    """Everything above for the synchronous runs of one vLLM version, JSON-able and rounded."""
    import json

    runs, steps, reps = sync_repeats(version_key, records)
    st, check = matched_steps(steps, reps)
    win = window_floor(st, runs, reps)
    curve = sub_window_floor(st)
    doc = {"vllm_version": version_key, "matched": check, "whole_window": win,
           "autocorrelation": autocorrelation(st), "sub_windows": curve,
           "extrapolation": extrapolate(curve, win["mape_pct"])}
    return json.loads(json.dumps(doc), parse_float=lambda v: round(float(v), 4))


def render(doc: dict[str, Any]) -> str:
    """The compact text table (<= 100 columns)."""
    def pct(v: float | None, unit: str = " %") -> str:
        return "-" if v is None else f"{v:.1f}{unit}"

    m, w, a, s, e = (doc[k] for k in ("matched", "whole_window", "autocorrelation",
                                      "sub_windows", "extrapolation"))
    full, rest = w["mostly_full"], w["others"]
    reach = "not reached" if e["window_s"] is None else f"at {e['window_s']:.0f} s steady windows"
    return "\n".join([
        f"synchronous-runner drift, vLLM {doc['vllm_version']} (simkit.validation.drift)",
        f"repeated settings with identical step sequences: {m['settings_matched']} "
        f"({m['runs']} runs); differing: {m['settings_differing']} (left out)",
        f"steady window (median {w['median_window_s']:.1f} s): floor {pct(w['mape_pct'])} "
        f"from the steps, {pct(w['floor_py_mape_pct'])} from output_tok_s (floor.py)",
        f"autocorrelation of log wall / matched reference, {a['bin_s']} s bins "
        f"({a['runs']} runs, bin sd {a['sd_bin_pct']:.1f} %):",
        "  lag s  " + "".join(f"{x['lag_s']:>8}" for x in a["lags"]),
        "  acf    " + "".join(f"{x['acf']:>8.2f}" for x in a["lags"]),
        "  pairs  " + "".join(f"{x['pairs']:>8}" for x in a["lags"]),
        f"floor of a sub-window of L s ({s['settings']} settings, {s['runs']} runs with "
        f">= {s['min_recorded_s']:g} s recorded):",
        "  L s    " + "".join(f"{x['length_s']:>8}" for x in s["windows"]),
        "  floor  " + "".join(f"{x['mape_pct']:>6.1f} %" for x in s["windows"]),
        f"FULL-graph >= {100 * w['full_share_min']:.0f} % of window wall: floor "
        f"{pct(full['mape_pct'])} ({full['runs']} runs, {full['settings']} settings); "
        f"others {pct(rest['mape_pct'])} ({rest['runs']}, {rest['settings']})",
        f"{e['label']} (OU fit: tau {pct(e['tau_s'], ' s')}, run constant "
        f"{pct(e['run_constant_pct'])}):",
        f"  a {e['target_pct']:g} % floor {reach}; at today's windows: the mean of "
        f"{e['repeats']} repeats >= 30 s apart"])


def main(argv: list[str] | None = None) -> int:
    """CLI: print the summary as a table or as JSON."""
    import argparse
    import json

    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.errors import SimkitError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-version", default="0.33")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    ap.add_argument("--records", default=None, help="records folder (default calibrate/data)")
    args = ap.parse_args(argv)
    try:
        doc = drift_summary(get_vllm_version(args.vllm_version).key, args.records)
    except SimkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=1, sort_keys=True) if args.format == "json" else render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["autocorrelation", "drift_summary", "extrapolate", "matched_steps", "render",
           "sub_window_floor", "sync_repeats", "window_floor"]
