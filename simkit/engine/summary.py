"""One configuration's figures over seeds (Row) and the one list of its fields (FIELDS).

FIELDS says, per figure, its key (Row attribute = JSON/CSV key = sweep column), its table header
and what it means; the JSON result keys (RESULT_KEYS, DETAIL_KEYS), the sweep's columns and the
printed table and legend (simkit.report.legend) are all read from it, in its order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:                    # type hints only
    from simkit.engine.config import SpecConfig
    from simkit.engine.sim import RunResult

NAN = float("nan")


@dataclass(frozen=True)
class Field:
    """One figure of a Row: key, meaning, table header (None: not a table column), JSON group
    ("result": the headline keys, "detail": the rest, None: not in the JSON) and whether the
    sweep table carries it."""

    key: str
    meaning: str
    header: str | None = None
    group: str | None = "detail"
    sweep: bool = False


FIELDS: tuple[Field, ...] = (
    Field("config", "configuration: vanilla = no speculation; suffix = suffix decoding "
          "with vLLM's default cap K=24 (drafts vary in length); kpad-K = suffix drafts padded "
          "to exactly K tokens so decode steps hit FULL CUDA graphs; dynamic-* = one K per step from the K set, "
          "for the whole batch (table: a K per batch-size bucket, tuned once on the corpus; "
          "feedback: the largest K whose last slot is still accepted often enough; goodput: "
          "the K with the most expected tokens per predicted step second)", "config", "result",
          True),
    Field("k", "draft tokens per request per step at most (the dynamic set for dynamic-*; "
          "JSON/CSV: k is the largest, ks the set)", "K", "result", True),
    Field("ks", "the K set of a dynamic policy (empty for fixed K)"),
    Field("output_tok_s", "output tokens per second of one replica in the steady "
          "window, mean over seeds", "tok/s", "result", True),
    Field("output_tok_s_std", "standard deviation of tok/s over seeds (request orders)", "±std",
          "result", True),
    Field("speedup_vs_vanilla", "tok/s divided by vanilla's tok/s", "speedup", "result", True),
    Field("full_graph_frac", "share of steps that replay a FULL CUDA graph (uniform "
          "decode batches: cheapest launch)", "FULL", "result", True),
    Field("piecewise_steps_frac", "share of steps that replay PIECEWISE graphs "
          "(attention runs eagerly between captured pieces)", "PIECEW"),
    Field("none_steps_frac", "share of steps run eagerly, no graph (batch larger than "
          "the largest capture size)", "NONE"),
    Field("mean_accepted", "draft tokens accepted per request per decode step", "acc/step",
          "result", True),
    Field("tokens_per_step", "tokens emitted per request per decode step "
          "(1 + acc/step)", "tok/step", sweep=True),
    Field("mean_k", "K actually run, mean over steps (shows which K a dynamic "
          "policy settled on)", "mean K"),
    Field("host_frac", "share of step time the GPU sits idle waiting for the CPU "
          "(scheduling, input preparation, drafting, output update)", "host", "result", True),
    Field("tpot_ms_p50", "median time per output token after the first, per "
          "request (ms)", "TPOT p50", "result", True),
    Field("ttft_ms_p50", "median time to first token (ms)", "TTFT p50", "result", True),
    Field("itl_ms_p99", "99th percentile of the gap between consecutive token "
          "emissions of a request (ms)", "ITL p99", sweep=True),
    Field("padded_token_waste", "share of the tokens the GPU ran that were padding: "
          "CUDA-graph batch padding plus the placeholder drafts kpad adds to reach K "
          "(rejected drafts are not counted)", "waste", sweep=True),
    Field("preemptions", "requests preempted for lack of KV cache, per run", "preempt",
          sweep=True),
    Field("tpot_ms_p99", "99th percentile TPOT (ms)"),
    Field("ttft_ms_p99", "99th percentile TTFT (ms)"),
    Field("is_best", "true for the configuration with the highest tok/s of its cell", group=None,
          sweep=True),
    Field("is_best_k", "true for the K-pad row at its cell's best K", group=None, sweep=True),
    Field("steady_window", "true when every seed's figures come from a steady window; false: "
          "whole-run rates (too few requests; the table marks the row with *)", None, "result",
          True),
)

# printed (and in JSON/CSV) only when prefix caching is on, so that --no-prefix-caching gives the
# report exactly as it was before prefix caching was modelled
PREFIX_FIELD = Field("prefix_hit_rate", "prefix-cache hit rate: share of prompt "
                     "tokens found in the prefix cache at admission (whole 16-token blocks; the last prompt token "
                     "is always computed), mean over seeds; n/a when the workload has no "
                     "prompt block hashes (caching could not be modelled: every prompt token "
                     "was prefilled)", "pfx hit", None)
PREFIX_KEY = PREFIX_FIELD.key

RESULT_KEYS = tuple(f.key for f in FIELDS if f.group == "result")
DETAIL_KEYS = tuple(f.key for f in FIELDS if f.group == "detail")

# RunMetrics figures averaged over seeds (the Row's attributes of the same name)
MEAN_KEYS = ("tokens_per_step", "piecewise_steps_frac", "none_steps_frac", "full_time_frac",
             "piecewise_time_frac", "none_time_frac", "padded_token_waste", "itl_ms_p50",
             "itl_ms_p90", "itl_ms_p99", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p90",
             "tpot_ms_p99", "request_throughput", "mean_step_ms", "mean_batch_reqs", "mean_k",
             "kv_usage_mean", "kv_usage_peak", "preemptions", "steps")


# adaptive verification's figures (simkit.engine.adaptive_run), on its rows only
ADAPTIVE_KEYS = ("mean_admitted_slots", "budget_share_of_k")


@dataclass
class Row:
    """One configuration's prediction: means over seeds (std for throughput)."""

    config: str
    k: int
    output_tok_s: float
    output_tok_s_std: float
    speedup_vs_vanilla: float | None
    full_graph_frac: float
    mean_accepted: float
    host_frac: float
    tpot_ms_p50: float
    ttft_ms_p50: float
    # False when some seed's run was too short for a steady window: its figures are whole-run
    # averages (ramp-up and drain included), not the steady state the header names
    steady_window: bool = True
    ks: str | None = None               # a dynamic policy's K set, "4,6,12"
    tokens_per_step: float = NAN
    piecewise_steps_frac: float = NAN
    none_steps_frac: float = NAN
    full_time_frac: float = NAN
    piecewise_time_frac: float = NAN
    none_time_frac: float = NAN
    padded_token_waste: float = NAN
    itl_ms_p50: float = NAN
    itl_ms_p90: float = NAN
    itl_ms_p99: float = NAN
    ttft_ms_p90: float = NAN
    ttft_ms_p99: float = NAN
    tpot_ms_p90: float = NAN
    tpot_ms_p99: float = NAN
    request_throughput: float = NAN
    mean_step_ms: float = NAN
    mean_batch_reqs: float = NAN
    mean_k: float = NAN
    kv_usage_mean: float = NAN
    kv_usage_peak: float = NAN
    preemptions: float = NAN
    steps: float = NAN
    full_run_windows: float = 0.0       # seeds whose run had no steady window
    # seeds whose open-loop window was overloaded (the queue grew through it: no steady rate)
    overloaded_windows: float = 0.0
    prefix_caching: bool = False        # on: the row carries prefix_hit_rate
    prefix_hit_rate: float | None = None  # None with caching on: not modelled (no block hashes)
    # adaptive verification rows (suffix-av): mean admitted slots per decode request-step and
    # the budget's share of the K slots scheduled (means over seeds); None on other rows
    mean_admitted_slots: float | None = None
    budget_share_of_k: float | None = None

    def result_dict(self) -> dict[str, Any]:
        """The row as the documented keys: RESULT_KEYS, then DETAIL_KEYS, then prefix_hit_rate
        when prefix caching was on (non-finite figures as None)."""
        out = {k: _clean(getattr(self, k)) for k in RESULT_KEYS}
        out.update({k: _clean(getattr(self, k)) for k in DETAIL_KEYS})
        if self.prefix_caching:
            out[PREFIX_KEY] = _clean(self.prefix_hit_rate)
        for key in ADAPTIVE_KEYS:                 # adaptive verification rows only
            if getattr(self, key) is not None:
                out[key] = _clean(getattr(self, key))
        return out


def _clean(v: Any) -> Any:
    """JSON-safe figure: NaN/inf -> None, floats rounded to 6 decimals."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, float):
        return round(v, 6)
    return v


def summarize_rows(specs: list[SpecConfig], runs: list[list[RunResult]]) -> list[Row]:
    """Mean (and std of throughput) over seeds per config; speedup against vanilla's mean."""
    rows = []
    for spec, rs in zip(specs, runs):
        metrics = [r.metrics for r in rs]
        tput = np.array([m.output_tok_s for m in metrics])

        def mean(key: str) -> float:
            vals = np.array([getattr(m, key) for m in metrics], dtype=float)
            vals = vals[np.isfinite(vals)]
            return float(vals.mean()) if vals.size else NAN

        full_runs = float(sum(m.window_kind == "full-run" for m in metrics))
        over = float(sum(m.window_kind == "overloaded" for m in metrics))
        prefix = [r.prefix for r in rs if r.prefix is not None]
        hit = None
        if prefix and all(p["modelled"] for p in prefix):
            hit = float(np.mean([p["hit_rate"] for p in prefix]))
        adaptive = [r.adaptive for r in rs if r.adaptive is not None]
        rows.append(Row(
            spec.name, spec.k if spec.speculative else 0, float(tput.mean()),
            float(tput.std(ddof=1)) if tput.size > 1 else 0.0, None, mean("full_steps_frac"),
            mean("mean_accepted"), mean("host_frac"), mean("tpot_ms_p50"), mean("ttft_ms_p50"),
            steady_window=full_runs + over == 0, ks=",".join(map(str, spec.ks)) if spec.ks else None,
            full_run_windows=full_runs, overloaded_windows=over, prefix_caching=bool(prefix),
            prefix_hit_rate=hit,
            **{key: float(np.mean([a[key] for a in adaptive])) if adaptive else None
               for key in ADAPTIVE_KEYS},
            **{key: mean(key) for key in MEAN_KEYS}))
    base = next((r for r in rows if r.config == "vanilla"), None)
    for r in rows:
        r.speedup_vs_vanilla = (r.output_tok_s / base.output_tok_s
                                if base and base.output_tok_s > 0 else None)
    return rows


__all__ = ["ADAPTIVE_KEYS", "DETAIL_KEYS", "FIELDS", "Field", "MEAN_KEYS", "PREFIX_FIELD", "PREFIX_KEY",
           "RESULT_KEYS", "Row", "summarize_rows"]
