"""A run kept under one cost model and priced again under another (simkit.engine.trajectory)
equals, float for float, the run simulated under the other: the claim validate's unseen-day
figures rest on when they reprice instead of simulating."""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_doubles import LinearCost, make_table, patterned_table
from simkit.block_hash import pack, prompt_block_hashes
from simkit.engine.config import EngineConfig, parse_configs
from simkit.engine.runner import repriced
from simkit.engine.sim import ClosedLoop, OpenLoop, simulate
from simkit.engine.workload import Workload

CONFIGS = {c.name: c for c in parse_configs(
    "vanilla,suffix:4,kpad:3,8,dynamic-feedback:2,5,dynamic-goodput:2,5,dynamic-table:2,5")}
PRICES_STEPS = {"dynamic-goodput-2.5", "dynamic-table-2.5"}


def _same(a: dict, b: dict) -> bool:
    """Equal figure for figure (NaN equal to NaN: a percentile over no value)."""
    return a.keys() == b.keys() and all(
        x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in ((a[k], b[k]) for k in a))


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 10))
    prompts = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**16))
    shared = draw(st.integers(0, 64))          # a common prompt header: prefix-cache hits
    tokens = [np.r_[np.arange(min(shared, p)), 1000 * (r + 1) + np.arange(p - min(shared, p))]
              for r, p in enumerate(prompts)]
    tab = patterned_table(prompts, outputs, seed)
    return Workload(np.asarray(prompts, np.int32), np.asarray(outputs, np.int32),
                    {"suffix": tab}, name="t",
                    block_hashes=pack(prompt_block_hashes(t) for t in tokens))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), name=st.sampled_from(sorted(CONFIGS)), conc=st.integers(1, 8),
       blocks=st.integers(12, 200), budget=st.sampled_from([32, 256, 8192]),
       seed=st.integers(0, 5), caching=st.booleans(), others=st.booleans())
def test_repriced_run_equals_the_run_simulated_under_the_new_cost(
        w, name, conc, blocks, budget, seed, caching, others):
    spec = CONFIGS[name]
    cfg = EngineConfig(kv_capacity_tokens=blocks * 16, max_num_batched_tokens=budget,
                       max_num_seqs=16, prefix_caching=caching)
    old = LinearCost(base_s=1e-3, per_token_s=1e-5)
    new = LinearCost(base_s=3.7e-3, per_token_s=2.3e-6, host_s=4.1e-4, piecewise_s=2e-4,
                     none_s=5e-4)
    kw = dict(load=ClosedLoop(conc), seed=seed, num_requests=3 * w.num_requests,
              window_start_completion=1, other_window_starts=(conc, 2) if others else ())
    kept = simulate(w, old, cfg, spec, capture=True, **kw)
    fresh = simulate(w, new, cfg, spec, **kw)
    if name in PRICES_STEPS:                     # its K choice reads step prices: never kept
        assert kept.trajectory is None
        return
    assert kept.trajectory is not None
    again = repriced(kept.trajectory, new)
    assert _same(again.metrics.to_dict(), fresh.metrics.to_dict())
    assert again.other_windows.keys() == fresh.other_windows.keys()
    for n in fresh.other_windows:
        assert _same(again.other_windows[n].to_dict(), fresh.other_windows[n].to_dict())
    assert again.prefix == fresh.prefix and again.skipped == fresh.skipped
    assert (again.config, again.k, again.num_requests) == (fresh.config, fresh.k,
                                                          fresh.num_requests)


def test_the_other_cost_model_moves_the_figures():
    """The equality above is no identity: the two cost models give other throughput."""
    w = Workload.from_table(make_table([50, 80], [30, 20], lambda r, t, k: 1, lambda r, t, k: 3))
    cfg = EngineConfig(kv_capacity_tokens=1 << 16)
    spec = CONFIGS["suffix-4"]
    kept = simulate(w, LinearCost(), cfg, spec, load=ClosedLoop(2), capture=True, num_requests=8)
    again = repriced(kept.trajectory, LinearCost(base_s=5e-3))
    assert again.metrics.output_tok_s < 0.5 * kept.metrics.output_tok_s
    assert again.metrics.steps == kept.metrics.steps


def test_open_loop_is_not_kept():
    """Open-loop arrivals read the clock: the run under another cost schedules other batches."""
    w = Workload.from_table(make_table([50, 80], [30, 20], lambda r, t, k: 1, lambda r, t, k: 3))
    res = simulate(w, LinearCost(), EngineConfig(), CONFIGS["vanilla"], load=OpenLoop(rate=50.0),
                   capture=True, num_requests=6)
    assert res.trajectory is None
