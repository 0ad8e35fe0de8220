"""Capped outputs: how the engine replays requests whose trace output stopped at a generation cap.

Our traces were generated with max_tokens 2,000-4,096 (a 1,000-token cap for the truncated
R1-distill traces); the study served with 8,192. A request whose output hit its source's cap
(traces/caps.py; the profile lists them in provenance `capped_sample`) would have gone on under
the study's limit. Two explicit treatments (`--capped-outputs`):

keep (default)
    The request ends where the trace ends, as every earlier release did (figures unchanged).

extend
    A capped request continues to max_tokens (then max_model_len clips it as for any request),
    repeating its own acceptance pattern. With L its trace length and M = min(kmax, L // 2),
    rows t < L - M keep their measured a(t, K), d(t, K); the last M rows are dropped (there a
    draft is cut short by the end of the text, an artefact of the cap, not of the model); the
    rows from t = L - M to max_tokens - 1 repeat, cyclically, the window of its last measured
    rows [s, L - M) with s = max(1, L - M - TAIL_WINDOW). A looping output keeps looping (its
    tail accepts long drafts, so does its continuation); a long reasoning trace cut by the cap
    keeps its late-trace acceptance. The continuation's tokens are not inserted into the global
    suffix tree (other requests' tables are the measured ones): an approximation, stated in
    docs/engine.md.

The transformation happens on the Workload before the scheduler sees it; the step loop is
unchanged.
"""

from __future__ import annotations

import numpy as np

from simkit.acceptance.table import AcceptanceTable
from simkit.choices import CappedMode, member
from simkit.engine.workload import Workload
from simkit.errors import InputError

TAIL_WINDOW = 512   # tokens of a capped request's own tail that its continuation repeats


def check_mode(mode: str) -> CappedMode:
    """`mode` as a CappedMode (keep or extend), else an InputError naming the option."""
    return member(CappedMode, mode, "capped-outputs mode", "capped-outputs")


def capped_positions(workload: Workload) -> list[int] | None:
    """Positions (workload request indices) whose outputs hit their source's cap, from the
    profile's provenance; None when the profile predates the field (built before caps existed)."""
    got = workload.provenance.get("capped_sample")
    if got is None:
        return None
    return [int(i) for i in got]


def _extend_table(tab: AcceptanceTable, new_len: np.ndarray, capped: set[int]) -> AcceptanceTable:
    """A copy of `tab` whose capped requests' rows run to new_len, per the module rule."""
    acc_parts, dr_parts = [], []
    offsets = np.zeros(tab.num_requests + 1, np.int64)
    for r in range(tab.num_requests):
        lo, hi = int(tab.offsets[r]), int(tab.offsets[r + 1])
        length = hi - lo
        if r in capped and int(new_len[r]) > length:
            keep_to = length - min(tab.kmax, length // 2)
            start = max(1, keep_to - TAIL_WINDOW)
            if keep_to <= start:                 # nothing to repeat (a tiny capped output)
                acc_parts.append(tab.accepted[lo:hi])
                dr_parts.append(tab.drafted[lo:hi])
                offsets[r + 1] = offsets[r] + length
                continue
            cyc = start + (np.arange(int(new_len[r]) - keep_to) % (keep_to - start))
            idx = np.concatenate([np.arange(keep_to), cyc]) + lo
            acc_parts.append(tab.accepted[idx])
            dr_parts.append(tab.drafted[idx])
            offsets[r + 1] = offsets[r] + idx.size
        else:
            acc_parts.append(tab.accepted[lo:hi])
            dr_parts.append(tab.drafted[lo:hi])
            offsets[r + 1] = offsets[r] + length
    out_len = np.diff(offsets).astype(np.int32)
    return AcceptanceTable(tab.model, tab.corpus, tab.drafter, dict(tab.params), tab.kmax,
                           tab.ordering, np.asarray(tab.prompt_len, np.int32), out_len, offsets,
                           np.concatenate(acc_parts), np.concatenate(dr_parts),
                           dict(tab.provenance))


def extend_capped(workload: Workload, max_tokens: int) -> Workload:
    """The workload with every capped request continued to max_tokens (module docstring)."""
    positions = capped_positions(workload)
    if positions is None:
        raise InputError(f"the profile of {workload.name or 'this workload'} predates the capped-"
                         "output record (provenance field capped_sample); rebuild it with "
                         "`simkit profiles build` or use --capped-outputs keep",
                         field="capped-outputs")
    capped = set(positions)
    new_len = np.asarray(workload.output_len, np.int64).copy()
    for r in capped:
        new_len[r] = max(int(new_len[r]), int(max_tokens))
    tables = {name: _extend_table(tab, new_len, capped) for name, tab in workload.tables.items()}
    out_len = (next(iter(tables.values())).output_len.copy() if tables
               else new_len.astype(np.int32))
    prov = dict(workload.provenance)
    prov["capped_outputs"] = CappedMode.EXTEND
    # prompts are unchanged, so their block hashes carry over (dropping them used to turn
    # prefix caching off silently under extend, even on a corpus with no capped request)
    return Workload(np.asarray(workload.prompt_len, np.int32).copy(), out_len, tables,
                    name=workload.name, proxy_note=workload.proxy_note, origin=workload.origin,
                    provenance=prov, block_hashes=workload.block_hashes,
                    weights=workload.weights, history=workload.history)


def apply_capped_outputs(workload: Workload, mode: str, max_tokens: int) -> Workload:
    """keep: the workload itself (unchanged object, so keep is byte-identical to before);
    extend: extend_capped(workload, max_tokens)."""
    if check_mode(mode) is CappedMode.KEEP:
        return workload
    return extend_capped(workload, max_tokens)


def describe(mode: str, workload: Workload, max_tokens: int) -> str:
    """One sentence for the report's assumptions block."""
    positions = capped_positions(workload)
    n = workload.num_requests
    caps = workload.provenance.get("output_caps") or {}
    where = ", ".join(f"{s} {c['tokens']:,}" for s, c in sorted(caps.items()) if c)
    unknown = ", ".join(sorted(src for src, c in caps.items() if not c))
    share = ""
    if positions is not None and workload.weights is not None:
        w = workload.weights
        share = f" (weighted: {w[positions].sum() / w.sum():.1%} of the corpus's requests)"
    counted = (f"{len(positions)} of the {n} requests{share} stopped at their source's "
               "generation cap" + (f" ({where})" if where else "")
               + (f"; no cap is known for {unknown}, whose requests are never counted"
                  if unknown else "")) if positions is not None else \
        "which requests hit a generation cap is not recorded in this profile"
    if mode == CappedMode.KEEP:
        return (f"keep: {counted}; capped requests end where the trace ends, so their real "
                f"lengths under max_tokens {max_tokens:,} are understated (--capped-outputs "
                "extend continues them)")
    return (f"extend: {counted}; each capped request continues to max_tokens {max_tokens:,} "
            f"repeating the acceptance of its last {TAIL_WINDOW} measured positions "
            "(docs/engine.md)")
