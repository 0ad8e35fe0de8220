"""History tables shipped beside a profile: the suffix acceptance table of the same sampled
requests under another request history (cold, hot), so that a machine without the raw traces can
predict that history too.

A history's table depends only on what the suffix tree held before the run
(`History.tree_label`: `,evicted` changes the prefix cache, not the tree), so `hot` and
`hot,evicted` read one file. The files sit beside the profile as `<corpus>.history-<label>.npz`
(bzip2, like the profile's own table) and the profile's provenance lists them under
`history_tables` with their sha256. Which corpora ship which histories is `shipped_histories`'s
rule: cold and hot for mix, the study's corpus, so that `--history cold|hot` and the reference
reproduction across histories run on a fresh machine; every other (corpus, history) needs the
raw traces, which keeps the shipped set small.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from simkit.acceptance.table import AcceptanceTable, load_table, save_table
from simkit.errors import InputError
from simkit.history import History, parse_history, split_histories

SHIPPED = {"mix": ("cold", "hot")}     # corpus -> histories `simkit profiles build` ships by default


def shipped_histories(corpus: str) -> tuple[str, ...]:
    """The histories a default build writes beside the corpus's profile (none for most corpora)."""
    return SHIPPED.get(corpus, ())


def parse_histories(text: str, corpus: str, own: History) -> tuple[History, ...]:
    """`--histories` of `simkit profiles build`: 'auto' (shipped_histories), 'none', or a comma
    list of histories; each reduced to what the suffix tree held (History.tree), the profile's
    own left out."""
    text = text.strip().lower()
    if text == "auto":
        asked = [parse_history(label) for label in shipped_histories(corpus)]
    elif text in ("", "none"):
        asked = []
    else:
        asked = split_histories(text)
    out: list[History] = []
    for h in asked:
        tree = h.tree
        if tree.kind == "warm":
            raise InputError("warm is a profile's own history (profiles build --history), not a history table",
                             field="histories")
        if tree.label != own.label and tree not in out:
            out.append(tree)
    return tuple(out)


def history_file(npz: Path, tree_label: str) -> Path:
    """Where the table of `tree_label` sits beside the profile table `npz`."""
    name = tree_label.replace(":", "-").replace(",", "_")
    return npz.with_name(f"{npz.stem}.history-{name}.npz")


def write_history_tables(npz: Path, tables: dict[str, AcceptanceTable]) -> dict:
    """Write each tree label's table beside `npz`, remove history files of this profile that are
    no longer in `tables` (written by an earlier build), and return the provenance entries."""
    keep = {history_file(npz, label) for label in tables}
    for old in npz.parent.glob(f"{npz.stem}.history-*.npz"):
        if old not in keep:
            old.unlink()
    entries = {}
    for label in sorted(tables):
        path = history_file(npz, label)
        save_table(tables[label], path, compression="bzip2")
        entries[label] = {"file": path.name,
                          "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    return entries


def load_history_table(npz: Path, provenance: dict, history: History) -> AcceptanceTable | None:
    """The shipped table of `history` beside the profile table `npz` (labelled with the full
    history, as a table built from the raw traces is), or None when the profile ships none."""
    entry = (provenance.get("history_tables") or {}).get(history.tree_label)
    if entry is None:
        return None
    path = npz.with_name(entry["file"])
    if not path.is_file():
        raise InputError("history table listed in the provenance is missing", path=str(path),
                         field="history_tables")
    table = load_table(path)
    if "history" in table.params:            # a repeat table: hot and hot,evicted share it
        table.params = {**table.params, "history": history.label}
    return table


__all__ = ["SHIPPED", "history_file", "load_history_table",
           "parse_histories", "shipped_histories", "write_history_tables"]
