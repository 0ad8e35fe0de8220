"""Which interval a calibration ships: one sigma for every prediction, or the drift per runner
class; decided by a rule stated before either was scored, and both scored either way.

Both are made from the calibration's own fitted runs only (simkit.validation.spread.
rerun_interval); the held-out runs only score them. The rule:

    ship the per-runner interval only if it covers more held-out runs from the GPU sittings the
    fit never saw (other machines or days) than the one-sigma interval does, and vanilla's band
    (the async runner's) is no wider than the one-sigma band.

The first clause asks for the coverage a user on their own machine would see; the second keeps
the fix for the speculative configurations' host-speed drift from being paid for by vanilla.
Choosing between two candidates on the held-out runs lets those runs inform which one ships
(not its width): a coverage figure quoted beside it is that of the chosen one.
"""

from __future__ import annotations

from typing import Any

from simkit.validation.floor import ASYNC, SYNC
from simkit.validation.spread import class_sigma, half_width, interval, rerun_interval

RULE = ("the per-runner interval ships only if it covers more held-out runs from GPU sittings "
        "the fit never saw than the one-sigma interval, with vanilla's (async runner) band no "
        "wider than the one-sigma band")


def _inside(cells: list[dict[str, Any]], band: dict[str, Any]) -> dict[str, Any]:
    """How many cells measured inside their band (prediction x exp(+-z sigma of their class))."""
    n = 0
    for c in cells:
        lo_hi = interval(c["predicted_tok_s"], class_sigma(band, c.get("runner")))
        n += bool(lo_hi and lo_hi[0] <= c["measured_tok_s"] <= lo_hi[1])
    return {"inside": n, "runs": len(cells)}


def score(cells: list[dict[str, Any]], band: dict[str, Any], unseen: set[str]) -> dict[str, Any]:
    """One band's coverage of the held-out cells, of those from unseen sittings, per runner
    class, and its half-width per class (%)."""
    held = [c for c in cells if c["purpose"] == "validation"]
    far = [c for c in held if c["sitting"] in unseen]
    return {"held_out": _inside(held, band), "unseen_sittings": _inside(far, band),
            "unseen_sittings_by_runner": {r: _inside([c for c in far if c.get("runner") == r],
                                                     band) for r in (SYNC, ASYNC)},
            "half_width_pct": {r: round(100 * half_width(class_sigma(band, r)), 2)
                               for r in (SYNC, ASYNC) if class_sigma(band, r) is not None}}


def choose(cells: list[dict[str, Any]], runs, fitted_ids: set[str],
           sittings: dict[str, str]) -> tuple[bool, dict[str, Any]]:
    """(ship the per-runner interval?, both intervals' scores and the rule). `cells`: every
    calibration and validation run predicted with the calibration, each with its 'runner';
    `sittings`: run id -> GPU sitting (simkit.validation.sittings)."""
    cells = [{**c, "sitting": sittings[c["run_id"]]} for c in cells]
    unseen = {sittings[c["run_id"]] for c in cells} - {sittings[r] for r in fitted_ids
                                                       if r in sittings}
    single = score(cells, rerun_interval(cells, runs, fitted_ids), unseen)
    per = score(cells, rerun_interval(cells, runs, fitted_ids, by_runner=True), unseen)
    ship = (per["unseen_sittings"]["inside"] > single["unseen_sittings"]["inside"]
            and per["half_width_pct"].get(ASYNC, 0.0) <= single["half_width_pct"].get(ASYNC, 0.0))
    return ship, {"rule": RULE, "shipped": "by runner class" if ship else "one sigma",
                  "one_sigma": single, "by_runner": per,
                  "unseen_sittings": sorted(unseen)}


__all__ = ["RULE", "choose", "score"]
