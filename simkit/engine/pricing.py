"""Predicted step time of a uniform decode batch at K: the price every cost-aware K policy uses.

One function for the simulator's scheduler and for the GPU harness's dynamic-K scheduler
(calibrate/dynk.py), so a policy measured on vLLM is the policy simkit simulates.
"""

from __future__ import annotations

from typing import Any, Callable

from simkit.costmodel.batch import BatchDescriptor
from simkit.engine.cudagraph import CudagraphMode, Dispatcher

PriceFn = Callable[[int, int, int, int], float]
GRAPHS = ("per-k", "kmax")


def dispatchers_for(ks: tuple[int, ...], mode: CudagraphMode, max_num_seqs: int,
                    max_num_batched_tokens: int, graphs: str = "per-k",
                    uniform_decode_sizes: bool = False) -> dict[int, Dispatcher]:
    """One dispatcher per K. graphs="per-k": a FULL capture list per K (simkit's idealised
    dynamic-K); "kmax": only max(ks) is captured, as vLLM 0.26 does (q = 1 + Kmax), so a step at a
    smaller K is not a uniform decode batch for the dispatcher."""
    if graphs not in GRAPHS:
        raise ValueError(f"graphs must be one of {GRAPHS}, got {graphs!r}")
    top = max(ks) if ks else 0
    out = {}
    for k in ks:
        cap_k = top if graphs == "kmax" else k
        out[k] = Dispatcher.build(mode, max_num_seqs, cap_k, max_num_batched_tokens,
                                  uniform_decode_sizes)
    return out


def uniform_decode_price(cost_model: Any, dispatcher: Dispatcher, k: int, n: int, context: int,
                         real_drafts: int, drafter: str) -> float:
    """Step seconds of n decode requests each carrying exactly K drafts (real + placeholders)."""
    num_tokens = n * (1 + k)
    mode, padded = dispatcher.dispatch(num_tokens, n, 1 + k)
    desc = BatchDescriptor(n, num_tokens, padded, 0, 0, n, n * k, max(0, n * k - real_drafts),
                           n, context + num_tokens, mode, False, drafter)
    return cost_model.step_cost(desc).step_s


def price_fn_for(run: dict[str, Any], ks: list[int], graphs: str = "kmax") -> PriceFn:
    """The price simkit's validation of a measured run uses (its cost model under the run's
    conditions, its cudagraph mode and limits); `run` holds the runs.parquet fields it needs."""
    from simkit.engine.config import DYNAMIC_DRAFTER
    from simkit.costmodel.run_conditions import run_cost

    cost = run_cost(run)
    mode = CudagraphMode.parse(str(run.get("cudagraph_mode", "FULL_AND_PIECEWISE")))
    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(str(run.get("vllm_version") or "0.26.0"))
    disp = dispatchers_for(tuple(sorted(ks)), mode, int(run["max_num_seqs"]),
                           int(run["max_num_batched_tokens"]), graphs, version.uniform_decode_sizes)

    def price(k: int, n: int, context: int, real_drafts: int) -> float:
        return uniform_decode_price(cost, disp[k], k, n, context, real_drafts, DYNAMIC_DRAFTER)

    return price
