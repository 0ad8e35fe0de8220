"""`sweep`: predict over models x corpora on local processes; one table (parquet + CSV) and a plot.

One job = one (model, corpus) cell with all its configurations and seeds, so each worker loads a
profile and a cost model once per cell and frees them afterwards.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

from simkit.app.options import RunOptions
from simkit.engine.config import DEFAULT_CONFIGS
from simkit.engine.summary import FIELDS
from simkit.app.verdict import is_kpad

# the cell's identity, then the row figures the sweep keeps (simkit.engine.summary.FIELDS)
CELL_COLUMNS = ("model", "corpus", "hardware", "tp", "cost_label", "origin", "history", "vllm_version")
ROW_COLUMNS = tuple(f.key for f in FIELDS if f.sweep)
SWEEP_COLUMNS = CELL_COLUMNS + ROW_COLUMNS


def _cell(model: str, corpus: str, run: RunOptions, configs: str) -> dict[str, Any]:
    """Run one cell in this process; returns its rows, or the reason it could not run. The
    sweep counts cells (its own phase): the cell's simulations are not counted again."""
    from simkit.app.predict import predict
    from simkit.app.cells import clear_loaded
    from simkit.errors import SimkitError
    from simkit.progress import detached

    try:
        with detached():
            pred = predict(run.but(model=model, corpus=corpus, workers=1), configs=configs)
    except (SimkitError, FileNotFoundError, LookupError) as exc:
        return {"model": model, "corpus": corpus, "error": str(exc), "rows": []}
    finally:
        clear_loaded()
    ident = dict(zip(CELL_COLUMNS, (model, corpus, pred.hardware, pred.tp, pred.cost_label,
                                    pred.origin,
                                    pred.history.label if pred.history else "", pred.vllm_version)))
    rows = []
    for r in pred.rows:
        flags = {"is_best": r.config == pred.best_config,
                 "is_best_k": is_kpad(r.config) and r.k == pred.best_k}
        rows.append({**ident, **{key: flags[key] if key in flags else getattr(r, key)
                                 for key in ROW_COLUMNS}})
    return {"model": model, "corpus": corpus, "error": None, "rows": rows,
            "unavailable": pred.unavailable,
            "skipped": {k: v for k, v in sorted(pred.skipped.items()) if v}}


def sweep(models: list[str], corpora: list[str], out: str | Path, *,
          run: RunOptions | None = None, configs: str = DEFAULT_CONFIGS,
          workers: int | None = None,
          progress: Callable[[int], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Run every (model, corpus) cell under the settings `run` (its model and corpus are
    replaced by each cell's; None: the defaults) on `workers` processes (None: all cores; one
    cell per process at a time); write sweep.parquet, sweep.csv and speedup_per_k.png."""
    run = run or RunOptions()
    import pandas as pd

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cells = [(m, c) for m in models for c in corpora]
    tick = progress(len(cells)) if progress else None
    workers = max(1, min(workers or os.cpu_count() or 1, len(cells)))
    results: list[dict[str, Any]] = []
    if workers == 1:
        for m, c in cells:
            results.append(_cell(m, c, run, configs))
            if tick:
                tick(1)
    else:
        from simkit.engine.runner import ignore_sigint, stop_pool
        from simkit.interrupt import result

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                 initializer=ignore_sigint) as pool:
            futures = [pool.submit(_cell, m, c, run, configs) for m, c in cells]
            try:
                for fut in futures:
                    results.append(result(fut))
                    if tick:
                        tick(1)
            except KeyboardInterrupt:   # end the workers now, not after every queued cell
                stop_pool(pool)
                raise
    rows = [row for res in results for row in res["rows"]]
    frame = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    written, not_written = write_artefacts(frame, out)
    failed = {f"{r['model']}/{r['corpus']}": r["error"] for r in results if r["error"]}
    skipped = {f"{r['model']}/{r['corpus']}": r["skipped"] for r in results
               if r.get("skipped")}
    return {"cells": len(cells), "rows": len(frame), "failed": failed, "out": str(out),
            "frame": frame, "written": written, "not_written": not_written,
            "skipped": skipped}


def write_artefacts(frame, out: Path) -> tuple[list[str], dict[str, str]]:
    """Write sweep.csv, sweep.parquet and speedup_per_k.png into `out`, each atomically and
    independently: one that fails (a full disk) is named with its reason and the others are
    still written (the CSV first, the cheapest to keep). Returns (written paths, path ->
    reason for each not written)."""
    from simkit.outfiles import write_atomic

    jobs = ((out / "sweep.csv", lambda p: frame.to_csv(p, index=False, float_format="%.6g")),
            (out / "sweep.parquet", lambda p: frame.to_parquet(p, index=False)),
            (out / "speedup_per_k.png", lambda p: plot_speedup_per_k(frame, p)))
    written, not_written = [], {}
    for path, write in jobs:
        try:
            write_atomic(path, write)
            written.append(str(path))
        except OSError as exc:
            not_written[str(path)] = exc.strerror or str(exc)
    return written, not_written


def plot_speedup_per_k(frame, path: str | Path) -> None:
    """One panel per corpus: K-pad speedup over vanilla against K, one line per model."""
    from simkit.plotting import plt_agg, save_png

    plt = plt_agg()
    kp = frame[frame["config"].str.startswith("kpad-")]
    corpora = sorted(kp["corpus"].unique()) if len(kp) else []
    n = max(1, len(corpora))
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False,
                             sharey=True)
    for ax, corpus in zip(axes.flat, corpora):
        sub = kp[kp["corpus"] == corpus]
        for model in sorted(sub["model"].unique()):
            m = sub[sub["model"] == model].sort_values("k")
            ax.plot(m["k"], m["speedup_vs_vanilla"], marker="o", lw=1, ms=3, label=model)
        ax.set_title(corpus)
        ax.set_xlabel("K (K-pad + FULL_AND_PIECEWISE)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(corpora):]:
        ax.axis("off")
    axes[0][0].set_ylabel("speedup vs vanilla")
    if corpora:
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=7)
    fig.suptitle("simkit sweep: predicted speedup per K per corpus")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    save_png(fig, path)
