"""What the engine replays: request lengths plus per-position acceptance tables, per drafter.

The engine reads a(t, K) and d(t, K) as flat Python lists per (drafter, K) column, because list
indexing in the step loop is several times faster than indexing NumPy arrays element by element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.drafters.base import NO_DRAFTER
from simkit.history import History


def check_weights(weights, n: int) -> np.ndarray | None:
    """Per-request weights as float64 (None stays None); InputError unless n finite values > 0."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.isfinite(w).all() or (w <= 0).any():
        from simkit.errors import InputError

        raise InputError(f"request weights must be {n} finite values > 0 (got shape {w.shape})",
                         field="weights")
    return w


class DrafterUnavailable(LookupError):
    """The workload has no acceptance table for the drafter a config needs."""


@dataclass
class Workload:
    """Requests (prompt/output lengths) and their acceptance tables keyed by drafter name."""

    prompt_len: np.ndarray
    output_len: np.ndarray
    tables: dict[str, AcceptanceTable]
    name: str = ""
    proxy_note: str = ""
    origin: str = ""
    # the profile's provenance (sample, sources, output caps); the request history is the
    # `history` field below, never read from here
    provenance: dict = field(default_factory=dict)
    # prompt block hashes (simkit.block_hash, CSR: flat uint64 + int64 offsets, n+1);
    # None when the source has none (old shipped profiles): prefix caching cannot be modelled
    block_hashes: tuple[np.ndarray, np.ndarray] | None = None
    # how many corpus requests each request stands for (a stratified profile sample: inverse
    # inclusion probability; simkit.profiles.corpus_profile); None = each stands for itself (equal draws)
    weights: np.ndarray | None = None
    # drafter name -> a factory of a fresh drafter the engine drives step by step (drafting on the
    # simulated trajectory instead of reading the table; simkit.drafters.suffix.in_loop). Needs
    # the requests' token ids, so only workloads built from them in memory have one.
    in_loop: dict = field(default_factory=dict, repr=False)
    # the request history the tables assume (simkit.history): the engine preloads a repeat
    # history's prompts into the prefix cache; None = not known (a measured run's own requests)
    history: History | None = None
    _columns: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_table(cls, table: AcceptanceTable, **kw) -> "Workload":
        """A workload of one drafter's table (its requests' lengths)."""
        return cls(np.asarray(table.prompt_len, np.int32), np.asarray(table.output_len, np.int32),
                   {table.drafter: table}, **kw)

    @classmethod
    def from_profile(cls, profile) -> "Workload":
        """Build from a simkit.profiles.corpus_profile CorpusProfile (.table, optional .tables for other drafters)."""
        tables: dict[str, AcceptanceTable] = {}
        extra = getattr(profile, "tables", None) or {}
        for key, tab in dict(extra).items():
            tables[str(key)] = tab
        main = getattr(profile, "table", None)
        if main is not None:
            tables.setdefault(main.drafter, main)
        name = f"{getattr(profile, 'model', '')}/{getattr(profile, 'corpus', '')}".strip("/")
        return cls(np.asarray(profile.prompt_len, np.int32), np.asarray(profile.output_len, np.int32),
                   tables, name=name, proxy_note=getattr(profile, "proxy_note", "") or "",
                   origin=getattr(profile, "origin", "") or "",
                   provenance=dict(getattr(profile, "provenance", None) or {}),
                   block_hashes=getattr(profile, "block_hashes", None),
                   weights=check_weights(getattr(profile, "weights", None), len(profile.prompt_len)),
                   history=getattr(profile, "history", None))

    @property
    def num_requests(self) -> int:
        """Requests in the workload."""
        return int(self.prompt_len.shape[0])

    def has_drafter(self, drafter: str) -> bool:
        """True when the workload has `drafter`'s acceptance table or in-loop drafter (vanilla
        needs neither)."""
        return drafter == NO_DRAFTER or drafter in self.tables or drafter in self.in_loop

    def table(self, drafter: str) -> AcceptanceTable:
        """`drafter`'s acceptance table; DrafterUnavailable naming the ones it has otherwise."""
        if drafter not in self.tables:
            raise DrafterUnavailable(
                f"{drafter} is unavailable for {self.name or 'this workload'}: it has only "
                f"{', '.join(sorted(self.tables)) or 'no'} acceptance tables")
        return self.tables[drafter]

    def effective_k(self, drafter: str, k: int) -> int:
        """The table column used for K: K itself, or kmax when K exceeds the table.

        Under vLLM's suffix defaults (tree depth 24, spec factor 1.0) a draft never exceeds 12
        tokens (d <= match length and match + d <= 24), so columns above 12 are identical and
        K=24 reads the kmax column exactly when kmax >= 12.
        """
        return min(k, self.table(drafter).kmax)

    def columns(self, drafter: str, k: int) -> tuple[list[int], list[int], list[int]]:
        """(accepted, drafted, offsets) as Python lists for one K column (cached)."""
        kk = self.effective_k(drafter, k)
        key = (drafter, kk)
        if key not in self._columns:
            tab = self.table(drafter)
            self._columns[key] = (tab.accepted[:, kk - 1].tolist(), tab.drafted[:, kk - 1].tolist(),
                                  np.asarray(tab.offsets, np.int64).tolist())
        return self._columns[key]

    def sources(self, drafter: str, k: int) -> tuple[list[int], list[int]]:
        """(draft source, match length) as Python lists for one K column (cached): what
        adaptive verification keys its confidences by. DrafterUnavailable when the table does
        not record them (a drafter that has none, or a table built before they were kept)."""
        kk = self.effective_k(drafter, k)
        key = ("sources", drafter, kk)
        if key not in self._columns:
            tab = self.table(drafter)
            if not tab.has_sources:
                raise DrafterUnavailable(
                    f"adaptive verification needs each draft's source and match length, which "
                    f"the {drafter} acceptance table of {self.name or 'this workload'} does not "
                    f"record (a table built before they were kept: rebuild it with `simkit profiles build`)")
            self._columns[key] = (tab.source[:, kk - 1].tolist(), tab.match_len[:, kk - 1].tolist())
        return self._columns[key]

    def hash_chains(self) -> list[list[int]] | None:
        """Per-request prompt block hashes as Python int lists (cached), or None when unknown."""
        if self.block_hashes is None:
            return None
        if "_chains" not in self._columns:
            from simkit.block_hash import unpack

            flat, offs = self.block_hashes
            if len(offs) != self.num_requests + 1:
                from simkit.errors import InputError

                raise InputError(f"{len(offs) - 1} hash chains for {self.num_requests} requests",
                                 field="block_hashes")
            self._columns["_chains"] = unpack(flat, offs)
        return self._columns["_chains"]

    def shared_blocks(self) -> list[int] | None:
        """Per request, how many leading prompt blocks it shares with at least one OTHER request
        of the workload (chained hashes: equal at block i = equal prefix to its end), i.e. the
        longest prefix common with another prompt (template header, shared system prompt)."""
        chains = self.hash_chains()
        if chains is None:
            return None
        if "_shared" not in self._columns:
            owners: dict[int, int] = {}
            for chain in chains:
                for h in set(chain):
                    owners[h] = owners.get(h, 0) + 1
            out = []
            for chain in chains:
                n = 0
                while n < len(chain) and owners[chain[n]] > 1:
                    n += 1
                out.append(n)
            self._columns["_shared"] = out
        return self._columns["_shared"]

    def offsets(self) -> list[int]:
        """Row offsets of the tables (all tables share the request order)."""
        if not self.tables:                  # rows as a table over these outputs would have
            return [0] + np.cumsum(self.output_len, dtype=np.int64).tolist()
        return np.asarray(next(iter(self.tables.values())).offsets, np.int64).tolist()
