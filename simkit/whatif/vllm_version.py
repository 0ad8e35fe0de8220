"""vLLM version: what an upgrade (e.g. 0.33 -> 0.34) does to each configuration's throughput
and latency on this model and traffic, the best configuration on each version, the settings to
change with it, and how far each version's figures can be trusted (its calibration's measured
rerun interval, or none where its calibration was transferred from another version's runs).

One config list is parsed under each version, so each configuration is paired with what the
same words mean on the other one: `suffix` is vLLM's default K there (arctic's tree at K 24 on
the V1 runner of 0.33, the GPU speculator at K 8 on 0.34's async runner) and `kpad:K` is K-pad
on 0.33 (a scheduler plugin) and suffix:K on 0.34 (every request verifies exactly K slots).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simkit.app.options import RunOptions
from simkit.catalog.vllm_versions import RUNNERS, VERSIONS, VllmVersion, get_vllm_version
from simkit.engine.config import WHATIF_CONFIGS, SpecConfig, parse_configs
from simkit.engine.workload import Workload
from simkit.errors import InputError, UnknownNameError
from simkit.plotting import plt_agg, save_png
from simkit.app.predict import suggest_num_requests
from simkit.whatif.common import (WhatIfResult, cost_of, ladder_of, requests_per_run,
                                  workload_note, workload_of)

VERSION_CONFIGS = WHATIF_CONFIGS      # vanilla, suffix, kpad:4,12: four pairs on 0.33 -> 0.34
COLUMNS = ["config", "to_config", "from_tok_s", "to_tok_s", "vs_from", "from_tpot_ms_p50",
           "to_tpot_ms_p50", "from_ttft_ms_p50", "to_ttft_ms_p50", "from_interval_pct",
           "to_interval_pct"]


def _version(name: str, option: str) -> VllmVersion:
    try:
        return get_vllm_version(name)
    except UnknownNameError:
        raise InputError(f"unknown vLLM version {name!r}; known: {', '.join(VERSIONS)}",
                         field=option) from None


def runner_class(version: VllmVersion, spec: SpecConfig) -> str:
    """'async' or 'synchronous': the runner `spec` runs on in `version` (the calibration's
    rerun interval is stated per runner class)."""
    runner = version.runner_for(spec.drafter if spec.speculative else "none")
    return "async" if runner.async_scheduling else "synchronous"


def calibration_error(cost: Any) -> dict[str, Any]:
    """How far a version's figures can be trusted, from its calibration: {'measured': bool,
    'by_runner': {class: half-width %}, 'text'}. A transferred calibration has no measured
    interval; the analytic cost model has none either."""
    from simkit.costmodel.calibrations import read_calibration

    name = str(cost.label).removeprefix("calibrated ").split(" ")[0]
    if not str(cost.label).startswith("calibrated "):
        return {"measured": False, "by_runner": {}, "text": "analytic cost model: no measured "
                "error"}
    doc = read_calibration(name)
    moved = doc.get("transferred_from")
    if isinstance(moved, dict):
        return {"measured": False, "by_runner": {},
                "text": f"calibration {name} {moved.get('note', 'transferred')}: its error and "
                        "rerun interval are unmeasured"}
    band = doc.get("interval") or {}
    per = {k: v["half_width_pct"] for k, v in (band.get("by_runner") or {}).items()
           if v.get("half_width_pct") is not None}
    if not per and band.get("half_width_pct") is not None:
        per = {"async": band["half_width_pct"], "synchronous": band["half_width_pct"]}
    runs = doc.get("runs")
    count = runs if isinstance(runs, int) else len(runs or [])
    mape = (doc.get("validation") or {}).get("held_out_mape_pct")
    held = f"held-out error {mape:.1f} % (mean absolute, tok/s)" if mape is not None else ""
    if per:
        text = (f"calibration {name}, fitted on {count} measured runs: 90 % interval for a "
                "rerun " + ", ".join(f"±{v:.1f} % ({k} runner)" for k, v in sorted(per.items()))
                + (f"; {held}" if held else ""))
    else:
        text = (f"calibration {name}, fitted on {count} measured runs: no rerun interval stated"
                + (f"; {held}" if held else ""))
    return {"measured": bool(per) or mape is not None, "by_runner": per, "text": text,
            "held_out_mape_pct": mape}


def _ladder(run: RunOptions, version: VllmVersion, configs: str, workload: Workload | None,
            step: str):
    vrun = run.but(vllm_version=version.key)
    specs = parse_configs(configs, version.key)
    wl = workload_of(vrun, workload)
    cost = cost_of(vrun)
    ladder = ladder_of(vrun, wl, cost, specs, server=vrun.server(cost),
                       phase=f"vLLM {version.key} ({step})")
    return specs, wl, cost, ladder


def vllm_version(run: RunOptions = RunOptions(), *, from_version: str = "0.33",
                 to_version: str = "0.34", configs: str = VERSION_CONFIGS,
                 workload: Workload | None = None) -> WhatIfResult:
    """Simulate `configs` under `from_version` and `to_version` (each with its own rules,
    drafter tables and default calibration) at the run's load and pair them row by row."""
    old, new = _version(from_version, "from"), _version(to_version, "to")
    if old.key == new.key:
        raise InputError(f"--from and --to are both vLLM {old.key}: name two versions",
                         field="to")
    if run.calibration is not None:
        raise InputError("each version runs its own calibration: leave --calibration unset",
                         field="calibration")
    old_specs = parse_configs(configs, old.key)          # both parsed before any work
    new_specs = parse_configs(configs, new.key)
    if len(old_specs) != len(new_specs):
        raise InputError(f"'{configs}' gives {len(old_specs)} configurations on vLLM {old.key} "
                         f"and {len(new_specs)} on {new.key}: pass configurations both versions "
                         "read as distinct ones", field="configs")
    if all(s.speculative for s in old_specs):
        raise InputError("the version what-if compares against vanilla: include it",
                         field="configs")
    _, wl_old, cost_old, lad_old = _ladder(run, old, configs, workload, "version 1 of 2")
    _, wl_new, cost_new, lad_new = _ladder(run, new, configs, workload, "version 2 of 2")
    err_old, err_new = calibration_error(cost_old), calibration_error(cost_new)
    by_old = {r.config: r for r in lad_old.rows}
    by_new = {r.config: r for r in lad_new.rows}
    rows: list[dict[str, Any]] = []
    for so, sn in zip(old_specs, new_specs):
        ro, rn = by_old.get(so.name), by_new.get(sn.name)
        if ro is None and rn is None:
            continue
        a = ro.output_tok_s if ro else None
        b = rn.output_tok_s if rn else None
        rows.append({"config": so.name, "to_config": sn.name, "from_tok_s": a, "to_tok_s": b,
                     "vs_from": b / a if a and b else None,
                     "from_tpot_ms_p50": ro.tpot_ms_p50 if ro else None,
                     "to_tpot_ms_p50": rn.tpot_ms_p50 if rn else None,
                     "from_ttft_ms_p50": ro.ttft_ms_p50 if ro else None,
                     "to_ttft_ms_p50": rn.ttft_ms_p50 if rn else None,
                     "from_interval_pct": err_old["by_runner"].get(runner_class(old, so)),
                     "to_interval_pct": err_new["by_runner"].get(runner_class(new, sn))})
    notes = _notes(run, old, new, old_specs, new_specs, lad_old, lad_new, err_old, err_new,
                   wl_new)
    best = {"from": _best(lad_old.rows), "to": _best(lad_new.rows)}
    return WhatIfResult(
        "vllm-version", f"upgrading vLLM {old.key} -> {new.key} for {run.model} on "
        f"{cost_new.hw.name} TP{cost_new.tp}, corpus {run.corpus}", COLUMNS, rows,
        {"model": run.model, "corpus": run.corpus, "hardware": cost_new.hw.name,
         "tp": cost_new.tp, "from": old.key, "to": new.key, "configs": configs,
         "concurrency": run.concurrency, "seeds": run.seeds},
        notes, {"best": best, "error": {"from": err_old, "to": err_new}})


def _best(rows) -> str | None:
    ok = [r for r in rows if r.output_tok_s == r.output_tok_s]
    return max(ok, key=lambda r: r.output_tok_s).config if ok else None


def _settings(version: VllmVersion, specs: list[SpecConfig], name: str | None) -> str:
    from simkit.report.settings import not_a_setting, settings_of, settings_text

    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        return "none ran"
    why = not_a_setting(spec, version.key)
    text = settings_text(settings_of(spec), breakable=True)
    return f"{why}: {text}" if why else text


def _notes(run, old, new, old_specs, new_specs, lad_old, lad_new, err_old, err_new, wl) -> list:
    cost_line = f"vLLM {old.key}: {err_old['text']}; vLLM {new.key}: {err_new['text']}"

    def method(v: VllmVersion) -> str:
        m = v.method("suffix")
        where = "on the host after each step" if m.drafts_on_host else "on the GPU"
        return (f"vLLM {v.key}: suffix drafts {where}, default K {m.default_k}, "
                f"{RUNNERS[m.runner].description}; "
                + ("kpad:K = suffix:K (every request verifies exactly K slots)"
                   if v.kpad == "alias" else "kpad:K = K-pad (simkit's scheduler plugin)"))

    notes = [f"closed loop, concurrency {run.concurrency}, {run.seeds} seed(s); each version "
             "with its own engine rules, drafter tables and calibration; "
             + workload_note(wl.name, wl.origin), f"{method(old)}; {method(new)}", cost_line,
             "a change is told apart from none only beyond both versions' rerun intervals"
             + ("" if err_old["by_runner"] and err_new["by_runner"] else
                "; where a version states no interval (-), its held-out error is the bound if it "
                "has one, and a version whose error is unmeasured bounds no change")]
    for label, version, specs, lad in (("before", old, old_specs, lad_old),
                                       ("after", new, new_specs, lad_new)):
        b = _best(lad.rows)
        notes.append(f"best {label} the upgrade (vLLM {version.key}): {b}; settings: "
                     f"{_settings(version, specs, b)}")
    unsteady = [f"{r.config} (vLLM {v.key})" for v, lad in ((old, lad_old), (new, lad_new))
                for r in lad.rows if not r.steady_window]
    if unsteady:
        more = suggest_num_requests(requests_per_run(run.num_requests, wl, run.concurrency),
                                    run.concurrency, None)
        notes.append("no steady window (start-up and drain counted), so these figures are not "
                     f"steady-state ones: {', '.join(unsteady)}; --num-requests "
                     f"{more} or more gives one")
    for name, why in sorted({**lad_old.unavailable, **lad_new.unavailable}.items()):
        notes.append(f"not run: {name}: {why}")
    return notes


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Output tok/s per configuration before and after the upgrade (paired bars)."""
    plt = plt_agg()
    rows = result.rows
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows) + 2), 3.8))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["from_tok_s"] or 0 for r in rows], 0.4,
           label=f"vLLM {result.params['from']}")
    ax.bar([x + 0.2 for x in xs], [r["to_tok_s"] or 0 for r in rows], 0.4,
           label=f"vLLM {result.params['to']}")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['config']}\n-> {r['to_config']}" for r in rows], fontsize=7)
    ax.set_ylabel("output tok/s")
    ax.legend(fontsize=8)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
