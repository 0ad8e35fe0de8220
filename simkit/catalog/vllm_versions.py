"""The vLLM versions simkit has rules and a calibration for: each one a set of named parts.

A `VllmVersion` names its parts, and each part is looked up by name in the registry of the layer
where it acts, the way vLLM picks a speculator class by method:

- per speculative method (`suffix`, `ngram`) a `MethodParts`: the drafter that builds its
  acceptance tables (`simkit.drafters.base` registry: "suffix" is arctic-inference's tree on
  0.26/0.33, "suffix_gpu" the GPU speculator of 0.34), the runner (`RUNNERS` below: V1
  synchronous or Model Runner V2 with async scheduling), the slot policy (`SLOT_POLICIES` names,
  mechanics in `simkit.engine.slots`: 0..K real drafts, or exactly K verified slots with
  fillers) and the default K;
- the graph-size rule (`GRAPH_RULES` names, mechanics in `simkit.engine.cudagraph`: capture
  sizes and dispatch);
- the calibration (`calibration_name`: simkit/data/calibrations/<gpu>-vllm<XY>.json) and the
  GPU harness adapter (`HARNESS_ADAPTERS` names, implemented in calibrate/: logits forcing on
  0.26/0.33, vLLM's own trace replay on 0.34).

Every rule carries the vLLM source lines it was read from (`sources`; docs/engine.md, "vLLM
versions"). How to add a version: docs/architecture.md, "How to add".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simkit.errors import UnknownNameError

VANILLA_METHOD = "none"       # the "method" of vanilla (no speculation); simkit.drafters.base.NO_DRAFTER


@dataclass(frozen=True)
class Runner:
    """How vLLM runs a configuration's steps: which model runner, and whether the host
    schedules step t+1 while the GPU runs step t (async scheduling)."""

    name: str
    async_scheduling: bool
    description: str


RUNNERS: dict[str, Runner] = {r.name: r for r in (
    Runner("v1-sync", False, "Model Runner V1, synchronous scheduling"),
    Runner("mrv2-async", True, "Model Runner V2 with async scheduling"),
)}

# slot policies (simkit.engine.slots implements each): "variable" = 0..K real drafts per decode
# request (no placeholders); "padded" = K-pad, real drafts padded to K with -1 placeholders that
# are always rejected; "exact-k" = every decode request verifies exactly K slots, the slots
# without a draft hold the last sampled token and are verified like drafts (vLLM 0.34)
SLOT_POLICIES = ("variable", "padded", "exact-k")
# graph-size rules (simkit.engine.cudagraph.GRAPH_RULES implements each)
GRAPH_RULES = ("v026-rounded", "v033-uniform-rounded", "v034-request-keyed")
# harness adapters (calibrate/ implements each): how a GPU run is made to follow a trace
HARNESS_ADAPTERS = ("forcing", "trace_replay")


@dataclass(frozen=True)
class MethodParts:
    """What one speculative method (or vanilla) is made of on one vLLM version."""

    drafter: str              # registered drafter name (simkit.drafters.base) or "none"
    runner: str               # a RUNNERS key
    slots: str                # a SLOT_POLICIES name
    default_k: int            # K when num_speculative_tokens is unset (0: vanilla)
    drafts_on_host: bool      # the drafter runs on the CPU after a sync (priced as host work)
    refused: str = ""         # why simkit does not predict it on this version ("" = it does)


@dataclass(frozen=True)
class VllmVersion:
    """One vLLM release's parts and rules, as far as they change what simkit predicts."""

    key: str                          # "0.26": what --vllm-version takes (and "0.26.0")
    release: str                      # the exact release the rules and calibration come from
    methods: dict[str, MethodParts]   # method ("none", "suffix", "ngram") -> its parts
    graph_rule: str                   # a GRAPH_RULES name
    harness_adapter: str              # a HARNESS_ADAPTERS name
    kpad: str                         # what kpad:K is: "padded" (its own rows) or "alias" (= suffix:K)
    batch_size_table: str = ""        # why num_speculative_tokens_per_batch_size is refused ("" = modelled)
    adaptive_verification: str = ""   # why enable_adaptive_verification is refused ("" = modelled)
    calibration_note: str = ""        # how its calibration was made, when not from its own runs
    sources: dict[str, str] = field(default_factory=dict)   # rule -> vllm file:line it was read from

    @property
    def label(self) -> str:
        """'vLLM 0.33.0': how every header names it."""
        return f"vLLM {self.release}"

    def calibration_name(self, hardware: str) -> str:
        """The embedded calibration fitted (or transferred) for this version on that GPU."""
        return f"{hardware}-vllm{self.key.replace('.', '')}"

    def method(self, name: str) -> MethodParts:
        """The parts of one method ("none" for vanilla); UnknownNameError otherwise."""
        if name not in self.methods:
            raise UnknownNameError(f"speculative method on {self.label}", name, list(self.methods))
        return self.methods[name]

    def method_of_drafter(self, drafter: str) -> str | None:
        """The method whose drafter is `drafter` on this version (None: none of them)."""
        return next((m for m, p in self.methods.items() if p.drafter == drafter), None)

    def parts_for(self, drafter: str) -> MethodParts | None:
        """The parts of the method `drafter` drafts for on this version (None: not this
        version's drafter, e.g. arctic's 'suffix' tree on 0.34)."""
        method = self.method_of_drafter(drafter)
        return None if method is None else self.methods[method]

    def runner_for(self, drafter: str) -> Runner:
        """The runner a configuration of `drafter` ("none": vanilla) runs on."""
        parts = self.parts_for(drafter)
        return RUNNERS[(parts or self.methods[VANILLA_METHOD]).runner]

    def slots_for(self, drafter: str, padded: bool) -> str:
        """The slot policy of a configuration: exact-K where the method verifies K slots,
        else K-pad's placeholders when padded, else the drafter's own 0..K drafts."""
        parts = self.parts_for(drafter)
        if parts is not None and parts.slots == "exact-k":
            return "exact-k"
        return "padded" if padded else "variable"

    # the flags the rules were once described by, derived from the parts (kept for callers)
    @property
    def uniform_decode_sizes(self) -> bool:
        """Spec decode adds n*(1+K) capture sizes (0.33 on)."""
        return self.graph_rule != "v026-rounded"

    @property
    def ngram_modelled(self) -> bool:
        """n-gram drafting runs as simkit's n-gram tables assume."""
        return "ngram" in self.methods and not self.methods["ngram"].refused

    @property
    def ngram_note(self) -> str:
        """Why n-gram is not predicted on this version ('' when it is)."""
        return self.methods["ngram"].refused if "ngram" in self.methods else ""


_V1_SUFFIX = MethodParts("suffix", "v1-sync", "variable", 24, True)
_VANILLA = MethodParts("none", "mrv2-async", "variable", 0, False)
_NGRAM_GPU_NOTE = ("vLLM {v} runs n-gram drafting on Model Runner V2 with async scheduling and a "
                   "GPU proposer that always drafts K tokens (unmatched slots repeat the last "
                   "token); simkit's n-gram tables follow the CPU proposer of 0.26: use "
                   "--vllm-version 0.26")

V026 = VllmVersion(
    key="0.26", release="0.26.0",
    methods={"none": _VANILLA, "suffix": _V1_SUFFIX,
             "ngram": MethodParts("ngram", "v1-sync", "variable", 4, True)},
    graph_rule="v026-rounded", harness_adapter="forcing", kpad="padded",
    batch_size_table="simkit models num_speculative_tokens_per_batch_size on vLLM 0.34 only",
    adaptive_verification=("vLLM 0.26 has no adaptive verification: suffix decoding runs on the V1 "
                           "model runner there; it runs on vLLM 0.34"),
    sources={
        "capture sizes": "vllm/config/vllm.py:1739-1845 (_set_cudagraph_sizes); "
                         "vllm/config/compilation.py:1465-1548 (rounded to multiples of 1+K)",
        "dispatch": "vllm/v1/cudagraph_dispatcher.py:72, 143-146, 205-231, 278, 313-318",
        "runner": "vllm/config/vllm.py:549-590, 2127-2213 (suffix and ngram fall back to V1)",
        "async scheduling": "vllm/config/vllm.py:1059-1107 (off for suffix and ngram)",
        "suffix proposer": "vllm/v1/spec_decode/suffix_decoding.py; config/speculative.py:192-208",
    })

V033 = VllmVersion(
    key="0.33", release="0.33.0",
    methods={"none": _VANILLA, "suffix": _V1_SUFFIX,
             "ngram": MethodParts("ngram", "mrv2-async", "exact-k", 4, False,
                                  refused=_NGRAM_GPU_NOTE.format(v="0.33"))},
    graph_rule="v033-uniform-rounded", harness_adapter="forcing", kpad="padded",
    batch_size_table=("vLLM 0.33 refuses num_speculative_tokens_per_batch_size for suffix on the "
                      "V1 runner (vllm/config/vllm.py:1088-1108); it runs on vLLM 0.34"),
    adaptive_verification=("vLLM 0.33 cannot use adaptive verification with suffix decoding: "
                           "suffix runs on the V1 model runner there, and adaptive verification "
                           "is part of Model Runner V2; it runs on vLLM 0.34"),
    sources={
        "capture sizes": "vllm/config/vllm.py:2398-2604 (adds n*(1+K) uniform-decode sizes, "
                         "n in 1,2,4,8..248 step 8,256.. step 16); "
                         "vllm/config/compilation.py:1503-1565 (V1: rounded to multiples of 1+K)",
        "dispatch": "vllm/v1/cudagraph_dispatcher.py:71, 141-144, 203-229, 276, 311-316 (unchanged)",
        "runner": "vllm/config/vllm.py:731-769, 3053-3089 (suffix falls back to V1: 'Model Runner "
                  "V2 does not yet support speculative method suffix'; ngram runs on V2)",
        "async scheduling": "vllm/config/vllm.py:1652-1719 (off with suffix on the V1 runner)",
        "ngram proposer": "vllm/v1/worker/gpu/spec_decode/ngram/speculator.py:133-148",
        "host work per step": "vllm/v1/core/sched/scheduler.py:2407-2415 (cache_blocks per running "
                              "request per step under spec decode); "
                              "vllm/v1/worker/gpu_model_runner.py:2188, 3413-3431 (spec path on "
                              "steps without drafts)",
    })

V034 = VllmVersion(
    key="0.34", release="0.34.0",
    methods={"none": _VANILLA,
             "suffix": MethodParts("suffix_gpu", "mrv2-async", "exact-k", 8, False),
             "ngram": MethodParts("ngram", "mrv2-async", "exact-k", 4, False,
                                  refused=_NGRAM_GPU_NOTE.format(v="0.34"))},
    graph_rule="v034-request-keyed", harness_adapter="trace_replay", kpad="alias",
    calibration_note=("transferred from the vLLM 0.33 calibration, not yet measured on vLLM "
                      "0.34 runs"),
    sources={
        "runner": "vllm/v1/worker/gpu_worker.py:579-587 (Model Runner V2 always; V1 removed, "
                  "platforms/interface.py:1481-1491)",
        "async scheduling": "vllm/config/scheduler.py:246; config/vllm.py:1610-1637 (on for "
                            "every configuration, spec decode or not)",
        "suffix speculator": "vllm/v1/worker/gpu/spec_decode/speculator_config.py:298-311; "
                             "v1/worker/gpu/spec_decode/suffix/config.py:14-18 (GPU kernels, "
                             "suffix/speculator.py)",
        "default K": "vllm/v1/worker/gpu/spec_decode/suffix/config.py:25-32 "
                     "(min(8, suffix_decoding_max_tree_depth))",
        "exactly K slots": "vllm/v1/worker/gpu/spec_decode/suffix/speculator.py:334-337 (slots "
                           "without a draft hold the last sampled token); "
                           "v1/worker/gpu/spec_decode/rejection_sampler_utils.py:598-752 "
                           "(verified like drafts)",
        "capture sizes": "vllm/config/vllm.py:2398-2504, 2661-2671 (token grid, decode graphs "
                         "keyed by request count n, captured as n*(1+K) tokens); "
                         "config/compilation.py:54-68, 751-806",
        "dispatch": "vllm/v1/worker/gpu/cudagraph_utils.py:154-164, 331-352, 558-602; "
                    "v1/worker/utils.py:986-1003",
        "drafts cut near max_model_len": "vllm/v1/core/sched/scheduler.py:866-873",
        "batch-size K table": "vllm/config/speculative.py:569-575; "
                              "v1/spec_decode/dynamic/utils.py:7-148 (validation, dense table); "
                              "v1/core/sched/scheduler.py:1764-1769, 1802; "
                              "v1/core/sched/async_scheduler.py:22, 41 (K from the step before); "
                              "v1/worker/gpu/model_runner.py:2388-2389 (K-max drafts cut to k); "
                              "config/vllm.py:677-706 (graphs per K tier)",
        "host work per step": "vllm/v1/worker/gpu/spec_decode/utils.py:83-92 (no draft "
                              "transfer); v1/engine/core.py:758-871 (async overlap)",
        "trace replay": "vllm/v1/worker/gpu/sample/trace_replay.py:136-213; "
                        "sampling_params.py:450-453",
    })

VERSIONS: dict[str, VllmVersion] = {v.key: v for v in (V026, V033, V034)}
DEFAULT_VERSION = "0.33"              # what --vllm-version means when not given (one constant)


def get_vllm_version(name: str | None = None) -> VllmVersion:
    """The version for '0.33', '0.33.0', 'v0.33' (None: DEFAULT_VERSION); an unknown one is an
    error naming the known versions (records and calibrations name exact versions)."""
    if name is None:
        return VERSIONS[DEFAULT_VERSION]
    if isinstance(name, VllmVersion):
        return name
    text = str(name).strip().lower().removeprefix("v")
    for v in VERSIONS.values():
        if text in (v.key, v.release):
            return v
    raise UnknownNameError("vLLM version (--vllm-version)", str(name), list(VERSIONS))


__all__ = ["DEFAULT_VERSION", "GRAPH_RULES", "HARNESS_ADAPTERS", "MethodParts", "RUNNERS",
           "Runner", "SLOT_POLICIES", "VANILLA_METHOD", "VERSIONS", "VllmVersion",
           "get_vllm_version"]
