"""The model x corpus x configuration sweep on a Ray cluster (the real `ray` package).

One Ray task per (model, corpus) cell; each task runs the engine's own local sweep over that one
cell (`simkit.app.sweep.sweep`, one process), so a cell's rows are exactly what the local
executor computes. The driver assembles the rows in cell order and writes the same files as the
local sweep (sweep.parquet, sweep.csv, speedup_per_k.png): the table is identical whatever the
executor and the number of nodes. Every node needs simkit installed (and the traces or shipped
profiles it reads); `address` joins an existing cluster, None starts a local Ray instance.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from simkit.choices import Executor
from simkit.errors import InputError


def _run_cell(model: str, corpus: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One cell through the local sweep in this worker; rows as records plus failures."""
    from simkit.app.sweep import sweep

    with tempfile.TemporaryDirectory(prefix="simkit-ray-") as tmp:
        res = sweep([model], [corpus], tmp, workers=1, **kwargs)
    return {"rows": res["frame"].to_dict("records"), "failed": res["failed"],
            "skipped": res.get("skipped", {})}


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("the Ray executor needs the ray package: pip install 'simkit[ray]'",
                         field="executor") from None
    return ray


def sweep_ray(models: list[str], corpora: list[str], out: str | Path, *,
              address: str | None = None, num_cpus: int | None = None,
              progress: Callable[[int], Callable[[int], None]] | None = None,
              **kwargs: Any) -> dict[str, Any]:
    """Run every (model, corpus) cell as a Ray task; write the local sweep's files. `kwargs`
    are the local sweep's (`run`, `configs`)."""
    import pandas as pd

    from simkit.app.sweep import SWEEP_COLUMNS, write_artefacts

    ray = _import_ray()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cells = [(m, c) for m in models for c in corpora]
    started = False
    if not ray.is_initialized():
        if address is None:                     # a local instance, stopped afterwards
            ray.init(num_cpus=num_cpus, object_store_memory=256 * 1024 ** 2,
                     include_dashboard=False, log_to_driver=False)
        else:                                   # join a running cluster as it is configured
            ray.init(address=address, log_to_driver=False)
        started = True
    try:
        task = ray.remote(num_cpus=1)(_run_cell)
        refs = [task.remote(m, c, kwargs) for m, c in cells]
        tick = progress(len(cells)) if progress else None
        results = []
        for ref in refs:                        # cell order, whatever order they finish in
            results.append(ray.get(ref))
            if tick:
                tick(1)
        resources = ray.cluster_resources()
    finally:
        if started:
            ray.shutdown()
    rows = [row for res in results for row in res["rows"]]
    frame = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    written, not_written = write_artefacts(frame, out)
    failed = {k: v for res in results for k, v in res["failed"].items()}
    skipped = {k: v for res in results for k, v in res.get("skipped", {}).items()}
    return {"cells": len(cells), "rows": len(frame), "failed": failed, "out": str(out),
            "skipped": skipped,
            "frame": frame, "written": written, "not_written": not_written, "executor": Executor.RAY, "address": address or "local",
            "cluster_cpus": resources.get("CPU")}
