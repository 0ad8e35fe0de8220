"""Step-time cost model: device time of the forward pass and host time of the engine step.

Public API: load_cost_model, CostModel, choose_tp, kv_capacity_tokens, max_concurrent_seqs.
The estimator (scikit-learn) lives in simkit.costmodel.estimator and is imported on demand."""

from simkit.costmodel.memory import choose_tp, kv_capacity_tokens, max_concurrent_seqs
from simkit.costmodel.model import CostModel, HostTime
from simkit.costmodel.calibrations import load_cost_model

__all__ = ["load_cost_model", "CostModel", "HostTime", "choose_tp", "kv_capacity_tokens", "max_concurrent_seqs"]
