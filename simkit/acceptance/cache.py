"""Acceptance tables cached on disk (simkit.paths.cache_dir()/acceptance), keyed by what decides them:
the request tokens themselves, the drafter and its parameters, kmax, the ordering and this code's version.

A cached table is a folder of plain .npy files plus meta.json, memory-mapped on reload (read-only
arrays), so a reload costs next to nothing whatever the table size."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from simkit.acceptance.table import _ARRAYS, _SOURCE_ARRAYS, AcceptanceTable
from simkit.choices import Ordering
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.paths import cache_dir

# Bump when a change to the drafters or the builder changes table contents.
BUILD_VERSION = "acceptance-v1"
# Folder of the cached tables under cache_dir(); changes with the stored layout (not the
# contents): tables here carry a content checksum in meta.json, verified on every load.
STORE = "acceptance-checked"
# Folder of the tables' build locks under cache_dir() (load_or_build), beside the store.
LOCKS = "acceptance-locks"


def store_dir() -> Path:
    """Where cached tables live (cache_dir()/STORE)."""
    return Path(cache_dir()) / STORE


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


def table_key(requests: Sequence, drafter: str, params: dict, kmax: int, ordering: Ordering) -> str:
    from simkit.drafters.base import get_drafter

    fields = {"v": BUILD_VERSION, "drafter": drafter, "params": params, "kmax": kmax,
              "ordering": ordering}
    if getattr(get_drafter(drafter), "emits_sources", False):
        fields["sources"] = 1        # its tables also hold each draft's source and match length
    spec = json.dumps(fields, sort_keys=True)
    return hashlib.sha256((requests_fingerprint(requests) + spec).encode()).hexdigest()[:32]


def cached_table(requests: Sequence, *, drafter: str = SUFFIX_DRAFTER, params=None, kmax: int = 16,
                 ordering: Ordering = Ordering.SEQUENTIAL, concurrency: int = 32, model: str = "",
                 corpus: str = "", progress: bool = False, use_cache: bool = True) -> AcceptanceTable:
    """The table for these requests, from the cache when present, else built (and stored)."""
    from simkit.acceptance.build import build_table
    from simkit.drafters.base import get_drafter

    if params is None:
        params = get_drafter(drafter).default_params()
    pdict = params.as_dict()
    if ordering == Ordering.CONCURRENT:
        pdict = {**pdict, "concurrency": concurrency}
    path = store_dir() / f"{drafter}-{table_key(requests, drafter, pdict, kmax, ordering)}"
    total = int(sum(len(r.output_ids) for r in requests))

    def build(step):
        return build_table(requests, drafter=drafter, params=params, kmax=kmax, ordering=ordering,
                           concurrency=concurrency, model=model, corpus=corpus, progress=step)

    return load_or_build(path, build, total=total, label=f"acceptance table {model}/{corpus} ({drafter})",
                          model=model, corpus=corpus, progress=progress, use_cache=use_cache)


def load_or_build(path: Path, build, *, total: int, label: str, model: str, corpus: str,
                  progress: bool, use_cache: bool) -> AcceptanceTable:
    """The cached table at `path` when complete, else build(step) under a progress bar, stored
    (the one cache path of every table builder: cached_table, the warm and history tables).
    A build holds the table's lock (build_lock): a process that needs the same table meanwhile
    (validate's workers, two commands at once) waits for it and loads it instead of building it
    a second time."""
    if not use_cache:
        return _load_or_build(path, build, total=total, label=label, model=model,
                              corpus=corpus, progress=progress, use_cache=False)
    table = _load(path, model, corpus)
    if table is not None:
        return table
    with build_lock(path):
        return _load_or_build(path, build, total=total, label=label, model=model,
                              corpus=corpus, progress=progress, use_cache=True)


def build_lock(path: Path):
    """An exclusive lock on building the table at `path` (a file under cache_dir()/LOCKS, kept:
    removing a lock file others may be waiting on would let two builds run); where the file
    system has no locks, nothing is held (the store's atomic rename keeps the cache whole)."""
    from simkit.filelock import exclusive

    def lock_file() -> str:
        folder = Path(cache_dir()) / LOCKS
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"{path.name}.lock")

    return exclusive(lock_file)


def _load(path: Path, model: str, corpus: str) -> AcceptanceTable | None:
    """The complete cached table at `path`, or None (a damaged one is named and removed)."""
    if path.exists():
        from simkit.cachecheck import DamagedCache, discard

        try:
            table = load_cached(path)
        except DamagedCache as exc:      # named, removed, rebuilt by the caller from the requests
            discard(exc)
        else:
            table.model, table.corpus = model, corpus
            return table
    return None


def _load_or_build(path: Path, build, *, total: int, label: str, model: str, corpus: str,
                   progress: bool, use_cache: bool) -> AcceptanceTable:
    """load_or_build's work, under the table's lock: the table when another process stored it
    meanwhile, else built and stored."""
    table = _load(path, model, corpus) if use_cache else None
    if table is not None:
        return table
    from simkit.progress import current, phase

    bar = _bar(progress)
    step = None
    if bar is not None:
        bar.start()
        task = bar.add_task(label, total=total)

        def step(n: int) -> None:
            bar.advance(task, n)
    try:
        with phase(label, total, "output tokens") as told:
            if current() is not None:              # the command's tracker counts them too
                own = step

                def step(n: int) -> None:
                    told(n)
                    if own is not None:
                        own(n)
            table = build(step)
    finally:
        if bar is not None:
            bar.stop()
    if use_cache:
        save_cached(table, path)
    return table


def warm_path(requests: Sequence, sample: Sequence[int], params, kmax: int,
              drafter: str = SUFFIX_DRAFTER) -> Path:
    """Where cached_warm_table keeps the warm table of `sample` (the drafter's `params`)."""
    spec = {**params.as_dict(), "tree": "warm", "sample": [int(i) for i in sample]}
    return store_dir() / f"{drafter}-warm-{table_key(requests, drafter, spec, kmax, Ordering.SEQUENTIAL)}"


def cached_warm_table(requests: Sequence, sample: Sequence[int], *, params=None, kmax: int = 16,
                      model: str = "", corpus: str = "", progress: bool = False,
                      use_cache: bool = True, whole: AcceptanceTable | None = None,
                      drafter: str = SUFFIX_DRAFTER) -> AcceptanceTable:
    """build_warm_table(requests, sample) from the cache when present, else built (and stored).

    Key: every request's tokens (the whole corpus decides the tree), the sample indices, the suffix
    parameters, kmax and BUILD_VERSION. `whole`: the warm table of EVERY request (same params,
    kmax), already in memory: the sample's rows are taken from it (they are the rows a replay
    gives) instead of replaying."""
    from simkit.acceptance.build import build_warm_table
    from simkit.drafters.base import get_drafter

    params = params or get_drafter(drafter).default_params()
    idx = [int(i) for i in sample]
    path = warm_path(requests, idx, params, kmax, drafter)
    total = int(sum(len(requests[i].output_ids) for i in range(idx[-1] + 1))) if idx else 0

    def build(step):
        if whole is not None:
            from simkit.acceptance.table import take_requests

            if whole.num_requests != len(requests) or whole.kmax != kmax:
                raise ValueError("whole must be the warm table of every request at this kmax")
            table = take_requests(whole, idx)
            table.params = {**params.as_dict(), "tree": "warm"}
            return table
        return build_warm_table(requests, idx, params=params, kmax=kmax, model=model, corpus=corpus,
                                progress=step, drafter=drafter)

    return load_or_build(path, build, total=total, label=f"warm acceptance table {model}/{corpus}",
                          model=model, corpus=corpus, progress=progress, use_cache=use_cache)


def save_cached(table: AcceptanceTable, path: Path) -> None:
    """Write the table as a folder of .npy files + meta.json (atomic rename of a temp folder);
    meta.json holds the content checksum of the arrays (simkit.cachecheck)."""
    import os
    import shutil

    from simkit.cachecheck import content_digest

    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        names = table.array_names()
        for name in names:
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(table, name)),
                    allow_pickle=False)
        meta = {"model": table.model, "corpus": table.corpus, "drafter": table.drafter,
                "params": table.params, "kmax": table.kmax, "ordering": table.ordering,
                "content_sha256": content_digest({n: getattr(table, n) for n in names})}
        if table.has_sources:
            meta["sources"] = True
        (tmp / "meta.json").write_text(json.dumps(meta, sort_keys=True))   # last: marks complete
    except BaseException:                # Ctrl-C or a full disk: leave no half folder behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, path)
    except OSError:                      # another process stored the same table first
        shutil.rmtree(tmp, ignore_errors=True)


def load_cached(path: Path) -> AcceptanceTable:
    """Memory-map a table written by save_cached; simkit.cachecheck.DamagedCache (naming the
    folder) when a file is missing, unreadable, or the arrays do not match meta.json's checksum."""
    from simkit.cachecheck import DamagedCache, verify

    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text())
        names = _ARRAYS + (_SOURCE_ARRAYS if meta.get("sources") else ())
        arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False)
                  for name in names}
        table = AcceptanceTable(model=meta["model"], corpus=meta["corpus"],
                                drafter=meta["drafter"], params=meta["params"],
                                kmax=int(meta["kmax"]), ordering=meta["ordering"], **arrays)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise DamagedCache(path, f"unreadable: {type(exc).__name__}: {exc}") from None
    verify(path, arrays, meta.get("content_sha256"))
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
