"""The capacity search stops a rate's seeds once one misses a goal: the same rows as running
every seed (the printed figures are those of passing rates, which run every seed, and the
binding goal of the lowest failed rate is settled by its remaining seeds where a seed missed
only TPOT), in fewer simulations. tests/unit/test_search_reuse.py covers the settling."""

from __future__ import annotations

import math

from simkit.progress import tracking


def _rows(early: bool):
    from simkit.app.cells import load_cell
    from simkit.app.options import Goals, RunOptions
    from simkit.choices import ProfileSource
    from simkit.engine.config import parse_configs
    from simkit.whatif.capacity import max_sustainable_rates

    workload, cost = load_cell(RunOptions("llama-3.1-8b", "chat", source=ProfileSource.SHIPPED))
    with tracking(draw=False) as tracker:
        rows = max_sustainable_rates(workload, cost, parse_configs("vanilla,kpad:4"),
                                     Goals(ttft_ms_p99=60, tpot_ms_p99=15), seeds=3,
                                     min_requests=64, max_requests=3000, workers=1,
                                     rel_tol=0.2, early_stop=early)
    return rows, tracker.total


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_early_stop_gives_the_same_rows_in_fewer_simulations():
    (early, n_early), (full, n_full) = _rows(True), _rows(False)
    assert len(early) == len(full)
    for a, b in zip(early, full):
        assert a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a), (a, b)
    assert any(r["binding"] == "ttft" for r in full)
    assert n_early < n_full, (n_early, n_full)
