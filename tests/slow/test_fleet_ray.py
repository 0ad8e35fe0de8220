"""A load-independent fleet on Ray (one task per replica group) gives the local run's document
byte for byte: the replicas share nothing once the router has named them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("one_ray_instance")   # one local Ray instance at a time

from simkit.paths import traces_src_dir

needs_traces = pytest.mark.skipif(traces_src_dir() is None,
                                  reason="raw traces (../shared/traces-src) not present")


@pytest.mark.slow
@needs_traces
def test_ray_fleet_equals_local_fleet_byte_for_byte():
    import ray  # noqa: F401  (in the [test] extra: its absence fails, never skips)

    from simkit.fleet import report
    from simkit.fleet.run import fleet
    from simkit.fleet.traffic import TrafficSpec

    kw = dict(corpus="code-reasoning", traffic=TrafficSpec(rate=4, duration_s=15, seed=5),
              policies="round-robin,prefix-affinity,session-affinity", configs="vanilla,suffix",
              replicas=3, gpu_hour_price=2.5)
    local = report.document(fleet(**kw))
    forked = report.document(fleet(**kw, workers=2))
    remote = report.document(fleet(**kw, executor="ray", workers=2))
    assert local == forked == remote
    assert '"round-robin"' in local and '"per_replica"' in local
