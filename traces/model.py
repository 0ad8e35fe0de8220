"""The trace model: one real request with its prompt and the output a named model produced, and
a corpus of them for one simulated model (built-in, mix or imported: traces.corpora, traces.user)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class TraceRequest:
    """One real prompt as the model saw it (chat template applied) and that model's real output.

    Token ids are int32 arrays. `model` is the model that produced the output (for a proxy corpus
    it differs from the model being simulated; the corpus says so). `turn` counts from 1.
    """

    request_id: str
    prompt_ids: np.ndarray
    output_ids: np.ndarray
    corpus: str
    source: str
    model: str
    greedy: bool
    turn: int = 1

    @property
    def prompt_len(self) -> int:
        return int(self.prompt_ids.shape[0])

    @property
    def output_len(self) -> int:
        return int(self.output_ids.shape[0])


@dataclass
class Corpus:
    """Tokenized requests of one corpus for one simulated model, with where they came from.

    In "mix" each TraceRequest keeps the name of the corpus it came from in `.corpus`.
    """

    name: str
    model: str
    family: str
    requests: list[TraceRequest]
    sources: dict[str, str]  # source -> producing model
    proxy_note: str
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    proportions: dict[str, float] = field(default_factory=dict)  # corpus -> share (mix)
    source_notes: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.requests)
