"""The same cost model on a faster or slower host CPU: every host term divided by the factor.

A measured run's host may run faster or slower than the one its calibration prices (run-to-run
host drift: simkit.validation.host_speed reads the factor from the run's own host-stage
records); `at_host_speed(cost, f)` prices the run's steps on a host `f` times as fast, device
terms unchanged. Used by the "held-out error if each run's host speed were known" diagnostic.
"""

from __future__ import annotations

import copy
from typing import Any


def at_host_speed(cost: Any, factor: float) -> Any:
    """`cost` (a CostModel, or a RunConditionsCost around one, its harness conditions kept) on a
    host `factor` times as fast."""
    from simkit.costmodel.model import CostModel
    from simkit.costmodel.run_conditions import RunConditionsCost

    if isinstance(cost, RunConditionsCost):
        return RunConditionsCost(at_host_speed(cost.base, factor), sync=cost.sync,
                                 serial_frontend=cost.serial_frontend)
    if not isinstance(cost, CostModel):
        raise TypeError(f"no host speed to change on {type(cost).__name__}")
    out = copy.copy(cost)
    out.host_speed = cost.host_speed * factor
    out._fold()
    return out


__all__ = ["at_host_speed"]
