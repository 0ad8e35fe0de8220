"""The columns of the prediction table: header, JSON/CSV key, unit and meaning, in one list.

The table prints LEGEND under itself (unless --no-legend), the HTML report prints it, and
docs/report.md repeats it; tests check that every printed column and every JSON key is here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One table column: header as printed, the key in JSON/CSV, and what it means."""

    header: str
    key: str
    meaning: str


COLUMNS: tuple[Column, ...] = (
    Column("config", "config", "configuration: vanilla = no speculation; suffix = suffix decoding "
           "with vLLM's default cap K=24 (drafts vary in length); kpad-K = suffix drafts padded "
           "to exactly K tokens so decode steps hit FULL CUDA graphs; dynamic-* = one K per step from the K set, "
           "for the whole batch (table: a K per batch-size bucket, tuned once on the corpus; "
           "feedback: the largest K whose last slot is still accepted often enough; goodput: "
           "the K with the most expected tokens per predicted step second)"),
    Column("K", "k", "draft tokens per request per step at most (the dynamic set for dynamic-*; "
           "JSON/CSV: k is the largest, ks the set)"),
    Column("tok/s", "output_tok_s", "output tokens per second of one replica in the steady "
           "window, mean over seeds"),
    Column("±std", "output_tok_s_std", "standard deviation of tok/s over seeds (request orders)"),
    Column("speedup", "speedup_vs_vanilla", "tok/s divided by vanilla's tok/s"),
    Column("FULL", "full_graph_frac", "share of steps that replay a FULL CUDA graph (uniform "
           "decode batches: cheapest launch)"),
    Column("PIECEW", "piecewise_steps_frac", "share of steps that replay PIECEWISE graphs "
           "(attention runs eagerly between captured pieces)"),
    Column("NONE", "none_steps_frac", "share of steps run eagerly, no graph (batch larger than "
           "the largest capture size)"),
    Column("acc/step", "mean_accepted", "draft tokens accepted per request per decode step"),
    Column("tok/step", "tokens_per_step", "tokens emitted per request per decode step "
           "(1 + acc/step)"),
    Column("mean K", "mean_k", "K actually run, mean over steps (shows which K a dynamic "
           "policy settled on)"),
    Column("host", "host_frac", "share of step time the GPU sits idle waiting for the CPU "
           "(scheduling, input preparation, drafting, output update)"),
    Column("TPOT p50", "tpot_ms_p50", "median time per output token after the first, per "
           "request (ms)"),
    Column("TTFT p50", "ttft_ms_p50", "median time to first token (ms)"),
    Column("ITL p99", "itl_ms_p99", "99th percentile of the gap between consecutive token "
           "emissions of a request (ms)"),
    Column("waste", "padded_token_waste", "share of the tokens the GPU ran that were padding: "
           "CUDA-graph batch padding plus the placeholder drafts kpad adds to reach K "
           "(rejected drafts are not counted)"),
    Column("preempt", "preemptions", "requests preempted for lack of KV cache, per run"),
)

# printed (and in JSON/CSV) only when prefix caching is on, so that --no-prefix-caching gives the
# report exactly as it was before prefix caching was modelled
PREFIX_COLUMN = Column("pfx hit", "prefix_hit_rate", "prefix-cache hit rate: share of prompt "
                       "tokens found in the prefix cache at admission (whole 16-token blocks; the last prompt token "
                       "is always computed), mean over seeds; n/a when the workload has no "
                       "prompt block hashes (caching could not be modelled: every prompt token "
                       "was prefilled)")


def columns(prefix: bool = False) -> tuple[Column, ...]:
    """The table's columns; with the prefix-hit column when prefix caching is on."""
    return COLUMNS + (PREFIX_COLUMN,) if prefix else COLUMNS


# JSON/CSV keys that have no column of their own in the table
EXTRA_KEYS: dict[str, str] = {
    "ks": "the K set of a dynamic policy (empty for fixed K)",
    "tpot_ms_p99": "99th percentile TPOT (ms)",
    "ttft_ms_p99": "99th percentile TTFT (ms)",
    "steady_window": "true when every seed's figures come from a steady window; false: whole-run "
                     "rates (too few requests; the table marks the row with *)",
}


def legend_lines(prefix: bool = False) -> list[str]:
    """The legend as printed under the table: 'header  meaning' per column."""
    cols = columns(prefix)
    width = max(len(c.header) for c in cols)
    return [f"{c.header:<{width}}  {c.meaning}" for c in cols]


def key_meanings(prefix: bool = False) -> dict[str, str]:
    """JSON/CSV key -> meaning, for every key a result row carries."""
    out = {c.key: c.meaning for c in COLUMNS}
    out.update(EXTRA_KEYS)
    if prefix:
        out[PREFIX_COLUMN.key] = PREFIX_COLUMN.meaning
    return out


__all__ = ["COLUMNS", "Column", "EXTRA_KEYS", "PREFIX_COLUMN", "columns", "key_meanings",
           "legend_lines"]
