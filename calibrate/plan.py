"""`simkit calibrate plan`: the calibration runs that fit a GPU-time budget (pure; CPU host).

A calibration needs, per configuration the user will ask about, one engine (vLLM compiles and
captures graphs per speculative setting) serving a few short closed-loop runs that span what the
cost model separates: batch size (concurrency 8, 32, 64), accepted tokens per step (a cold pass
and a hot repeat of the same requests) and the graph modes that come with them. The plan orders
engines by how much they teach (vanilla, then suffix, then K-pad at the Ks asked for) and runs
within an engine by the same rule, and drops what does not fit the budget, saying so.

Time estimates are stated, not promised: engine overhead per start (process, model load with
dummy weights, torch.compile, graph capture, warm-up) as measured on an H200 host (vLLM 0.26:
30-55 s of engine start plus ~10 s around it; vLLM 0.33: 50-90 s plus ~30 s; vLLM 0.34: not yet
measured, taken as ~45 s plus ~30 s), and each run's output tokens over the throughput such a
run reached there (Llama-3.1-8B, concurrency 32, cold; 0.34 speculative runs are assumed to run
as 0.33's suffix runs did until a 0.34 sitting measures them).

On vLLM 0.34 every decoding request verifies K slots (K-pad is built in), so its plan calibrates
suffix at several K (8, 4, 16, then 12 and 24 as the budget allows) instead of K-pad, over
concurrency 8 to 128 where the verify work grows with the batch, cold, hot and repeat:0.5.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from simkit.catalog.nearest_version import resolve_vllm_version
from simkit.catalog.vllm_versions import get_vllm_version
from simkit.errors import InputError

ENGINE_OVERHEAD_S = {"0.26": 60.0, "0.33": 120.0, "0.34": 75.0}
# output tok/s per configuration at concurrency 32 (Llama-3.1-8B, H200, cold); scaled by
# concurrency (tok/s ~ c^0.8 between 8 and 64) and by model size (~ 1/params above 8B)
REF_TOK_S = {"vanilla": 5000.0, "suffix": 4000.0, "kpad": 3300.0}
HOT_SPEEDUP = {"vanilla": 1.0, "suffix": 4.0, "kpad": 3.0}
DEFAULT_CONFIGS = ("vanilla", "suffix", "kpad:4", "kpad:12")
# (concurrency, requests, history) of each run of an engine, most informative first
RUNS = ((32, 64, "hot"), (64, 128, "cold"), (8, 24, "cold"))
# vLLM 0.34+: K slots for every decoding request, so K and the batch size are what to span
CONFIGS_BY_VERSION = {"0.34": ("vanilla", "suffix:8", "suffix:4", "suffix:16", "suffix:12",
                              "suffix:24")}
RUNS_BY_VERSION = {"0.34": ((32, 64, "hot"), (128, 256, "cold"), (8, 24, "cold"),
                            (64, 128, "cold"), (32, 96, "repeat:0.5"))}
KPAD_BUILT_IN = ("0.34",)       # versions where kpad:K is suffix at K


def default_configs(version_key: str) -> tuple[str, ...]:
    """The configurations a plan calibrates by default for a vLLM version."""
    return CONFIGS_BY_VERSION.get(version_key, DEFAULT_CONFIGS)


def _nearest(table: dict, key: str, default):
    """The entry of the newest version at or below `key` (a newer release takes the newest)."""
    order = lambda k: tuple(int(x) for x in k.split("."))  # noqa: E731
    below = [k for k in table if order(k) <= order(key)]
    return table[max(below, key=order)] if below else default
DEFAULT_BUDGET_MIN = 15.0


@dataclass(frozen=True)
class PlannedRun:
    """One run of an engine: runner spec text and its estimated seconds (hot: both passes)."""

    corpus: str
    concurrency: int
    num_requests: int
    history: str
    seconds: float

    @property
    def spec(self) -> str:
        """calibrate.runner.RunSpec text."""
        tail = "" if self.history == "cold" else f":{self.history}"
        return f"{self.corpus}:{self.concurrency}:{self.num_requests}:calibration{tail}"


@dataclass(frozen=True)
class PlannedEngine:
    """One engine: configuration, K, its runs and the estimated seconds including its start."""

    config: str
    k: int
    runs: tuple[PlannedRun, ...]
    overhead_s: float

    @property
    def seconds(self) -> float:
        return self.overhead_s + sum(r.seconds for r in self.runs)


@dataclass
class Plan:
    """Engines in the order to run them, what was left out, and the assumptions."""

    model: str
    corpus: str
    vllm_version: str
    budget_s: float
    engines: list[PlannedEngine] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    tp: int = 1                      # GPUs per engine (tensor parallel size)

    @property
    def seconds(self) -> float:
        """Wall seconds of every engine, one after another."""
        return sum(e.seconds for e in self.engines)

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds: each engine holds `tp` GPUs for its wall seconds."""
        return self.seconds * self.tp

    def commands(self, requests_dir: str = ".gpu/requests", out: str = "calib-out") -> list[str]:
        """One `simkit calibrate run` line per engine (each its own process, as vLLM wants)."""
        lines = []
        for e in self.engines:
            runs = ",".join(r.spec for r in e.runs)
            lines.append(" ".join(["simkit", "calibrate", "run", "--model", self.model,
                                   "--corpus", self.corpus, "--config", e.config, "--k", str(e.k),
                                   *(["--tp", str(self.tp)] if self.tp > 1 else []),
                                   "--runs", shlex.quote(runs), "--requests-dir", requests_dir,
                                   "--out", out]))
        return lines

    def to_dict(self) -> dict:
        return {"model": self.model, "corpus": self.corpus, "vllm_version": self.vllm_version,
                "tp": self.tp, "budget_s": self.budget_s, "estimated_s": round(self.seconds, 1),
                "estimated_gpu_s": round(self.gpu_seconds, 1),
                "engines": [{"config": e.config, "k": e.k, "estimated_s": round(e.seconds, 1),
                             "overhead_s": e.overhead_s,
                             "runs": [{"spec": r.spec, "estimated_s": round(r.seconds, 1)}
                                      for r in e.runs]} for e in self.engines],
                "left_out": list(self.left_out), "commands": self.commands()}


def _config(text: str) -> tuple[str, int]:
    """(runner config, K) of one ladder config (simkit.engine.config.parse_configs syntax);
    only what one calibration engine runs: vanilla, suffix[:K], kpad:K."""
    from simkit.drafters.base import SUFFIX_DRAFTER
    from simkit.engine.config import parse_configs

    specs = parse_configs(text)
    if len(specs) != 1 or specs[0].ks or (specs[0].speculative
                                          and specs[0].drafter != SUFFIX_DRAFTER):
        raise InputError(f"{text!r}: plan vanilla, suffix[:K] or kpad:K", field="configs")
    s = specs[0]
    if not s.speculative:
        return "vanilla", 0
    return ("kpad", s.k) if s.pad else ("suffix", 0 if text.strip() == "suffix" else s.k)


def run_seconds(config: str, concurrency: int, num_requests: int, history: str,
                mean_output_tokens: float, params_b: float) -> float:
    """Estimated wall seconds of one run (both passes of a hot run)."""
    tok_s = REF_TOK_S[config] * (concurrency / 32.0) ** 0.8 * min(1.0, 8.0 / max(params_b, 1.0))
    cold = num_requests * mean_output_tokens / tok_s
    if history == "hot":
        return cold * (1.0 + 1.0 / HOT_SPEEDUP[config])
    if history.startswith("repeat:"):                # the share P served first, then all
        return cold * (1.0 + float(history.split(":", 1)[1]))
    return cold


def make_plan(model: str, corpus: str, *, budget_min: float = DEFAULT_BUDGET_MIN,
              configs: tuple[str, ...] | list[str] = DEFAULT_CONFIGS,
              vllm_version: str | None = None, mean_output_tokens: float = 400.0,
              params_b: float = 8.0, tp: int = 1) -> Plan:
    """The engines and runs that fit `budget_min` GPU-minutes, most informative first; an
    engine at TP `tp` holds that many GPUs, so its seconds count `tp` times. A release newer
    than simkit's rules is planned as the newest the harness knows (the caller prints
    resolve_vllm_version's warning)."""
    if not budget_min > 0:
        raise InputError("must be > 0", field="budget-min")
    if not mean_output_tokens > 0:
        raise InputError("must be > 0", field="mean-output-tokens")
    key = resolve_vllm_version(vllm_version if vllm_version is not None else
                               get_vllm_version(None).key, tuple(ENGINE_OVERHEAD_S)).key
    parsed = [_config(c) for c in configs]
    if not parsed:
        raise InputError("give at least one configuration", field="configs")
    if _nearest({k: True for k in KPAD_BUILT_IN}, key, False):
        parsed = list(dict.fromkeys(("suffix", k) if name == "kpad" else (name, k)
                                    for name, k in parsed))
    overhead = _nearest(ENGINE_OVERHEAD_S, key, ENGINE_OVERHEAD_S["0.33"])
    plan = Plan(model, corpus, key, budget_min * 60.0, tp=tp)
    left = plan.budget_s / tp                     # wall seconds the GPUs can hold
    for name, k in parsed:
        runs: list[PlannedRun] = []
        used = overhead
        for conc, n, hist in _nearest(RUNS_BY_VERSION, key, RUNS):
            sec = run_seconds(name, conc, n, hist, mean_output_tokens, params_b)
            if used + sec <= left:
                runs.append(PlannedRun(corpus, conc, n, hist, sec))
                used += sec
            else:
                plan.left_out.append(f"{name}{':' + str(k) if k else ''} c{conc} n{n} {hist}: "
                                     "over the budget")
        label = f"{name}{':' + str(k) if k else ''}"
        if not runs:
            plan.left_out.append(f"engine {label}: over the budget")
            continue
        plan.engines.append(PlannedEngine(name, k, tuple(runs), overhead))
        left -= used
    return plan


__all__ = ["DEFAULT_BUDGET_MIN", "DEFAULT_CONFIGS", "default_configs", "ENGINE_OVERHEAD_S", "Plan", "PlannedEngine",
           "PlannedRun", "make_plan", "run_seconds"]
