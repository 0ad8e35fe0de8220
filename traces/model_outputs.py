"""Which producers' outputs each simulated model replays: tokenizer family, own producer, proxies.

Not the model's architecture (that is simkit.catalog.models.ModelSpec): this is the traces side,
the text a simulated model's requests are built from.

For each (model, source) the corpus uses the first producer in `preference` that the source has:
the model's own outputs first, then the nearest model of the same tokenizer family, then (only
when a source has no output from that family) other families' text re-tokenized. Every choice
that is not the model's own output is reported in the corpus's proxy_note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simkit.errors import UnknownNameError

L8, L70, L405 = "Llama-3.1-8B-Instruct", "Llama-3.1-70B-Instruct", "Llama-3.1-405B-Instruct"
L3_8, L3_70 = "Llama-3-8B-Instruct", "Llama-3-70B-Instruct"
Q7, Q32, Q72 = "Qwen2.5-7B-Instruct", "Qwen2.5-32B-Instruct", "Qwen2.5-72B-Instruct"
Q2_7, Q2_72 = "Qwen2-7B-Instruct", "Qwen2-72B-Instruct"
SKY, QWQ = "Sky-T1-32B-Preview", "QwQ-32B-Preview"
R1, R1DQ14, R1DL8 = "DeepSeek-R1", "DeepSeek-R1-Distill-Qwen-14B", "DeepSeek-R1-Distill-Llama-8B"
R1DQ7, R1DQ32 = "DeepSeek-R1-Distill-Qwen-7B", "DeepSeek-R1-Distill-Qwen-32B"
R1DL70 = "DeepSeek-R1-Distill-Llama-70B"

# Vocabulary of each producing model (text is re-tokenized anyway; this decides "same family").
PRODUCER_VOCAB = {L8: "llama3", L70: "llama3", L405: "llama3", L3_8: "llama3", L3_70: "llama3",
                  R1DL8: "llama3", Q7: "qwen", Q32: "qwen", Q72: "qwen", Q2_7: "qwen",
                  Q2_72: "qwen", SKY: "qwen", QWQ: "qwen", R1DQ14: "qwen", R1: "deepseek-v3",
                  R1DQ7: "qwen", R1DQ32: "qwen", R1DL70: "llama3"}
ALL_PRODUCERS = list(PRODUCER_VOCAB)
_DISTILL_NOTE = ("the distill's own outputs (full <think> traces) exist only for KORGym puzzles "
                 "(its reasoning corpus); the other corpora, puzzle included, replay "
                 "non-reasoning models' answers (no <think> trace), so output lengths there are "
                 "not the distill's")
# Corpora whose sources differ per model: the model's own long-CoT outputs where they exist
# (KORGym for the three distills, IntegralBench for DeepSeek-R1) instead of the truncated
# r1distill traces every other model keeps (traces/corpora.py CORPORA).
_OWN_REASONING_KORGYM = {"reasoning": ("korgym",)}
_OWN_REASONING_R1 = {"reasoning": ("integralbench",)}
VOCAB_OF_FAMILY = {"llama3": "llama3", "r1-llama": "llama3", "qwen": "qwen", "r1-qwen": "qwen"}


@dataclass(frozen=True)
class ModelOutputs:
    """Whose outputs a simulated model replays: its id, tokenizer family, own producer name,
    proxy order and the corpora whose sources differ for it."""

    model_id: str
    family: str
    own: str
    preference: tuple[str, ...]
    family_note: str = ""
    corpora: dict = field(default_factory=dict)   # corpus -> sources, where not CORPORA's

    def producer_order(self) -> list[str]:
        """preference, then every other producer: same vocabulary first, fixed order within."""
        rest = [p for p in ALL_PRODUCERS if p not in self.preference]
        vocab = VOCAB_OF_FAMILY[self.family]
        rest.sort(key=lambda p: PRODUCER_VOCAB[p] != vocab)
        return list(self.preference) + rest


MODELS: dict[str, ModelOutputs] = {m.model_id: m for m in (
    # Q72 before the R1 distills: the largest instruct model's answers where no Llama-3.1 output
    # exists (KORGym puzzle); the r1distill traces still come from R1DL8 (Q72 has none)
    ModelOutputs("llama-3.1-8b", "llama3", L8, (L8, L70, L405, L3_8, L3_70, Q72, R1DL8)),
    ModelOutputs("llama-3.1-70b", "llama3", L70, (L70, L405, L8, L3_70, L3_8, Q72, R1DL8)),
    ModelOutputs("llama-3.1-405b-fp8", "llama3", L405, (L405, L70, L8, L3_70, L3_8, Q72, R1DL8)),
    ModelOutputs("qwen2.5-7b", "qwen", Q7, (Q7, Q32, Q72, Q2_7, Q2_72, SKY, QWQ, R1DQ14)),
    ModelOutputs("qwen2.5-32b", "qwen", Q32, (Q32, Q72, Q7, SKY, QWQ, Q2_72, Q2_7, R1DQ14)),
    ModelOutputs("qwen2.5-72b", "qwen", Q72, (Q72, Q32, Q7, Q2_72, Q2_7, SKY, QWQ, R1DQ14)),
    ModelOutputs("ds-r1-distill-qwen-7b", "r1-qwen", R1DQ7,
                 (R1DQ7, R1DQ14, R1, QWQ, Q7, Q32, Q72, Q2_7, Q2_72, SKY), family_note=_DISTILL_NOTE,
                 corpora=_OWN_REASONING_KORGYM),
    ModelOutputs("ds-r1-distill-qwen-32b", "r1-qwen", R1DQ32,
                 (R1DQ32, R1DQ14, R1, QWQ, Q32, Q72, Q7, SKY, Q2_72, Q2_7), family_note=_DISTILL_NOTE,
                 corpora=_OWN_REASONING_KORGYM),
    ModelOutputs("ds-r1-distill-llama-70b", "r1-llama", R1DL70,
                 (R1DL70, R1DL8, R1, L70, L405, L8, L3_70, L3_8, Q72), family_note=_DISTILL_NOTE,
                 corpora=_OWN_REASONING_KORGYM),
    ModelOutputs("deepseek-r1", "r1-llama", R1, (R1, R1DL70, R1DL8, R1DQ14, L405, Q72, L70, QWQ, Q32),
                 family_note=("DeepSeek-R1's own tokenizer (DeepSeek-V3, ~129k vocab) is not "
                              "available offline; proxy tokenizer r1-llama (Llama-3 128k vocab, "
                              "same 1-3 digit grouping, R1 chat format); R1's own outputs exist only "
                              "for summarization (final answer, no think trace) and IntegralBench (full "
                              "reasoning, the reasoning corpus)"),
                 corpora=_OWN_REASONING_R1),
    ModelOutputs("k-exaone-236b", "llama3", "K-EXAONE-236B", (L405, L70, L8, L3_70, L3_8, Q72),
                 family_note=("no EXAONE tokenizer or outputs are available; proxy tokenizer llama3 "
                              "with the Llama-3.1 chat template and the largest Llama-3.1 outputs")),
)}


def list_models() -> list[str]:
    """Simulated model ids, in catalogue order."""
    return list(MODELS)


def model_outputs(model: str) -> ModelOutputs:
    """The outputs catalogue entry for a model id (UnknownNameError lists the known ids)."""
    if model not in MODELS:
        raise UnknownNameError("model", model, list(MODELS))
    return MODELS[model]


def tokenizer_family(model: str) -> str:
    """The tokenizer family ("llama3", "qwen", "r1-qwen", "r1-llama") used for a model."""
    return model_outputs(model).family
