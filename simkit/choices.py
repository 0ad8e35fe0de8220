"""The fixed vocabularies of simkit's options, as str-valued Enums.

Typer takes an option typed with one of them, refuses any other value naming the choices, and
hands the command a member; a member compares equal to its text and prints, formats and
serialises (JSON, parquet, cache keys) as that text, so outputs are the same bytes as with the
plain strings. A leaf module (no imports), so that the command layer can type its options
without loading the simulator.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

E = TypeVar("E", bound=StrEnum)


def member(kind: type[E], value: str, what: str, field: str) -> E:
    """`value` as a member of `kind`, else an InputError naming the option and the choices
    (for values that do not come through Typer: a library call, a record)."""
    try:
        return kind(value)
    except ValueError:
        from simkit.errors import InputError

        raise InputError(f"unknown {what} {str(value)!r}; use {', '.join(kind)}",
                         field=field) from None


class CappedMode(StrEnum):
    """--capped-outputs: how a request whose trace stopped at its source's generation cap is
    replayed (simkit.app.capped)."""

    KEEP = "keep"           # it ends where the trace ends (the default)
    EXTEND = "extend"       # it continues to max_tokens repeating its own acceptance


class ProfileSource(StrEnum):
    """--source: where a workload profile comes from (simkit.profiles.corpus_profile)."""

    AUTO = "auto"           # the shipped profile when verified against the raw traces, else raw
    RAW = "raw"             # built from the raw traces (cached)
    SHIPPED = "shipped"     # read from traces/profiles


class OutputFormat(StrEnum):
    """--format of the commands that print results: a text table or a JSON document."""

    TABLE = "table"
    JSON = "json"


class PredictFormat(StrEnum):
    """--format of predict: OutputFormat's, and CSV (one row per configuration)."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


class TraceFormat(StrEnum):
    """--format of `traces import`: the layout of the user's request log (traces.importers)."""

    OPENAI = "openai"               # JSONL of chat requests with their responses
    SHAREGPT = "sharegpt"           # a JSON list (or JSONL) of conversations
    VLLM_CUSTOM = "vllm-custom"     # vllm bench's custom dataset, plus the output text
    TOKENS = "tokens"               # JSONL of prompt and output token ids
    VLLM_LOG = "vllm-log"           # a vLLM server's own request log (traces.vllm_log)


class Executor(StrEnum):
    """--executor: where a sweep's or a fleet plan's simulations run (same bytes either way)."""

    LOCAL = "local"         # forked worker processes on this machine
    RAY = "ray"             # a Ray cluster (the ray extra; simkit.executors)


class Ordering(StrEnum):
    """How a replay interleaves requests (Drafter.replay, an acceptance table's `ordering`)."""

    SEQUENTIAL = "sequential"   # one after another, each response whole in the tree first
    CONCURRENT = "concurrent"   # C in flight, one output token each per tick, round robin


class FleetOrdering(StrEnum):
    """--ordering of a fleet: a table ordering (Ordering) or in-loop drafting."""

    SEQUENTIAL = "sequential"
    CONCURRENT = "concurrent"
    IN_LOOP = "in-loop"     # no table: the engines draft on their simulated steps


__all__ = ["CappedMode", "Executor", "FleetOrdering", "OutputFormat", "Ordering",
           "PredictFormat", "ProfileSource", "TraceFormat", "member"]
