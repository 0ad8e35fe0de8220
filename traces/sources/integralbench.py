"""IntegralBench (math: hard definite integrals), DeepSeek-R1 via the deepseek-reasoner API with
its full reasoning: 317 problems x 3 sampled repeats (reasoning for deepseek-r1).

Per problem `test_dataset_<id>/prompt_test_dataset_<id>.txt` holds the exact user message and
`test_dataset_<id>_<k>/test_test_dataset_<id>_<k>.md` (k = 1..3) the output. 664 outputs are
"<think>\\n{reasoning}\\n</think>\\n\\n{answer}"; the text after "<think>" is the output (the R1
format's generation prompt already opens the think block). The other 287 hold only the final
answer (that run did not capture the reasoning): not what the server generated, so they are
skipped and counted. The files are many (1,268 read), so the source names one file,
integralbench/MANIFEST.tsv (path, size, git blob id of every copied file): its digest keys the
tokenization cache and every file read is checked against its blob id, so a changed file is an
error naming it. traces-src/SOURCES.md, ADDITIONS 2026-12-01, section 2.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from simkit.errors import InputError
from traces.sources.base import Source, TextRecord, not_utf8

PRODUCER = "DeepSeek-R1"
MANIFEST = "integralbench/MANIFEST.tsv"
_BASE = "test_cases/deepseek-reasoner/test_dataset"
THINK = "<think>"


def read_manifest(path: Path) -> dict[str, tuple[int, str]]:
    """{relative path: (bytes, git blob id)} from a collector's MANIFEST.tsv."""
    out = {}
    for line, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        parts = raw.split("\t")
        if len(parts) != 3 or not parts[1].isdigit():
            raise InputError("expected path<TAB>bytes<TAB>blob id", path=str(path), line=line)
        out[parts[0]] = (int(parts[1]), parts[2])
    return out


def _checked_text(root: Path, rel: str, manifest: dict[str, tuple[int, str]]) -> str:
    """The file's UTF-8 text after checking its git blob id against the manifest."""
    path = root / rel
    if not path.is_file():
        raise InputError("raw trace file missing (listed in MANIFEST.tsv)", path=str(path))
    data = path.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    if blob != manifest[rel][1]:
        raise InputError(f"content differs from MANIFEST.tsv (git blob {blob}, listed "
                         f"{manifest[rel][1]})", path=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(path, data, exc) from None


def _load(src: Path, producer: str, skipped: Counter) -> list[TextRecord]:
    root = src / "integralbench"
    manifest = read_manifest(src / MANIFEST)
    prompts = sorted((r for r in manifest if r.startswith(_BASE) and "/prompt_test_dataset_" in r),
                     key=lambda r: int(r.rsplit("_", 1)[1].split(".")[0]))
    if not prompts:
        raise InputError("no prompt_test_dataset_<id>.txt listed", path=str(src / MANIFEST))
    out = []
    for prel in prompts:
        pid = prel.rsplit("_", 1)[1].split(".")[0]
        prompt = _checked_text(root, prel, manifest)
        if not prompt.strip():
            skipped["missing prompt"] += 1
            continue
        for k in (1, 2, 3):
            orel = f"{_BASE}/test_dataset_{pid}/test_dataset_{pid}_{k}/test_test_dataset_{pid}_{k}.md"
            if orel not in manifest:
                skipped["output file not in MANIFEST.tsv"] += 1
                continue
            text = _checked_text(root, orel, manifest)
            if not text.strip():
                skipped["empty output"] += 1
                continue
            if not text.startswith(THINK):
                skipped["final answer only (reasoning not captured)"] += 1
                continue
            output = text[len(THINK):].lstrip("\n")
            out.append(TextRecord(f"integralbench/{pid}/{k}", [("user", prompt)], output,
                                  producer, greedy=False))
    return out


SOURCE = Source(name="integralbench", corpus="reasoning", files={PRODUCER: (MANIFEST,)},
                loader=_load, caps={},
                note="deepseek-reasoner API (most likely R1-0528), sampled, 3 repeats per "
                     "problem; max_tokens not recorded (no cap known)")
