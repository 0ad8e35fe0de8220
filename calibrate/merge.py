"""Merge per-run record files into one steps.parquet and runs.parquet.

On the GPU host: `python -m calibrate.merge WORKDIR OUTDIR` after each engine (so a call cut off
later still returns what finished). Here: `python -m calibrate.merge A B ... --into calibrate/data`
concatenates several returned steps/runs pairs, dropping nothing and refusing duplicate run ids.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from calibrate.records import run_columns, write_runs, write_steps
from simkit.record_schema import RUN_COLUMNS, STEP_COLUMNS


def _read_runs(folder: Path) -> list[dict]:
    """The run records of a folder: runs.jsonl (a GPU host's work folder) or runs.parquet."""
    import pandas as pd

    if (folder / "runs.jsonl").exists():
        return [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()
                if line.strip()]
    if (folder / "runs.parquet").exists():
        return pd.read_parquet(folder / "runs.parquet").to_dict("records")
    return []


def _read_steps(folder: Path, run_ids: list[str]) -> list[dict]:
    """The step records of a folder's runs (read after the runs were checked: they are large)."""
    import pandas as pd

    if (folder / "runs.jsonl").exists():
        steps: list[dict] = []
        for rid in run_ids:
            p = folder / f"steps_{rid}.parquet"
            if p.exists():
                steps.extend(pd.read_parquet(p).to_dict("records"))
        return steps
    if (folder / "runs.parquet").exists():
        return pd.read_parquet(folder / "steps.parquet").to_dict("records")
    return []


def retag_run_id(run_id: str, corpus: str, tag: str) -> str:
    """Insert -TAG before '_<corpus>_c' (the runner's run-tag position), as `--tag` would have."""
    marker = f"_{corpus}_c"
    head, sep, tail = run_id.rpartition(marker)
    if not sep:
        raise ValueError(f"run id {run_id!r} has no '{marker}' to tag")
    return f"{head}-{tag}{sep}{tail}"


def merge(folders: list[Path], out: Path, fill: dict[str, str] | None = None,
          relabel: dict[str, tuple[str, str]] | None = None, tag: str = "",
          drop: set[str] | None = None) -> tuple[int, int]:
    """Write out/steps.parquet and out/runs.parquet from the folders; returns (runs, steps).

    fill gives a value for run columns that older records lack (never overwrites a value);
    relabel maps COLUMN -> (OLD, NEW) for a run-column value later found to be wrong (used once:
    force_copy of the 13:47 runs, see calibrate/data/README.md). Timings are never changed.
    """
    runs: list[dict] = []
    read: list[tuple[Path, list[str], dict[str, str]]] = []   # folder, its run ids, their new ids
    for f in folders:
        r = _read_runs(Path(f))
        ids: dict[str, str] = {}
        if tag and Path(f).resolve() != Path(out).resolve():
            ids = {row["run_id"]: retag_run_id(row["run_id"], row["corpus"], tag) for row in r}
        read.append((Path(f), [row["run_id"] for row in r], ids))
        for row in r:
            row["run_id"] = ids.get(row["run_id"], row["run_id"])
        runs += r
    if drop:
        unknown = sorted(drop - {r["run_id"] for r in runs})
        if unknown:
            raise ValueError(f"--drop names runs that are not in the inputs: {unknown}")
        runs = [r for r in runs if r["run_id"] not in drop]
    missing = sorted({c for r in runs for c in RUN_COLUMNS if c not in r} - set(fill or {}))
    if missing:
        raise ValueError(f"run records lack columns {missing}; give --fill COLUMN=VALUE")
    for r in runs:
        for c, v in (fill or {}).items():
            r.setdefault(c, v)
        for c, (old, new) in (relabel or {}).items():
            if str(r.get(c)) == old:
                r[c] = new
    all_ids = [r["run_id"] for r in runs]
    dup = sorted({i for i in all_ids if all_ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate run ids across inputs: {dup}")
    steps: list[dict] = []                  # every check above passed: now the large files
    for folder, run_ids, ids in read:
        for row in _read_steps(folder, run_ids):
            row["run_id"] = ids.get(row["run_id"], row["run_id"])
            steps.append(row)
    runs.sort(key=lambda r: (r["started_utc"], r["run_id"]))
    order = {rid: i for i, rid in enumerate(r["run_id"] for r in runs)}
    steps = [s for s in steps if s["run_id"] in order]
    steps.sort(key=lambda s: (order[s["run_id"]], s["step"]))
    out.mkdir(parents=True, exist_ok=True)
    if runs:
        cols = run_columns(runs)      # the 0.34 columns only when some run has them
        write_runs(out / "runs.parquet", [{c: r.get(c, "" if c not in RUN_COLUMNS else None)
                                           for c in cols} for r in runs])
    if steps:
        write_steps(out / "steps.parquet", [{c: s.get(c) for c in STEP_COLUMNS} for s in steps])
    return len(runs), len(steps)


def main(argv: list[str] | None = None) -> int:
    """CLI: merge FOLDER... into OUT (the last positional, or --into)."""
    ap = argparse.ArgumentParser(prog="calibrate.merge")
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--into", type=Path)
    ap.add_argument("--fill", action="append", default=[], metavar="COLUMN=VALUE",
                    help="value for a run column that older records lack")
    ap.add_argument("--relabel", action="append", default=[], metavar="COLUMN:OLD=NEW",
                    help="replace a run-column value found to be wrong")
    ap.add_argument("--tag", default="",
                    help="insert -TAG into the run ids of the new folders (not OUT's own records), "
                         "as the runner's --tag would have: for re-measured settings")
    ap.add_argument("--drop", action="append", default=[], metavar="RUN_ID",
                    help="leave out a run (after tagging), e.g. one found invalid; say why in "
                         "calibrate/data/README.md")
    a = ap.parse_args(argv)
    folders, out = (a.folders, a.into) if a.into else (a.folders[:-1], a.folders[-1])
    fill = dict(f.split("=", 1) for f in a.fill)
    relabel = {}
    for spec in a.relabel:
        col, _, pair = spec.partition(":")
        old, sep, new = pair.partition("=")
        if not col or not sep:
            ap.error(f"--relabel {spec!r} is not COLUMN:OLD=NEW")
        relabel[col] = (old, new)
    n_runs, n_steps = merge(folders, out, fill, relabel, a.tag, set(a.drop))
    print(f"merged {n_runs} runs, {n_steps} steps into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
