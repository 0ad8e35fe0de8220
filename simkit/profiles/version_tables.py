"""A profile's acceptance table for a vLLM version whose suffix method runs another drafter than
arctic's tree (0.34: the GPU speculator `suffix_gpu`), beside the profile's own tables.

Shipped as traces/profiles/<model>/<corpus>.<drafter>.npz (written by `simkit profiles build`
with the rest of the profile), or built from the raw traces for the profile's own sample under
its history: warm = the sampled requests' rows of a sequential replay of the whole corpus (the
ring holds every earlier response), cold = the sample replayed alone. Other histories are not
built (the prediction then says the table is missing). Never token ids: a(t, K), d(t, K) only.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from simkit.acceptance.table import AcceptanceTable, load_table, save_table
from simkit.choices import Ordering

BUILT_HISTORIES = ("warm", "cold")


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


def build_table_for(prof, drafter: str, kmax: int, progress: bool = False
                    ) -> AcceptanceTable | None:
    """The drafter's table for the profile's sample under its history, from the raw traces
    (cached by content); None when the history is one this does not build or the profile does
    not record its sample."""
    from simkit.acceptance.cache import load_or_build, store_dir, table_key
    from simkit.drafters.base import get_drafter
    from traces.corpora import load_corpus

    history = (prof.history.kind if prof.history is not None else "cold")
    idx = [int(i) for i in (prof.provenance.get("sample_indices") or [])]
    if history not in BUILT_HISTORIES or not idx:
        return None
    corp = load_corpus(prof.corpus, prof.model, progress=progress)
    impl = get_drafter(drafter)
    params = impl.default_params()
    chosen = [corp.requests[i] for i in idx]
    walked = corp.requests[:idx[-1] + 1] if history == "warm" else chosen
    spec = {**params.as_dict(), "history": history, "sample": idx}
    path = store_dir() / f"{drafter}-{history}-{table_key(walked, drafter, spec, kmax, Ordering.SEQUENTIAL)}"

    def build(step):
        from simkit.acceptance.build import build_table

        if history == "cold":
            return build_table(chosen, drafter=drafter, params=params, kmax=kmax,
                               model=prof.model, corpus=prof.corpus, progress=step)
        lens = np.array([len(r.output_ids) for r in chosen], np.int64)
        offsets = np.zeros(len(chosen) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        rowbase = np.full(len(walked), -1, np.int64)
        rowbase[idx] = offsets[:-1]
        acc = np.zeros((int(offsets[-1]), kmax), np.uint8)
        dr = np.zeros_like(acc)
        impl.replay_warm(walked, params, kmax, rowbase, acc, dr, step, None)
        return AcceptanceTable(
            model=prof.model, corpus=prof.corpus, drafter=drafter,
            params={**params.as_dict(), "history": "warm"}, kmax=kmax,
            ordering=Ordering.SEQUENTIAL,
            prompt_len=np.array([len(r.prompt_ids) for r in chosen], np.int32),
            output_len=lens.astype(np.int32), offsets=offsets, accepted=acc, drafted=dr)

    total = int(sum(len(r.output_ids) for r in walked))
    return load_or_build(path, build, total=total,
                         label=f"acceptance table {prof.model}/{prof.corpus} ({drafter})",
                         model=prof.model, corpus=prof.corpus, progress=progress, use_cache=True)


def with_drafter_table(prof, drafter: str, kmax: int, progress: bool = False):
    """The profile with `drafter`'s table: as it is when it holds one, else built from the raw
    traces when they are here (and the history is built), else unchanged (the engine then says
    which table is missing)."""
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


__all__ = ["BUILT_HISTORIES", "build_table_for", "load_shipped_table", "table_path",
           "with_drafter_table", "write_table"]
