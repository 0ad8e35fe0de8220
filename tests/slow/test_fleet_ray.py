"""A load-independent fleet on Ray (one task per replica group) gives the local run's document
byte for byte: the replicas share nothing once the router has named them."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.usefixtures("one_ray_instance"),   # one local Ray instance at a time
              pytest.mark.xdist_group("ray")]   # the Ray tests on one worker: none waits for the lock

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

    from simkit.app.options import RunOptions

    kw = dict(traffic=TrafficSpec(rate=4, duration_s=15, seed=5),
              policies="round-robin,prefix-affinity,session-affinity", configs="vanilla,suffix",
              replicas=3, gpu_hour_price=2.5)
    one, two = RunOptions(corpus="code-reasoning", workers=1), \
        RunOptions(corpus="code-reasoning", workers=2)
    local = report.document(fleet(one, **kw))
    forked = report.document(fleet(two, **kw))
    remote = report.document(fleet(two, **kw, executor="ray"))
    assert local == forked == remote
    assert '"round-robin"' in local and '"per_replica"' in local
