"""The `trace_replay` adapter (vLLM 0.34+): vLLM's own trace replay instead of logits forcing.

Each request carries its trace (`SamplingParams(trace_decode_token_ids=...)`, engine started with
`enable_trace_replay=True`); vLLM accepts a draft iff it equals the trace token at its position and
emits the trace, from GPU state, so async scheduling keeps its overlap. On 0.34 every decoding
request verifies K slots (K-pad is built in: `kpad` runs as suffix at that K), dynamic K is the
engine's `num_speculative_tokens_per_batch_size`, and between runs the GPU suffix speculator's
corpus is emptied with `speculator.reset_state()` (vLLM does the same after its warm-up).
"""

from __future__ import annotations

from typing import Any

from calibrate.harness.flags import RunnerFlags
from simkit.errors import InputError


class TraceReplayAdapter:
    """Native trace replay, engine-side K table, GPU corpus reset."""

    name = "trace_replay"
    forces_logits = False
    force_copy = "trace-replay"   # not a logits copy: vLLM replaces the emitted tokens on the GPU
    draft_count = "slots"         # num_spec_tokens: K slots per decoding request, fillers included

    def check(self, config: str, k: int, flags: RunnerFlags) -> None:
        """Refuse what vLLM 0.34 would refuse or ignore, before any engine starts."""
        if config == "vanilla" and flags.any:
            raise InputError("vanilla runs without speculative decoding: the suffix options "
                             "need --config suffix", field="config")
        if config == "kpad" and k < 1:
            raise InputError("kpad needs --k >= 1 (on vLLM 0.34 it runs as suffix at that K)",
                             field="k")
        if config == "dynamic" and flags.k_table is None:
            raise InputError("dynamic K on vLLM 0.34 is the engine's batch-size table: give "
                             "--k-table START-END:K,...", field="k-table")
        if config != "dynamic" and flags.k_table is not None and config != "suffix":
            raise InputError("--k-table needs --config suffix or dynamic", field="k-table")

    def ran_config(self, config: str) -> str:
        """kpad runs as suffix (every request verifies K slots); a K table is dynamic K."""
        return "suffix" if config == "kpad" else config

    def engine_kwargs(self) -> dict[str, Any]:
        return {"enable_trace_replay": True}

    def speculative_config(self, config: str, k: int, flags: RunnerFlags) -> dict | None:
        if config == "vanilla":
            return None
        spec: dict[str, Any] = {"method": "suffix"}
        if flags.k_table is not None:       # the engine verifies at most the table's largest K
            k = max(k, max(e[2] for e in flags.k_table))
        if k > 0:
            spec["num_speculative_tokens"] = k
        spec.update(flags.speculative_fields())
        return spec

    def scheduler_cls(self, config: str) -> str | None:
        return None     # a plugin subclassing the sync Scheduler would cost the async overlap

    def sampling_kwargs(self, output_ids: Any) -> dict[str, Any]:
        return {"trace_decode_token_ids": [int(t) for t in output_ids]}

    def reset_drafter(self, runner: Any, vllm_config: Any) -> list[str]:
        """Empty the GPU corpus, index and acceptance statistics of the suffix speculator."""
        spec = getattr(runner, "speculator", None)
        if spec is None:
            return []
        if not hasattr(spec, "reset_state"):
            return [f"{type(spec).__name__} has no reset_state: its state was kept between runs"]
        spec.reset_state()
        return []


ADAPTER = TraceReplayAdapter()
