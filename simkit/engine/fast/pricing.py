"""The cost model's step price for the compiled loop: CostModel.step_cost's constants, read from
its closure, in the order kernel.price expects.

CostModel folds its constants into the closure `fast` (simkit.costmodel.model) that prices one
step; kernel.price repeats that closure's arithmetic operation for operation. `constants`
returns None (the loop then prices steps through step_cost, or falls back to the reference
loop) unless step_cost is that closure with the source it was mirrored from: an edit of it
changes FAST_SOURCE_SHA and the compiled price steps aside until the mirror is updated
(tests/unit/test_fast_engine.py compares both on random batches).
"""

from __future__ import annotations

import hashlib
import inspect

import numpy as np

# sha256 of the source of simkit.costmodel.model.CostModel._build_fast.<locals>.fast
FAST_SOURCE_SHA = "92e2794dcb02fbc14162eab0f18ebce4c02e59ac703d53169c18fd5f0717a998"
# closure names, in kernel.price's order (the drafter's three coefficients follow)
NAMES = ("g_dense", "g_act", "g_tok", "g_lm", "g_lm_row", "moe_e", "moe_log", "m_bytes", "m_tok",
         "a_bw", "a_full", "a_local", "kv_full", "kv_local", "window", "c_tok", "row_s", "rej",
         "f_full", "f_pw", "f_none", "pf_tok", "a_step", "a_req", "a_pt", "a_rt", "a_acc",
         "h_step", "h_req", "h_pt", "h_rt", "h_acc", "dispatch_on", "da_pw", "da_none", "da_tok",
         "d_pw", "d_none", "d_tok", "overlap_ok", "a_as", "h_fr", "h_facc", "f_pre")
_CHECKED: dict = {}


def source_sha(fn) -> str | None:
    """sha256 of a function's source text (None when it cannot be read)."""
    code = fn.__code__
    if code not in _CHECKED:
        try:
            _CHECKED[code] = hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
        except (OSError, TypeError):
            _CHECKED[code] = None
    return _CHECKED[code]


def constants(cost_model, drafter: str) -> np.ndarray | None:
    """kernel.price's constants for `cost_model` and `drafter`, or None where its step_cost is
    not the mirrored closure."""
    fn = getattr(cost_model, "step_cost", None)
    if (fn is None or getattr(fn, "__name__", "") != "fast" or fn.__closure__ is None
            or source_sha(fn) != FAST_SOURCE_SHA):
        return None
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    drafts = cells["drafts"]
    if drafter not in drafts or any(not isinstance(cells[n], (int, float)) for n in NAMES):
        return None
    vals = [float(cells[n]) for n in NAMES] + [float(x) for x in drafts[drafter]]
    if any(float(cells[n]) != cells[n] for n in NAMES):     # an int too large for a double
        return None
    return np.array(vals, np.float64)
