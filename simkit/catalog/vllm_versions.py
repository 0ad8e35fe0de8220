"""The vLLM versions simkit has rules and a calibration for: what differs between them, in one place.

Each `VllmVersion` states the engine rules simkit models that changed between releases, with the
vLLM source lines they were read from (docs/engine.md, "vLLM versions"). The mechanics that use a
rule live where the rule acts (capture sizes: simkit.engine.cudagraph; the runner and async
scheduling per drafter: simkit.engine.config; host and device coefficients: one calibration per
(GPU, version), simkit/data/calibrations/<gpu>-vllm<version>.json).

How to add a version: read its wheel's source (`pip download vllm==X --no-deps`), add one
`VllmVersion` below with every rule that differs and the file:line it came from, record runs on
the GPU with that vLLM (calibrate/gpu/session.sh), fit `simkit calibrate fit --vllm-version X`,
and list it in VERSIONS; `--vllm-version` then accepts it everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simkit.errors import UnknownNameError


@dataclass(frozen=True)
class VllmVersion:
    """One vLLM release's engine rules, as far as they change what simkit predicts."""

    key: str                          # "0.26": what --vllm-version takes (and "0.26.0")
    release: str                      # the exact release the rules and calibration come from
    uniform_decode_sizes: bool        # spec decode adds n*(1+K) capture sizes (0.33+)
    ngram_modelled: bool              # n-gram drafting runs as simkit's n-gram model assumes
    ngram_note: str = ""              # why not, when it does not
    sources: dict[str, str] = field(default_factory=dict)   # rule -> vllm file:line it was read from

    @property
    def label(self) -> str:
        """'vLLM 0.33.0': how every header names it."""
        return f"vLLM {self.release}"

    def calibration_name(self, hardware: str) -> str:
        """The embedded calibration fitted on this version's runs on that GPU."""
        return f"{hardware}-vllm{self.key.replace('.', '')}"


V026 = VllmVersion(
    key="0.26", release="0.26.0", uniform_decode_sizes=False, ngram_modelled=True,
    sources={
        "capture sizes": "vllm/config/vllm.py:1739-1845 (_set_cudagraph_sizes); "
                         "vllm/config/compilation.py:1465-1548 (rounded to multiples of 1+K)",
        "dispatch": "vllm/v1/cudagraph_dispatcher.py:72, 143-146, 205-231, 278, 313-318",
        "runner": "vllm/config/vllm.py:549-590, 2127-2213 (suffix and ngram fall back to V1)",
        "async scheduling": "vllm/config/vllm.py:1059-1107 (off for suffix and ngram)",
        "suffix proposer": "vllm/v1/spec_decode/suffix_decoding.py; config/speculative.py:192-208",
    })

V033 = VllmVersion(
    key="0.33", release="0.33.0", uniform_decode_sizes=True, ngram_modelled=False,
    ngram_note=("vLLM 0.33 runs n-gram drafting on Model Runner V2 with async scheduling and a GPU "
                "proposer that always drafts K tokens (unmatched slots repeat the last token); "
                "simkit's n-gram tables follow the CPU proposer of 0.26: use --vllm-version 0.26"),
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

VERSIONS: dict[str, VllmVersion] = {v.key: v for v in (V026, V033)}
DEFAULT_VERSION = "0.33"              # the newest simkit has rules and a calibration for


def get_vllm_version(name: str | None = None) -> VllmVersion:
    """The version for '0.33', '0.33.0', 'v0.33' (None: the newest); an unknown one is an error
    naming the known versions."""
    if name is None:
        return VERSIONS[DEFAULT_VERSION]
    if isinstance(name, VllmVersion):
        return name
    text = str(name).strip().lower().removeprefix("v")
    for v in VERSIONS.values():
        if text in (v.key, v.release):
            return v
    raise UnknownNameError("vLLM version (--vllm-version)", str(name), list(VERSIONS))


__all__ = ["DEFAULT_VERSION", "VERSIONS", "VllmVersion", "get_vllm_version"]
