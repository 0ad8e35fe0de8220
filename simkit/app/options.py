"""RunOptions: the settings of one simulated run, in one object from the command line down.

Every run command (predict, sweep, fleet plan, the what-ifs) builds one from the same option
definitions (simkit.commands.options), so a setting has one name and one default everywhere;
`load_cell` and `predict` take it instead of a dozen loose arguments. The defaults here are the
defaults of the command line (the commands read them from this class).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from simkit.choices import CappedMode, ProfileSource
from simkit.history import History


@dataclass(frozen=True)
class RunOptions:
    """What to simulate (model, corpus, hardware, TP, vLLM version, calibration), on which
    traffic (profile source, request history, capped outputs, max_tokens) and how much of it
    (concurrency, requests per run, seeds), with vLLM's server limits."""

    model: str = "llama-3.1-8b"            # a sweep replaces both by each cell's
    corpus: str = "mix"
    hardware: str = "h200"
    tp: int | None = None                  # None: the smallest TP that fits
    vllm_version: str | None = None        # None: the newest simkit knows
    calibration: str | None = None         # None: the hardware's and version's, else analytic
    source: ProfileSource = ProfileSource.AUTO   # workload profiles: auto, raw or shipped
    history: History | None = None         # parsed from --history; None: the profile's own
    capped_outputs: CappedMode = CappedMode.KEEP   # simkit.app.capped: keep | extend
    concurrency: int = 32                  # closed-loop clients
    num_requests: int | None = None        # None: simkit.engine.runner.default_num_requests
    max_tokens: int = 8192
    seeds: int = 3                         # request orders simulated; figures are means
    prefix_caching: bool = True            # vLLM's automatic prefix caching (on by default)
    workers: int | None = None             # local worker processes; None: all cores
    # vLLM server limits (engine arguments), at vLLM's defaults
    max_model_len: int = 16384
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    cudagraph_mode: str = "FULL_AND_PIECEWISE"

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every field name, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "RunOptions":
        """The options among a command's parameters (by name); the others are ignored and
        the fields a command lacks keep their defaults."""
        return cls(**{n: params[n] for n in cls.names() if n in params})

    def keywords(self, names) -> dict[str, Any]:
        """{name: value} of the fields named in `names` (for a function that takes some of
        them as keyword arguments)."""
        return {n: getattr(self, n) for n in self.names() if n in names}

    def but(self, **changes: Any) -> "RunOptions":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def server(self, cost: Any):
        """vLLM's server settings (an EngineConfig) for the cost model `cost` under these
        options: max_tokens, max_model_len, the server limits and prefix caching. Every run
        command's engine takes its settings from here, so an option reaches each one."""
        from simkit.engine.runner import engine_config

        return engine_config(cost, max_tokens=self.max_tokens, max_model_len=self.max_model_len,
                             max_num_seqs=self.max_num_seqs,
                             max_num_batched_tokens=self.max_num_batched_tokens,
                             cudagraph_mode=self.cudagraph_mode,
                             prefix_caching=self.prefix_caching)


@dataclass(frozen=True)
class Goals:
    """Latency goals (ms) at p99 that a served rate must meet: one replica's (whatif capacity)
    or the whole fleet's (fleet plan). The defaults are the command line's."""

    ttft_ms_p99: float = 2000.0
    tpot_ms_p99: float = 50.0


__all__ = ["Goals", "RunOptions"]
