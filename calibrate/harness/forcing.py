"""The `forcing` adapter (vLLM 0.26, 0.33): the trace's tokens forced through the logits.

The recorder overwrites each sampled position's logits row (calibrate.forcing) so greedy sampling
picks the trace's token; K-pad and dynamic K run as scheduler plugins (calibrate.kpad,
calibrate.dynk); between runs the arctic-inference suffix tree is replaced by an empty one.
"""

from __future__ import annotations

from typing import Any

from calibrate.forcing import FORCE_COPY
from calibrate.harness.flags import RunnerFlags
from simkit.errors import InputError

SCHEDULERS = {"kpad": "calibrate.kpad.KPadScheduler", "dynamic": "calibrate.dynk.DynamicKScheduler"}


class ForcingAdapter:
    """Logits forcing, scheduler plugins, arctic tree reset."""

    name = "forcing"
    forces_logits = True
    force_copy = FORCE_COPY
    draft_count = "drafts"      # num_spec_tokens: real drafts plus -1 pads of the plugins

    def check(self, config: str, k: int, flags: RunnerFlags) -> None:
        """Refuse what this vLLM cannot run, before any engine starts."""
        if flags.any:
            raise InputError("--corpus-tokens, --k-table and --adaptive are vLLM "
                             "0.34 options; the vLLM here runs the V1 suffix drafter without them",
                             field="k-table" if flags.k_table else
                             "adaptive" if flags.adaptive else "corpus-tokens")
        if config in ("kpad", "dynamic") and k < 1:
            raise InputError(f"{config} needs --k >= 1 (dynamic: max K of KS)", field="k")

    def ran_config(self, config: str) -> str:
        """The configuration label the run row records."""
        return config

    def engine_kwargs(self) -> dict[str, Any]:
        return {}

    def speculative_config(self, config: str, k: int, flags: RunnerFlags) -> dict | None:
        if config == "vanilla":
            return None
        return {"method": "suffix", **({"num_speculative_tokens": k} if k > 0 else {})}

    def scheduler_cls(self, config: str) -> str | None:
        return SCHEDULERS.get(config)

    def sampling_kwargs(self, output_ids: Any) -> dict[str, Any]:
        return {}

    def reset_drafter(self, runner: Any, vllm_config: Any) -> list[str]:
        """Replace the arctic suffix tree (the V1 proposer's global cache) by an empty one."""
        drafter = getattr(runner, "drafter", None)
        if drafter is not None and hasattr(drafter, "suffix_cache"):
            from arctic_inference.suffix_decoding import SuffixDecodingCache

            spec = vllm_config.speculative_config
            drafter.suffix_cache = SuffixDecodingCache(
                max_tree_depth=spec.suffix_decoding_max_tree_depth,
                max_cached_requests=spec.suffix_decoding_max_cached_requests)
        return []


ADAPTER = ForcingAdapter()
