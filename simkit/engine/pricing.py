"""Predicted step time of a uniform decode batch at K: the price every cost-aware K policy uses.

One function for the simulator's scheduler and for the GPU harness's dynamic-K scheduler
(calibrate/dynk.py), so a policy measured on vLLM is the policy simkit simulates.
"""

from __future__ import annotations

from typing import Any, Callable

from simkit.costmodel.batch import BatchDescriptor
from simkit.engine.cudagraph import CudagraphMode, Dispatcher, graph_rule

PriceFn = Callable[[int, int, int, int], float]
GRAPHS = ("per-k", "kmax")


def dispatchers_for(ks: tuple[int, ...], mode: CudagraphMode, max_num_seqs: int,
                    max_num_batched_tokens: int, graphs: str = "per-k",
                    uniform_decode_sizes: bool = False, rule: str | None = None,
                    max_reqs: dict[int, int] | None = None) -> dict[int, Any]:
    """One dispatcher per K. graphs="per-k": a FULL capture list per K (simkit's idealised
    dynamic-K); "kmax": only max(ks) is captured, as vLLM 0.26 does (q = 1 + Kmax), so a step at a
    smaller K is not a uniform decode batch for the dispatcher. `rule`: a graph-size rule's name
    (simkit.engine.cudagraph.GRAPH_RULES; None: the token-keyed rule, with 0.33's uniform-decode
    sizes when `uniform_decode_sizes`); `max_reqs`: per K, the widest batch its decode graphs
    cover (the K tiers of a batch-size K table)."""
    if graphs not in GRAPHS:
        raise ValueError(f"graphs must be one of {GRAPHS}, got {graphs!r}")
    build = graph_rule(rule) if rule else None
    top = max(ks) if ks else 0
    out = {}
    for k in ks:
        cap_k = top if graphs == "kmax" else k
        if build is None:
            out[k] = Dispatcher.build(mode, max_num_seqs, cap_k, max_num_batched_tokens,
                                      uniform_decode_sizes)
        else:
            out[k] = build(mode, max_num_seqs, cap_k, max_num_batched_tokens,
                           (max_reqs or {}).get(k))
    return out


def uniform_decode_price(cost_model: Any, dispatcher: Dispatcher, k: int, n: int, context: int,
                         real_drafts: int, drafter: str, async_scheduling: bool = False,
                         drafts_on_host: bool = True) -> float:
    """Step seconds of n decode requests each carrying exactly K drafts (real + placeholders),
    on the runner the configuration runs on (synchronous V1 with a host drafter by default)."""
    num_tokens = n * (1 + k)
    mode, padded = dispatcher.dispatch(num_tokens, n, 1 + k)
    desc = BatchDescriptor(n, num_tokens, padded, 0, 0, n, n * k, max(0, n * k - real_drafts),
                           n if drafts_on_host else 0, context + num_tokens, mode,
                           async_scheduling, drafter)
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
                           int(run["max_num_batched_tokens"]), graphs, rule=version.graph_rule)

    def price(k: int, n: int, context: int, real_drafts: int) -> float:
        return uniform_decode_price(cost, disp[k], k, n, context, real_drafts, DYNAMIC_DRAFTER)

    return price
