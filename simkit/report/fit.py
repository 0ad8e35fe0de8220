"""Text tables that fit a terminal: which columns fit in WIDTH characters, and the table that
prints them (drawn here, not by rich, so that a cell is never wrapped or cut).

The default text output of `simkit predict` and of the what-ifs is read on a terminal or pasted
into a ticket, so it fits WIDTH (100) columns; `--wide` prints every column at its natural width.
A column that does not fit is never cut or squeezed into wrapped digits: it is left out whole and
`more_columns_line` names it under the table, so nothing is dropped silently (JSON and CSV always
carry every column).
"""

from __future__ import annotations

import textwrap
from typing import Sequence

WIDTH = 100      # the default text output's width: every printed line is at most this long
SEP = 3          # " │ " between two columns
WIDE = 10_000   # --wide: no limit


def min_width(header: str, cells: Sequence[str]) -> int:
    """The narrowest a column can print: its widest cell (cells never wrap) or the longest word of
    its header (headers wrap at spaces)."""
    return max([len(c) for c in cells] + [len(w) for w in header.split()] + [1])


def fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH,
                priority: Sequence[int] | None = None) -> list[int]:
    """Indices (in table order) of the columns that fit `width`: taken in `priority` order (default:
    left to right) until the next one would not fit; the first one is always kept."""
    order = list(priority) if priority is not None else list(range(len(headers)))
    kept: list[int] = []
    used = 0
    for i in order:
        need = min_width(headers[i], [r[i] for r in rows]) + (SEP if kept else 0)
        if kept and used + need > width:
            break
        kept.append(i)
        used += need
    return sorted(kept)


def _lines_at(header: str, w: int) -> int:
    """Lines the header takes wrapped at its words into width w."""
    return len(textwrap.wrap(header, w, break_long_words=False)) or 1


def _balanced(header: str, w: int) -> int:
    """The narrowest width that wraps the header into as few lines as width w does, so its lines
    come out even ('output' / 'tok s', not 'output tok' / 's')."""
    n = _lines_at(header, w)
    return next(v for v in range(max(1, max(len(x) for x in header.split() or [""])), w + 1)
                if _lines_at(header, v) == n)


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Each column's printed width: its natural width (header or widest cell) while the table fits
    `width`; else headers wrap at their words into as few lines as the table allows (the fewest
    header lines D with which the columns fit), the widest headers narrowed first, none into more
    than D lines (fit_columns chose columns whose narrowest form fits)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    floors = [min_width(h, [r[i] for r in rows]) for i, h in enumerate(headers)]

    def over(ws: list[int]) -> bool:
        return sum(ws) + SEP * (len(ws) - 1) > width

    if not over(widths):
        return widths
    depth = max(_lines_at(h, f) for h, f in zip(headers, floors))
    for d in range(1, depth + 1):                    # the fewest header lines that fit
        mins = [next(w for w in range(f, n + 1) if _lines_at(h, w) <= d)
                for h, f, n in zip(headers, floors, widths)]
        if not over(mins):
            break
    while over(widths):
        slack = [i for i in range(len(widths)) if widths[i] > mins[i]]
        if not slack:
            break
        i = max(slack, key=lambda j: (widths[j], -j))          # the widest, leftmost on a tie
        lines = textwrap.wrap(headers[i], widths[i] - 1, break_long_words=False)
        widths[i] = max([mins[i]] + [len(ln) for ln in lines])
    return widths


def render_text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                      left: Sequence[str] = (), width: int = WIDTH) -> str:
    """The table as text, at most `width` wide when fit_columns chose its columns: a header block
    (headers wrapped at their words when they must, bottom-aligned), a rule, one line per row;
    cells never wrap. Columns whose header is in `left` are left-justified, the others right."""
    widths = column_widths(headers, rows, width)
    blocks = [textwrap.wrap(h, _balanced(h, w), break_long_words=False) or [""]
              for h, w in zip(headers, widths)]
    depth = max(len(b) for b in blocks)
    blocks = [[""] * (depth - len(b)) + b for b in blocks]

    def line(cells: Sequence[str], sep: str) -> str:
        return sep.join(c.ljust(w) if h in left else c.rjust(w)
                        for c, w, h in zip(cells, widths, headers)).rstrip()

    out = [line([b[k] for b in blocks], " ┃ ") for k in range(depth)]
    out.append("━╇━".join("━" * w for w in widths))
    out.extend(line(r, " │ ") for r in rows)
    return "\n".join(out) + "\n"


def keyed_table(keys: Sequence[str], cells: Sequence[Sequence[str]], left: Sequence[str] = (),
                wide: bool = False, first: Sequence[str] = ()) -> list[str]:
    """The lines of a table whose columns are named by JSON keys (the what-ifs', the fleet's):
    the columns that fit WIDTH, left to right, headers as words ('max_rate_per_replica' prints
    'max rate per replica'), then the line naming the keys left out; `wide`: every column, headers
    as the keys. `left`: the keys justified left; `first`: the keys kept first when not all fit
    (then the others, left to right)."""
    heads = list(keys) if wide else [k.replace("_", " ") for k in keys]
    order = [keys.index(k) for k in first if k in keys]
    order += [i for i in range(len(keys)) if i not in order]
    kept = list(range(len(keys))) if wide else fit_columns(heads, cells, WIDTH, order)
    table = render_text_table([heads[i] for i in kept], [[r[i] for i in kept] for r in cells],
                              left=[h for h, k in zip(heads, keys) if k in left],
                              width=WIDE if wide else WIDTH)
    return [*table.rstrip("\n").split("\n"),
            *more_columns_line([k for i, k in enumerate(keys) if i not in kept])]


def more_columns_line(left_out: Sequence[str], width: int = WIDTH) -> list[str]:
    """The lines under a table that name the columns left out (none: no line)."""
    if not left_out:
        return []
    n = len(left_out)
    text = (f"--wide shows {n} more column{'s' if n > 1 else ''}: {', '.join(left_out)} "
            "(--format json: every figure)")
    return textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False)


def wrap_prose(text: str, width: int = WIDTH, indent: str = "", hang: str = "  ") -> list[str]:
    """One paragraph of text output as lines of at most `width` characters: the first line starts
    with `indent`, the ones after with `hang`; a word (a path, a URL) longer than a whole line is
    split rather than left overlong."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=hang,
                         break_on_hyphens=False) or [indent.rstrip()]


def wrap_field(label: str, value: object, label_width: int, width: int = WIDTH) -> list[str]:
    """A 'label  value' line of a key-value listing, the value wrapped under itself (a hanging
    indent of `label_width`) so the labels stay one column."""
    return wrap_prose(str(value), width, indent=f"{label:{label_width}s}", hang=" " * label_width)


__all__ = ["SEP", "WIDE", "WIDTH", "fit_columns", "min_width", "more_columns_line",
           "column_widths", "keyed_table", "render_text_table", "wrap_field", "wrap_prose"]
