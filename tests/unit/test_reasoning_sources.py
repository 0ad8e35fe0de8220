"""KORGym and IntegralBench loaders on small hand-written files: bad input names file, line and
field; empty responses and answer-only outputs are counted, never dropped silently; a file that
differs from IntegralBench's manifest is named."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from simkit.errors import InputError
from traces.sources import SOURCES
from traces.sources.integralbench import MANIFEST

_BASE = "test_cases/deepseek-reasoner/test_dataset"


def _korgym(tmp_path, rows):
    rel = SOURCES["korgym_instruct"].files["Qwen2.5-7B-Instruct"][0]
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for other in SOURCES["korgym_instruct"].files["Qwen2.5-7B-Instruct"][1:]:
        (tmp_path / other).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / other).write_text("")
    return path


def test_korgym_counts_empty_responses_and_cuts_a_leading_think(tmp_path):
    _korgym(tmp_path, [{"prompt": "p1", "response": ["<think>\nr</think>a"], "seed": 0},
                       {"prompt": "p2", "response": [""], "seed": 1}])
    skipped: Counter = Counter()
    recs = SOURCES["korgym_instruct"].load(tmp_path, "Qwen2.5-7B-Instruct", skipped)
    assert [r.output for r in recs] == ["r</think>a"]
    assert dict(skipped) == {"empty response (client error)": 1}
    assert not recs[0].greedy


def test_korgym_bad_response_names_file_line_and_field(tmp_path):
    path = _korgym(tmp_path, [{"prompt": "p1", "response": ["x"]},
                              {"prompt": "p2", "response": "not a list"}])
    with pytest.raises(InputError) as exc:
        SOURCES["korgym_instruct"].load(tmp_path, "Qwen2.5-7B-Instruct", Counter())
    text = str(exc.value)
    assert str(path) in text and "line 2" in text and "response" in text


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _integral(tmp_path, outputs, tamper=False):
    root = tmp_path / "integralbench"
    files = {f"{_BASE}/test_dataset_7/prompt_test_dataset_7.txt": b"integrate x"}
    for k, text in outputs.items():
        files[f"{_BASE}/test_dataset_7/test_dataset_7_{k}/test_test_dataset_7_{k}.md"] = text
    lines = []
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data + (b"!" if tamper and rel.endswith(".md") else b""))
        lines.append(f"{rel}\t{len(data)}\t{_blob(data)}")
    (tmp_path / MANIFEST).write_text("\n".join(lines) + "\n")


def test_integralbench_keeps_thinking_outputs_and_counts_answer_only(tmp_path):
    _integral(tmp_path, {1: b"<think>\nwork\n</think>\n\n{}", 2: b'{"answer": "1"}'})
    skipped: Counter = Counter()
    recs = SOURCES["integralbench"].load(tmp_path, "DeepSeek-R1", skipped)
    assert [r.output for r in recs] == ["work\n</think>\n\n{}"]
    assert [r.request_id for r in recs] == ["integralbench/7/1"]
    assert dict(skipped) == {"final answer only (reasoning not captured)": 1,
                             "output file not in MANIFEST.tsv": 1}


def test_integralbench_file_changed_since_the_manifest_is_named(tmp_path):
    _integral(tmp_path, {1: b"<think>\nw</think>x"}, tamper=True)
    with pytest.raises(InputError) as exc:
        SOURCES["integralbench"].load(tmp_path, "DeepSeek-R1", Counter())
    assert "test_test_dataset_7_1.md" in str(exc.value) and "MANIFEST" in str(exc.value)
