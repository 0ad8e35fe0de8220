"""Acceptance tables cached on disk (simkit.paths.cache_dir()/acceptance), keyed by what decides them:
the request tokens themselves, the drafter and its parameters, kmax, the ordering and this code's version."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from simkit.acceptance.table import AcceptanceTable, load_table, save_table
from simkit.paths import cache_dir

# Bump when a change to the drafters or the builder changes table contents.
BUILD_VERSION = "acceptance-v1"


def requests_fingerprint(requests: Sequence) -> str:
    """sha256 over every request's prompt and output token ids (int32) and their lengths."""
    h = hashlib.sha256()
    h.update(str(len(requests)).encode())
    for r in requests:
        p = np.ascontiguousarray(r.prompt_ids, dtype=np.int32)
        o = np.ascontiguousarray(r.output_ids, dtype=np.int32)
        h.update(np.array([p.shape[0], o.shape[0]], np.int64).tobytes())
        h.update(p.tobytes())
        h.update(o.tobytes())
    return h.hexdigest()


def table_key(requests: Sequence, drafter: str, params: dict, kmax: int, ordering: str) -> str:
    spec = json.dumps({"v": BUILD_VERSION, "drafter": drafter, "params": params, "kmax": kmax,
                       "ordering": ordering}, sort_keys=True)
    return hashlib.sha256((requests_fingerprint(requests) + spec).encode()).hexdigest()[:32]


def cached_table(requests: Sequence, *, drafter: str = "suffix", params=None, kmax: int = 16,
                 ordering: str = "sequential", concurrency: int = 32, model: str = "",
                 corpus: str = "", progress: bool = False, use_cache: bool = True) -> AcceptanceTable:
    """The table for these requests, from the cache when present, else built (and stored)."""
    from simkit.acceptance.build import build_table
    from simkit.drafters.ngram import NgramParams
    from simkit.drafters.suffix import SuffixParams

    if params is None:
        params = SuffixParams() if drafter == "suffix" else NgramParams()
    pdict = params.as_dict()
    if ordering == "concurrent":
        pdict = {**pdict, "concurrency": concurrency}
    path = Path(cache_dir()) / "acceptance" / f"{drafter}-{table_key(requests, drafter, pdict, kmax, ordering)}.npz"
    if use_cache and path.is_file():
        table = load_table(path)
        table.model, table.corpus = model, corpus
        return table
    total = int(sum(len(r.output_ids) for r in requests))
    bar = _bar(progress)
    if bar is not None:
        bar.start()
        task = bar.add_task(f"acceptance table {model}/{corpus} ({drafter})", total=total)

        def step(n: int) -> None:
            bar.advance(task, n)
    else:
        step = None
    try:
        table = build_table(requests, drafter=drafter, params=params, kmax=kmax, ordering=ordering,
                            concurrency=concurrency, model=model, corpus=corpus, progress=step)
    finally:
        if bar is not None:
            bar.stop()
    if use_cache:
        save_table(table, path, compression="stored")
    return table


def _bar(enabled: bool):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=console, transient=True,
                    disable=not console.is_terminal)
