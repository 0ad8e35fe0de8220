"""The columns of the prediction table: header, JSON/CSV key and meaning, read from the one list
of a row's fields (simkit.engine.summary.FIELDS).

The table prints the legend under itself (unless --no-legend), the HTML report prints it, and
docs/report.md repeats it; tests check that every printed column and every JSON key is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from simkit.engine.summary import FIELDS, PREFIX_FIELD


@dataclass(frozen=True)
class Column:
    """One table column: header as printed, the key in JSON/CSV, and what it means."""

    header: str
    key: str
    meaning: str


COLUMNS: tuple[Column, ...] = tuple(Column(f.header, f.key, f.meaning) for f in FIELDS
                                    if f.header is not None)

# printed (and in JSON/CSV) only when prefix caching is on, so that --no-prefix-caching gives the
# report exactly as it was before prefix caching was modelled
PREFIX_COLUMN = Column(str(PREFIX_FIELD.header), PREFIX_FIELD.key, PREFIX_FIELD.meaning)


def columns(prefix: bool = False) -> tuple[Column, ...]:
    """The table's columns; with the prefix-hit column when prefix caching is on."""
    return COLUMNS + (PREFIX_COLUMN,) if prefix else COLUMNS


# JSON/CSV keys that have no column of their own in the table
EXTRA_KEYS: dict[str, str] = {f.key: f.meaning for f in FIELDS
                              if f.header is None and f.group is not None}


# the config column on a vLLM whose decoding requests verify exactly K slots (0.34)
EXACT_K_CONFIG_MEANING = (
    "configuration: vanilla = no speculation; suffix = vLLM 0.34's GPU suffix speculator at its "
    "default K=8, suffix-K at K: every decoding request verifies exactly K slots, slots without a "
    "draft holding the last token (kpad:K is the same config); ktable-K1.K2.. = a K per "
    "batch-size range, taken from the batch size of the step before; suffix-av = suffix with "
    "adaptive verification (a slot budget per step); dynamic-* = one K per step "
    "from the K set, for the whole batch")


def _meaning(c: Column, exact_k: bool) -> str:
    return EXACT_K_CONFIG_MEANING if exact_k and c.key == "config" else c.meaning


def legend_lines(prefix: bool = False, shown: Sequence[Column] | None = None,
                 exact_k: bool = False) -> list[str]:
    """The legend as printed under the table: 'header  meaning' per column (of `shown`, the
    columns the table printed, when given; else of every column); `exact_k`: the config
    column as vLLM 0.34's configurations mean it."""
    cols = tuple(shown) if shown is not None else columns(prefix)
    width = max(len(c.header) for c in cols)
    return [f"{c.header:<{width}}  {_meaning(c, exact_k)}" for c in cols]


def key_meanings(prefix: bool = False, exact_k: bool = False) -> dict[str, str]:
    """JSON/CSV key -> meaning, for every key a result row carries."""
    out = {c.key: _meaning(c, exact_k) for c in COLUMNS}
    out.update(EXTRA_KEYS)
    if prefix:
        out[PREFIX_COLUMN.key] = PREFIX_COLUMN.meaning
    return out


__all__ = ["COLUMNS", "Column", "EXTRA_KEYS", "PREFIX_COLUMN", "columns", "key_meanings",
           "legend_lines"]
