"""Shared pieces of the per-source loaders: the text record, the source descriptor, JSON readers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simkit.errors import InputError
from simkit.jsonfile import not_utf8, parse_json  # noqa: F401 (not_utf8: traces.vllm_log)

Message = tuple[str, str]


@dataclass
class TextRecord:
    """One request before tokenization: the conversation so far, and the producer's real output.

    `exact_prompt` is the templated prompt exactly as the producer saw it (when the source stores
    it) and `exact_template` names that template ("llama3", "qwen", "r1"); it is used only when the
    simulated model's template is the same. `assistant_prefix` is text the harness appended after
    the generation prompt (EvalPlus), part of the prompt.
    """

    request_id: str
    messages: list[Message]
    output: str
    producer: str
    greedy: bool
    turn: int = 1
    exact_prompt: str | None = None
    exact_template: str | None = None
    assistant_prefix: str = ""


Loader = Callable[[Path, str, Counter], list[TextRecord]]


@dataclass(frozen=True)
class Source:
    """A loadable source: which corpus it feeds, the files per producing model, and its loader."""

    name: str
    corpus: str
    files: dict[str, tuple[str, ...]]  # producer -> traces-src relative paths it reads
    loader: Loader
    note: str = ""
    extra_files: tuple[str, ...] = field(default=())  # shared files (prompts) read for every producer
    # producer -> its run's generation cap (traces/caps.py); "*" = every producer not named;
    # a producer absent from both has no known cap (its outputs are never counted as capped)
    caps: dict = field(default_factory=dict)

    @property
    def producers(self) -> list[str]:
        return list(self.files)

    def paths(self, producer: str) -> list[str]:
        return list(self.files[producer]) + list(self.extra_files)

    def cap(self, producer: str):
        """The generation cap (traces.caps.OutputCap) of `producer`'s run, or None if unknown."""
        return self.caps.get(producer, self.caps.get("*"))

    def load(self, src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
        return self.loader(src, producer, skipped)


def loads_json(data: bytes, path: Path) -> object:
    """Parse one whole JSON document from bytes; any unreadable content names the file and
    line (simkit.jsonfile)."""
    return parse_json(data, path)


def read_json(path: Path) -> object:
    """Parse a whole-file JSON document; a syntax error names the file and line."""
    return loads_json(path.read_bytes(), path)


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    out = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            obj = parse_json(raw, path, line=lineno)
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object", path=str(path), line=lineno)
            out.append((lineno, obj))
    return out


def need(obj: dict, key: str, path: Path, line: int | None = None) -> object:
    """obj[key], or an InputError naming the file, line and missing field."""
    if key not in obj:
        raise InputError("missing field", path=str(path), line=line, field=key)
    return obj[key]


def skip_empty(prompt, output, skipped) -> bool:
    """True, and counted in `skipped` by reason, when the prompt or the output is empty: an
    importer drops such a record but never silently."""
    if not len(prompt):
        skipped["empty prompt"] += 1
        return True
    if not len(output):
        skipped["empty output"] += 1
        return True
    return False
