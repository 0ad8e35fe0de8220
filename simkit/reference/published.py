"""The six published rows of the reference study, as data, with where they come from.

Only these rows are compared against; they are never used to set any simkit coefficient."""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("reference study (vLLM on DGX B200, 2026-06), as restated in the project's "
          "shared/docs/reference-study.md, section 'Published throughput (output tokens/s, mix "
          "corpus, concurrency 32)'")

CONDITIONS = {"hardware": "b200", "corpus": "mix", "concurrency": 32, "max_tokens": 8192,
              "max_model_len": 16384, "gpu_memory_utilization": 0.85,
              "host": "2x Intel Xeon Platinum 8570", "tp": "not published"}


@dataclass(frozen=True)
class PublishedRow:
    """One published row: output tok/s of van(OFF) and of the final configuration."""

    model: str          # simkit catalogue name
    study_name: str     # as the study spells it
    van_off: float
    final: float
    final_lever: str    # "bestKpad" or "dynamic-K"
    ratio: float        # as published (rounded to 2 decimals there)


PUBLISHED: tuple[PublishedRow, ...] = (
    PublishedRow("k-exaone-236b", "K-EXAONE-236B (MoE)", 2491, 11702, "bestKpad", 4.70),
    PublishedRow("llama-3.1-8b", "Llama-3.1-8B", 8850, 33531, "bestKpad", 3.79),
    PublishedRow("ds-r1-distill-qwen-7b", "DS-R1-Distill-Qwen-7B", 9058, 27664, "bestKpad", 3.05),
    PublishedRow("llama-3.1-405b-fp8", "Llama-3.1-405B-FP8", 1252, 3446, "bestKpad", 2.75),
    PublishedRow("qwen2.5-72b", "Qwen2.5-72B", 2735, 6897, "bestKpad", 2.52),
    PublishedRow("deepseek-r1", "DeepSeek-R1 (671B MoE)", 1538, 2294, "dynamic-K", 1.49),
)

# measured by the study but kept back: simkit predicts them without published figures
HELD_OUT: tuple[str, ...] = ("llama-3.1-70b", "qwen2.5-7b", "qwen2.5-32b",
                             "ds-r1-distill-qwen-32b", "ds-r1-distill-llama-70b")

# the study's summary findings used as qualitative checks (not numbers to fit)
FINDINGS = {
    "geomean_ratio_11_models": 2.7,
    "ratio_range": (1.49, 4.70),
    "best_k": "mix favours large K (K12); single chat and short code corpora favour small K",
    "dynamic": "dynamic-K (KS={4,6,12}) did not beat the offline best-K, except on DeepSeek-R1 (+3%)",
    "suffix": "suffix gives the first large gain on most models; it regressed on DeepSeek-R1",
}


def published(model: str) -> PublishedRow | None:
    """The published row of a catalogue model, or None (held out or not in the study)."""
    return next((r for r in PUBLISHED if r.model == model), None)
