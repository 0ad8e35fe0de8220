"""Per-position acceptance tables: a(t, K) and d(t, K) for every request, position and K."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simkit.choices import Ordering


@dataclass
class AcceptanceTable:
    """Accepted and drafted lengths at every output position, for K = 1..kmax, of one corpus.

    Row `offsets[r] + t` belongs to request r when t output tokens are already known (the first
    output token comes from the prefill step, so a decode step starts at t >= 1). Column k-1 holds
    K = k: `drafted` = d(t, K) tokens proposed (0..K), `accepted` = a(t, K) <= d(t, K) tokens equal to
    the real output[t:t+a]. A step at t advances the request by a + 1 (the bonus/recovered token).
    Optional, from drafters that record them (suffix_gpu; None otherwise and in older files):
    `source` = the draft's source at (t, K) (0 own history, 1 corpus) and `match_len` = its match
    length (capped at 255), which key vLLM 0.34's adaptive-verification confidences.
    """

    model: str
    corpus: str
    drafter: str
    params: dict
    kmax: int
    ordering: Ordering                  # how the replay interleaved the requests
    prompt_len: np.ndarray              # (n_req,) int32
    output_len: np.ndarray              # (n_req,) int32
    offsets: np.ndarray                 # (n_req + 1,) int64 into the row axis
    accepted: np.ndarray                # (rows, kmax) uint8
    drafted: np.ndarray                 # (rows, kmax) uint8
    provenance: dict = field(default_factory=dict)
    source: np.ndarray | None = None    # (rows, kmax) uint8, or None
    match_len: np.ndarray | None = None  # (rows, kmax) uint8, or None

    def __post_init__(self) -> None:
        self.ordering = Ordering(self.ordering)     # text (a file's meta, a caller) as the member

    @property
    def has_sources(self) -> bool:
        """True when the table records each draft's source and match length."""
        return self.source is not None and self.match_len is not None

    def array_names(self) -> tuple[str, ...]:
        """The arrays the table holds (the optional source arrays only when present)."""
        return _ARRAYS + (_SOURCE_ARRAYS if self.has_sources else ())

    @property
    def num_requests(self) -> int:
        return int(self.prompt_len.shape[0])

    def row(self, request: int, t: int) -> int:
        """Row index of request `request` at output position t."""
        return int(self.offsets[request]) + t


def take_requests(table: AcceptanceTable, requests) -> AcceptanceTable:
    """The table of the given requests only (in that order): their rows, re-based offsets."""
    idx = np.asarray(requests, np.int64)
    offs = np.asarray(table.offsets, np.int64)
    lens = offs[idx + 1] - offs[idx]
    new_offs = np.zeros(idx.size + 1, np.int64)
    np.cumsum(lens, out=new_offs[1:])
    rows = np.repeat(offs[idx] - new_offs[:-1], lens) + np.arange(int(new_offs[-1]), dtype=np.int64)
    extra = ({"source": np.asarray(table.source)[rows], "match_len": np.asarray(table.match_len)[rows]}
             if table.has_sources else {})
    return AcceptanceTable(model=table.model, corpus=table.corpus, drafter=table.drafter,
                           params=dict(table.params), kmax=table.kmax, ordering=table.ordering,
                           prompt_len=np.asarray(table.prompt_len)[idx].copy(),
                           output_len=np.asarray(table.output_len)[idx].copy(), offsets=new_offs,
                           accepted=np.asarray(table.accepted)[rows], drafted=np.asarray(table.drafted)[rows],
                           **extra)


# -- deterministic npz I/O ------------------------------------------------------------------------
_ARRAYS = ("prompt_len", "output_len", "offsets", "accepted", "drafted")
_SOURCE_ARRAYS = ("source", "match_len")        # optional: written only when the table has them
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def save_table(table: AcceptanceTable, path, *, compression: str = "deflate") -> None:
    """Write `table` as an .npz whose bytes depend only on its content (fixed zip times and order).

    compression: "deflate", "bzip2" (smallest; for shipped profiles) or "stored" (fastest reload).
    """
    import json
    import os
    import zipfile
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"model": table.model, "corpus": table.corpus, "drafter": table.drafter,
            "params": table.params, "kmax": table.kmax, "ordering": table.ordering,
            "provenance": table.provenance}
    entries = [(name + ".npy", _npy_bytes(getattr(table, name))) for name in table.array_names()]
    entries.append(("meta.json", json.dumps(meta, sort_keys=True).encode()))
    kinds = {"deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2, "stored": zipfile.ZIP_STORED}
    if compression not in kinds:
        raise ValueError(f"compression must be one of {sorted(kinds)}")
    kind = kinds[compression]
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = kind
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, compress_type=kind,
                        compresslevel=None if kind == zipfile.ZIP_STORED else 9)
    os.replace(tmp, path)


def load_table(path) -> AcceptanceTable:
    """Read a table written by save_table; raises simkit.errors.InputError naming the file if broken."""
    import json
    import zipfile

    from simkit.errors import InputError

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in _ARRAYS}
            if all(name in z.files for name in _SOURCE_ARRAYS):
                arrays.update({name: z[name] for name in _SOURCE_ARRAYS})
        with zipfile.ZipFile(path) as zf:
            meta = json.loads(zf.read("meta.json"))
        table = AcceptanceTable(model=meta["model"], corpus=meta["corpus"],
                                drafter=meta["drafter"], params=meta["params"],
                                kmax=int(meta["kmax"]), ordering=meta["ordering"],
                                provenance=meta.get("provenance", {}), **arrays)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"not a readable acceptance table ({exc})", path=str(path)) from exc
    rows = int(table.offsets[-1]) if len(table.offsets) else 0
    if table.accepted.shape != (rows, table.kmax) or table.drafted.shape != (rows, table.kmax):
        raise InputError("row count does not match offsets", path=str(path), field="accepted")
    for name in _SOURCE_ARRAYS if table.has_sources else ():
        if getattr(table, name).shape != (rows, table.kmax):
            raise InputError("row count does not match offsets", path=str(path), field=name)
    return table
