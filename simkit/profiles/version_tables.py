"""A profile's acceptance table for a vLLM version whose suffix method runs another drafter than
arctic's tree (0.34: the GPU speculator `suffix_gpu`), beside the profile's own tables.

Shipped as traces/profiles/<model>/<corpus>.<drafter>.npz (written by `simkit profiles build`
with the rest of the profile), or built from the raw traces for the profile's own sample under
its history: warm = the sampled requests' rows of a sequential replay of the whole corpus (the
ring holds every earlier response), cold = the sample replayed alone, hot / repeat:P = after
those responses were served. A profile that ships history tables (mix: cold, hot) ships the
drafter's too (<corpus>.<drafter>.history-<label>.npz, listed under <drafter>_history_tables).
Never token ids: a(t, K), d(t, K) only.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from simkit.acceptance.table import AcceptanceTable, load_table, save_table

def version_drafters() -> tuple[str, ...]:
    """The drafters a vLLM version runs for 'suffix' other than arctic's tree (0.34's
    suffix_gpu): their tables ride beside the profile."""
    from simkit.catalog.vllm_versions import VERSIONS
    from simkit.drafters.base import SUFFIX_DRAFTER

    names = {v.method("suffix").drafter for v in VERSIONS.values()} - {SUFFIX_DRAFTER}
    return tuple(sorted(names))


def table_path(npz: Path, drafter: str) -> Path:
    """<corpus>.<drafter>.npz beside the profile's suffix table <corpus>.npz."""
    return npz.with_name(f"{npz.stem}.{drafter}.npz")


def load_shipped_table(npz: Path, drafter: str) -> AcceptanceTable | None:
    """The shipped table of `drafter` beside the profile's suffix table, None when absent."""
    path = table_path(npz, drafter)
    return load_table(path) if path.is_file() else None


def write_table(npz: Path, drafter: str, table: AcceptanceTable) -> str:
    """Write the drafter's table beside the profile (bzip2, byte-stable); its sha256."""
    path = table_path(npz, drafter)
    save_table(table, path, compression="bzip2")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def history_key(drafter: str) -> str:
    """The provenance key listing the drafter's shipped history tables (like history_tables)."""
    return f"{drafter}_history_tables"


def write_history_tables_for(npz: Path, drafter: str, tables: dict) -> dict:
    """Write the drafter's tables under other histories beside its own table
    (<corpus>.<drafter>.history-<label>.npz); the provenance entries."""
    from simkit.profiles.shipped_histories import write_history_tables

    return write_history_tables(table_path(npz, drafter), tables)


def load_history_table_for(npz: Path, drafter: str, provenance: dict, history
                           ) -> AcceptanceTable | None:
    """The drafter's shipped table under `history`, None when the profile ships none."""
    from simkit.profiles.shipped_histories import load_history_table

    entries = provenance.get(history_key(drafter)) or {}
    return load_history_table(table_path(npz, drafter), {"history_tables": entries}, history)


def build_table_for(prof, drafter: str, kmax: int, progress: bool = False
                    ) -> AcceptanceTable | None:
    """The drafter's table for the profile's sample under its history, from the raw traces
    (simkit.acceptance.history_tables.cached_sample_table, cached by content); None when the
    profile does not record its sample."""
    from simkit.acceptance.history_tables import cached_sample_table
    from simkit.history import COLD
    from traces.corpora import load_corpus

    idx = [int(i) for i in (prof.provenance.get("sample_indices") or [])]
    if not idx:
        return None
    corp = load_corpus(prof.corpus, prof.model, progress=progress)
    return cached_sample_table(corp.requests, idx, prof.history or COLD, drafter=drafter,
                               kmax=kmax, model=prof.model, corpus=prof.corpus,
                               progress=progress)


def with_drafter_table(prof, drafter: str, kmax: int, progress: bool = False):
    """The profile with `drafter`'s table: as it is when it holds one, else built from the raw
    traces when they are here, else unchanged (the engine then says which table is missing)."""
    from simkit.paths import traces_src_dir

    if drafter in prof.tables or traces_src_dir() is None:
        return prof
    table = build_table_for(prof, drafter, kmax, progress)
    if table is None:
        return prof
    if not np.array_equal(table.output_len, prof.output_len):
        raise ValueError(f"{drafter} table of {prof.model}/{prof.corpus} does not match its "
                         "sample's output lengths")
    # what the table is, from the profile alone (the same bytes whichever way it was reached)
    table.provenance = {"profile": f"{prof.model}/{prof.corpus}", "drafter": drafter,
                        "history": prof.history.label if prof.history is not None else "cold",
                        "sample": "the profile's sample_indices, replayed from the raw traces",
                        "content": "uint8 a(t,K), d(t,K) per output position; no token ids"}
    return replace(prof, tables={**prof.tables, drafter: table})


__all__ = ["build_table_for", "history_key", "load_history_table_for", "version_drafters",
           "write_history_tables_for", "load_shipped_table", "table_path",
           "with_drafter_table", "write_table"]
