"""The step terms (what a step holds beyond per-step sums): host dispatch of PIECEWISE/eager
forwards, the async runner's own host coefficients, the front-end per prefilling request and the
device per prefill token. Absent from a calibration they change nothing; present they price
exactly what docs/costmodel.md says, and the fitter recovers them from records drawn with them."""

import dataclasses

import pytest

from simkit.costmodel import CostModel, load_cost_model
from simkit.costmodel.batch import BatchDescriptor, GraphMode
from simkit.costmodel.coefficients import Coefficients
from simkit.errors import InputError

BASE = load_cost_model("llama-3.1-8b", "h200", tp=1, calibration="analytic")
TERMS = dataclasses.replace(
    Coefficients(), dispatch_piecewise_s=200e-6, dispatch_none_s=400e-6, dispatch_token_s=0.2e-6,
    frontend_prefill_s=10e-6, prefill_token_s=4e-6,
    async_runner=(("dispatch_piecewise_s", 250e-6), ("prep_step_s", 1.1e-3), ("update_step_s", 80e-6)))


def cm(coefs: Coefficients) -> CostModel:
    return CostModel(BASE.model, BASE.hw, BASE.tp, coefs, "test")


def batch(mode=GraphMode.PIECEWISE, async_=True, reqs=32, prefill=0, k=0):
    tokens = reqs * (1 + k) + prefill
    return BatchDescriptor(reqs, tokens, tokens, prefill, 1 if prefill else 0, reqs - (1 if prefill else 0),
                           reqs * k, 0, reqs if k else 0, reqs * 600 + prefill, mode, async_,
                           "suffix" if k else "none")


def test_absent_terms_and_a_runner_set_equal_to_the_shared_one_change_no_float():
    shared = Coefficients()
    same = dataclasses.replace(shared, async_runner=tuple((n, getattr(shared, n))
                                                          for n in ("prep_step_s", "sched_req_s")))
    for b in (batch(), batch(GraphMode.FULL), batch(GraphMode.NONE, False, prefill=900, k=4)):
        assert cm(shared).step_cost(b) == cm(same).step_cost(b)
        assert cm(shared).dispatch_time(b) == 0.0
    assert "dispatch_piecewise_s" not in shared.to_dict() and "async_runner" not in shared.to_dict()


def test_dispatch_is_host_work_on_the_async_path_and_a_floor_under_the_sync_forward():
    m = cm(TERMS)
    b = batch(GraphMode.PIECEWISE, async_=True)
    issue = m.dispatch_time(b)
    assert issue == pytest.approx(32 * (250e-6 + 0.2e-6 * 32))     # the async runner's own value
    host = m.host_time(b)
    assert m.step_cost(b).step_s == pytest.approx(
        max(m.device_time(b), host.schedule + host.prepare + host.sample + host.update + issue)
        + host.draft + TERMS.async_serial_s)
    assert m.dispatch_time(dataclasses.replace(b, graph_mode=GraphMode.FULL)) == 0.0
    s = batch(GraphMode.PIECEWISE, async_=False, reqs=2)
    assert m.dispatch_time(s) == pytest.approx(32 * (200e-6 + 0.2e-6 * 2))
    assert m.step_cost(s).step_s == pytest.approx(max(m.device_time(s), m.dispatch_time(s))
                                                  + m.host_time(s).total)


def test_the_async_runner_coefficients_price_only_async_steps():
    m = cm(TERMS)
    assert m.host_time(batch(async_=True)).prepare == pytest.approx(
        1.1e-3 + TERMS.prep_req_s * 32 + TERMS.prep_token_s * 32)
    assert m.host_time(batch(async_=False)).prepare == pytest.approx(
        TERMS.prep_step_s + TERMS.prep_req_s * 32 + TERMS.prep_token_s * 32)


def test_prefill_terms_price_prefill_tokens_and_prefilling_requests():
    m, plain = cm(TERMS), cm(dataclasses.replace(TERMS, prefill_token_s=None, frontend_prefill_s=None))
    b = batch(GraphMode.NONE, prefill=1000)
    assert m.device_time(b) - plain.device_time(b) == pytest.approx(4e-6 * 1000)
    assert m.host_time(b).frontend - plain.host_time(b).frontend == pytest.approx(10e-6)


@pytest.mark.parametrize("mode", list(GraphMode))
@pytest.mark.parametrize("async_", [True, False])
def test_fast_path_equals_the_term_by_term_model_with_every_term(mode, async_):
    m = cm(TERMS)
    for b in (batch(mode, async_), batch(mode, async_, prefill=700), batch(mode, async_, k=4)):
        fast, host, dev = m.step_cost(b), m.host_time(b), m.device_time(b)
        assert fast.device_s == pytest.approx(dev, rel=1e-9)
        assert fast.host_s == pytest.approx(host.total, rel=1e-9)
        assert fast.step_s == pytest.approx(m.step_time(dev, host, async_), rel=1e-9)


def test_coefficients_round_trip_and_bad_runner_entries_are_errors():
    assert Coefficients.from_dict(TERMS.to_dict()) == TERMS
    with pytest.raises(InputError, match="coefficients.async_runner.gemm_scale"):
        Coefficients.from_dict({"async_runner": {"gemm_scale": 1.0}})
    with pytest.raises(InputError, match="coefficients.async_runner"):
        Coefficients.from_dict({"async_runner": [1, 2]})
    with pytest.raises(InputError, match="coefficients.async_runner.prep_step_s"):
        Coefficients.from_dict({"async_runner": {"prep_step_s": -1}})


def test_the_fitter_recovers_the_step_terms_from_records_drawn_with_them():
    import pandas as pd

    from simkit.costmodel.estimator import StepTimeEstimator
    from simkit.costmodel.synthetic import generate_step_records

    truth = dataclasses.replace(TERMS, prefill_token_s=None, async_serial_s=0.0)
    X = pd.concat([generate_step_records("llama-3.1-8b", "h200", 1, truth, 600, seed=i,
                                         run_id=f"synthetic-{i}", drafter=d, k=k, noise=0.001)
                   for i, (d, k) in enumerate([("none", 0), ("suffix", 4), ("none", 0), ("suffix", 8)])],
                  ignore_index=True)
    got = StepTimeEstimator(hardware="h200", prior_weight=0.0).fit(X).coefs_
    runner = dict(got.async_runner)
    assert got.dispatch_piecewise_s == pytest.approx(200e-6, rel=0.03)
    assert got.dispatch_none_s == pytest.approx(400e-6, rel=0.03)
    assert runner["dispatch_piecewise_s"] == pytest.approx(250e-6, rel=0.03)
    assert runner["prep_step_s"] == pytest.approx(1.1e-3, rel=0.03)
    assert got.prep_step_s == pytest.approx(TERMS.prep_step_s, rel=0.03)
    assert runner["update_step_s"] == pytest.approx(80e-6, rel=0.03)
    old = StepTimeEstimator(hardware="h200", step_terms=False).fit(X).coefs_
    assert old.dispatch_piecewise_s is None and not old.async_runner and old.frontend_prefill_s is None
