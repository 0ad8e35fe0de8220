"""Bridges between step-record tables (simkit/record_schema.py STEP_COLUMNS plus run settings) and
the cost model: validation, BatchDescriptors from rows, and the per-component targets."""

from __future__ import annotations

from typing import Any

from pathlib import Path

from simkit.record_schema import STEP_COLUMNS
from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.drafters.base import NGRAM_DRAFTER, NO_DRAFTER, SUFFIX_DRAFTER
from simkit.errors import InputError

BATCH_COLUMNS = ("num_reqs", "num_tokens", "num_padded_tokens", "num_prefill_tokens", "num_prefill_reqs",
                 "num_decode_reqs", "num_spec_tokens", "num_pad_drafts", "num_drafting_reqs", "context_tokens",
                 "graph_mode")
TIME_COLUMNS = ("t_schedule_s", "t_prepare_s", "t_forward_s", "t_sample_s", "t_draft_s", "t_update_s", "t_step_s")
# the columns a records file must have before fit / validate read it (checked by read_parquet)
RUN_KEYS = ("run_id", "model", "config", "tp", "gpu")
# and what predicting a whole run needs beside them (simkit validate)
RUN_PREDICT_KEYS = ("corpus", "concurrency", "output_tok_s")
STEP_KEYS = ("run_id", "step", *BATCH_COLUMNS, *TIME_COLUMNS)
# force_copy values of runs whose forcing hook waited for the forward pass (async overlap lost):
# pageable H2D copy (11:25-11:51 runs) and advanced-index assignment (13:47 runs; probe 14:02).
SYNCED_FORCE_COPIES = ("pageable-sync", "pinned-assign-sync")


def forcing_synchronised(force_copy: Any) -> bool:
    """True when a run's forcing hook synchronised the stream (see calibrate/data/README.md)."""
    return str(force_copy) in SYNCED_FORCE_COPIES


def forcing_regime(force_copy: Any) -> str:
    """'synchronised' (the forcing hook waited for the forward), 'overlapped' or 'unforced'."""
    if forcing_synchronised(force_copy):
        return "synchronised"
    return "unforced" if str(force_copy) in ("none", "") else "overlapped"


GPU_NAMES = ("b200", "h200", "h100")     # catalogue hardware a recorded GPU string can name


def version_of(recorded: Any) -> str:
    """simkit's key of a run's recorded vLLM version ('0.26.0' -> '0.26'); '' for an unknown one."""
    from simkit.catalog.vllm_versions import get_vllm_version
    from simkit.errors import UnknownNameError

    try:
        return get_vllm_version(str(recorded or "")).key
    except UnknownNameError:
        return ""


def versions_of(column: Any) -> Any:
    """version_of of every value of a column (a Series: the records' vllm_version), worked out
    once per distinct value: per row, over the ~500 k step records, it took ~2 s."""
    import numpy as np
    import pandas as pd

    codes, distinct = pd.factorize(column)            # a missing value: code -1 (version '')
    keys = np.array([version_of(v) for v in distinct] + [version_of(None)], dtype=object)
    return pd.Series(keys[codes], index=column.index, dtype=object)


def release_keys(column: Any) -> Any:
    """The 'X.Y' release key of every value of a column (a Series of recorded vllm_version),
    also for a release simkit has no rules for ('0.34.0' -> '0.34'); '' where unreadable."""
    import numpy as np
    import pandas as pd

    from simkit.catalog.nearest_version import release_key

    codes, distinct = pd.factorize(column)
    keys = np.array([release_key(v) for v in distinct] + [""], dtype=object)
    return pd.Series(keys[codes], index=column.index, dtype=object)


def select_version(runs: Any, vllm_version: str | None) -> Any:
    """The runs recorded with that vLLM version (None: every run)."""
    if vllm_version is None or "vllm_version" not in runs.columns:
        return runs
    from simkit.catalog.vllm_versions import get_vllm_version

    key = get_vllm_version(vllm_version).key
    return runs[versions_of(runs["vllm_version"]) == key]


def hardware_of(gpu: str) -> str | None:
    """Catalogue hardware name from a recorded GPU string (e.g. 'NVIDIA H200' -> 'h200')."""
    low = str(gpu).lower()
    return next((h for h in GPU_NAMES if h in low), None)


# a recorded config label (its first word) -> the drafter that ran it
CONFIG_DRAFTER = {"vanilla": NO_DRAFTER, "suffix": SUFFIX_DRAFTER, "kpad": SUFFIX_DRAFTER,
                  "ngram": NGRAM_DRAFTER, "ngram-kpad": NGRAM_DRAFTER, "dynamic": SUFFIX_DRAFTER}


def check_records(X: Any, need_times: bool = True, where: str = "step records") -> None:
    """Raise an InputError naming the first missing column or bad value."""
    cols = set(X.columns)
    needed = list(BATCH_COLUMNS) + ["run_id", "async_scheduling"] + (list(TIME_COLUMNS) if need_times else [])
    for col in needed:
        if col not in cols:
            raise InputError("column missing", path=where, field=col)
    modes = set(map(str, X["graph_mode"].unique()))
    bad = modes - {m.value for m in GraphMode}
    if bad:
        raise InputError(f"unknown graph mode(s) {sorted(bad)}", path=where, field="graph_mode")
    for col in BATCH_COLUMNS[:-1]:
        if (X[col] < 0).any():
            row = int((X[col] < 0).to_numpy().argmax())
            raise InputError("negative count", path=where, line=row + 1, field=col)
    if need_times:
        for col in TIME_COLUMNS:
            if (X[col] < 0).any():
                row = int((X[col] < 0).to_numpy().argmax())
                raise InputError("negative time", path=where, line=row + 1, field=col)


def drop_untimed(X: Any) -> tuple[Any, dict[str, int]]:
    """Rows whose time columns are all present, and the count of rows dropped per missing
    column (e.g. CUDA events never read back); nothing is dropped silently."""
    skipped: dict[str, int] = {}
    keep = None
    for col in TIME_COLUMNS:
        bad = X[col].isna()
        if bad.any():
            skipped[f"{col} missing"] = int(bad.sum())
        keep = ~bad if keep is None else keep & ~bad
    return (X if not skipped else X[keep]), skipped


def drafter_of(row: dict) -> str:
    """The drafter of a step: the row's 'drafter', else from 'config', else 'none'."""
    d = row.get("drafter")
    if isinstance(d, str) and d:
        return d
    cfg = row.get("config")
    if isinstance(cfg, str) and cfg:
        key = cfg if cfg in CONFIG_DRAFTER else cfg.split("-")[0]
        if key not in CONFIG_DRAFTER:
            raise InputError(f"unknown config {cfg!r}; known {sorted(CONFIG_DRAFTER)}", field="config")
        return CONFIG_DRAFTER[key]
    return NO_DRAFTER


def records(X: Any) -> list[dict]:
    """The rows of a step-record frame as dicts, the values X.to_dict("records") gives (Python
    ints, floats, bools and strings), built column by column: on the ~100 k committed steps
    to_dict boxes each value alone and takes ~4x as long (a fit reads the rows twice)."""
    import pandas as pd

    def column(name: str) -> list:
        values = X[name].tolist()            # a nullable column's missing value: pd.NA here,
        if not X[name].hasnans:              # None in to_dict
            return values
        return [None if v is pd.NA else v for v in values]

    cols = list(X.columns)
    return [dict(zip(cols, values)) for values in zip(*(column(c) for c in cols))]


def batch_from_row(row: dict) -> BatchDescriptor:
    """The BatchDescriptor a step record describes."""
    return BatchDescriptor(
        num_reqs=int(row["num_reqs"]), num_tokens=int(row["num_tokens"]),
        num_padded_tokens=int(row["num_padded_tokens"]), num_prefill_tokens=int(row["num_prefill_tokens"]),
        num_prefill_reqs=int(row["num_prefill_reqs"]), num_decode_reqs=int(row["num_decode_reqs"]),
        num_spec_tokens=int(row["num_spec_tokens"]), num_pad_drafts=int(row["num_pad_drafts"]),
        num_drafting_reqs=int(row["num_drafting_reqs"]), context_tokens=int(row["context_tokens"]),
        graph_mode=GraphMode(str(row["graph_mode"])), async_scheduling=bool(row["async_scheduling"]),
        drafter=drafter_of(row), num_accepted_tokens=int(row.get("num_accepted") or 0),
    )


# the BatchDescriptor's integer fields, each read from the step-record column of its name
_COUNT_FIELDS = ("num_reqs", "num_tokens", "num_padded_tokens", "num_prefill_tokens",
                 "num_prefill_reqs", "num_decode_reqs", "num_spec_tokens", "num_pad_drafts",
                 "num_drafting_reqs", "context_tokens")


def batches(X: Any) -> list[BatchDescriptor]:
    """batch_from_row of every row of a step-record frame, the same descriptors built column
    by column: through records() each row first became a dict of every column (validate
    prices ~250 k recorded steps this way)."""
    import pandas as pd

    def ints(name: str) -> list:
        col = X[name]
        values = col.tolist()
        return values if pd.api.types.is_integer_dtype(col) and not col.hasnans else \
            [int(v) for v in values]

    n = len(X)
    counts = [ints(f) for f in _COUNT_FIELDS]
    modes = {m: GraphMode(str(m)) for m in set(X["graph_mode"].tolist())}
    mode = [modes[m] for m in X["graph_mode"].tolist()]
    runner_async = [bool(v) for v in X["async_scheduling"].tolist()]
    accepted = ([int((None if v is pd.NA else v) or 0) for v in X["num_accepted"].tolist()]
                if "num_accepted" in X else [0] * n)          # records(): NA -> None -> 0
    keys = list(zip(*(X[c].tolist() if c in X else [None] * n for c in ("drafter", "config"))))
    drafters = {k: drafter_of({"drafter": k[0], "config": k[1]}) for k in set(keys)}
    return [BatchDescriptor(*c, graph_mode=m, async_scheduling=a, drafter=drafters[k],
                            num_accepted_tokens=n_acc)
            for *c, m, a, k, n_acc in zip(*counts, mode, runner_async, keys, accepted)]


def check_unique_runs(frames) -> None:
    """Refuse run records that hold one run_id twice, in one runs*.parquet or across two: each
    run is predicted once under its own settings, and a duplicate would make its steps join two
    settings (pandas' MergeError once escaped as an internal error). The message names the
    file(s) and the duplicated run ids."""
    seen: dict[str, Path] = {}
    for path, frame in frames:
        ids = frame["run_id"].astype(str)
        dup = sorted(set(ids[ids.duplicated()]))
        if dup:
            raise InputError(f"run_id {', '.join(dup[:5])}{' ...' if len(dup) > 5 else ''} "
                             f"appear(s) more than once ({len(dup)} duplicated run id(s)); "
                             "keep one row per run", path=str(path), field="run_id")
        for rid in ids:
            if rid in seen:
                raise InputError(f"run_id {rid} is also in {seen[rid]}; keep each run in one "
                                 "runs file", path=str(path), field="run_id")
            seen[rid] = path


def check_unique_steps(frames) -> None:
    """Refuse step records that hold one (run_id, step) twice, in one steps*.parquet or across
    two (a records folder holding the same runs twice): a fit on them would count those steps
    twice. The message names the file and the run, as check_unique_runs does."""
    seen: dict[str, Path] = {}
    for path, frame in frames:
        keys = frame["run_id"].astype(str) + "#" + frame["step"].astype(str)
        dup = keys[keys.duplicated()]
        if len(dup):
            rid = str(dup.iloc[0]).split("#")[0]
            raise InputError(f"run {rid} has step {str(dup.iloc[0]).split('#')[1]} more than "
                             f"once ({len(dup):,} duplicated step(s)); keep one row per step",
                             path=str(path), field="step")
        for rid in sorted(set(frame["run_id"].astype(str))):
            if rid in seen:
                raise InputError(f"the steps of run {rid} are also in {seen[rid]}; keep each "
                                 "run's steps in one steps file", path=str(path),
                                 field="run_id")
            seen[rid] = path


def join_runs(steps: Any, runs: Any) -> Any:
    """Step records with their run's settings (model, tp, async_scheduling, config, gpu) joined
    by run_id; a step whose run is missing is an error naming the run."""
    cols = [c for c in ("run_id", "model", "tp", "async_scheduling", "config", "gpu", "k", "force_copy", "purpose",
                        "vllm_version", "draft_count")
            if c in runs.columns]
    missing = set(steps["run_id"].unique()) - set(runs["run_id"])   # unique: ~500 k rows
    if missing:
        raise InputError(f"steps of unknown run(s) {sorted(missing)[:5]}", path="runs", field="run_id")
    dup = [c for c in cols if c != "run_id" and c in steps.columns]
    return steps.drop(columns=dup).merge(runs[cols], on="run_id", how="left", validate="many_to_one")


def read_parquet(path: str | Path, required: tuple[str, ...] | list[str] = ()) -> Any:
    """A parquet file as a DataFrame; a file that is not parquet, or lacks a `required` column,
    is an InputError naming the file (and the first missing column) instead of a pyarrow
    traceback."""
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, TypeError) as exc:   # pyarrow's ArrowInvalid is a ValueError
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"not a readable parquet file ({reason})", path=str(path)) from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} (not a simkit records file?)",
                         path=str(path), field=missing[0])
    return frame


__all__ = ["join_runs", "read_parquet", "RUN_KEYS", "STEP_KEYS", "check_records", "drop_untimed",
           "batch_from_row", "batches", "drafter_of", "records", "BATCH_COLUMNS", "TIME_COLUMNS", "STEP_COLUMNS",
           "release_keys", "select_version", "version_of"]
