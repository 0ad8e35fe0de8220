"""The real tokenizer files load offline with the right patterns, special tokens and templates."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkit.errors import UnknownNameError
from simkit.paths import traces_src_dir
from traces.chat import llama3_chat, qwen25_chat, r1_chat
from traces.tokenizers import FAMILIES, encode_output, encode_prompt, get_tokenizer

SRC = traces_src_dir()
pytestmark = pytest.mark.skipif(SRC is None, reason="../shared/traces-src not present")


@pytest.mark.parametrize("family, the, hello", [
    ("llama3", 279, 9906), ("r1-llama", 279, 9906), ("qwen", 279, 9707), ("r1-qwen", 279, 9707),
])
def test_pinned_ids(family, the, hello):
    enc = get_tokenizer(family)
    assert enc.encode(" the") == [the]
    assert enc.encode("Hello") == [hello]


def test_vocab_sizes_and_special_ids():
    llama, qwen = get_tokenizer("llama3"), get_tokenizer("qwen")
    assert llama.n_vocab == 128256 and qwen.n_vocab == 151665
    assert llama.encode("<|begin_of_text|><|eot_id|><|python_tag|>", allowed_special="all") == [
        128000, 128009, 128010]
    assert llama.encode("<|reserved_special_token_247|>", allowed_special="all") == [128255]
    assert qwen.encode("<|im_start|><|im_end|><|file_sep|>", allowed_special="all") == [
        151644, 151645, 151664]
    r1q = get_tokenizer("r1-qwen")
    assert r1q.encode("<｜begin▁of▁sentence｜><｜User｜><｜Assistant｜><think></think>",
                      allowed_special="all") == [151646, 151644, 151645, 151648, 151649]


def test_digit_grouping_differs_between_families():
    # Llama-3 groups up to three digits per pre-token, Qwen2 splits every digit.
    assert len(get_tokenizer("llama3").encode("1234567")) == 3
    assert len(get_tokenizer("qwen").encode("1234567")) == 7


def test_output_encoding_treats_markers_as_text_except_think():
    text = "see <|im_end|> here"
    assert 151645 not in encode_output("qwen", text)
    assert get_tokenizer("qwen").decode(encode_output("qwen", text)) == text
    assert encode_output("r1-qwen", "a</think>b").count(151649) == 1


def test_unknown_family():
    with pytest.raises(UnknownNameError):
        get_tokenizer("gpt2")


_TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=150, deadline=None)
@given(_TEXTS)
def test_round_trip_arbitrary_text(text):
    for family in FAMILIES:
        enc = get_tokenizer(family)
        assert enc.decode(encode_output(family, text)) == text


def test_round_trip_real_multilingual_text():
    rows = [json.loads(x) for x in
            (SRC / "wmt24_docmt/Qwen2.5-7B-Instruct/wmt2024_en-ja_single._gen.jsonl").open()]
    for family in ("llama3", "qwen"):
        enc = get_tokenizer(family)
        for row in rows[:40]:
            for text in (row["original"], row["translation"]):
                assert enc.decode(encode_output(family, text)) == text


@pytest.mark.parametrize("rel, template", [
    ("zeroeval/math-l5/Meta-Llama-3.1-8B-Instruct.json", llama3_chat),
    ("zeroeval/crux/Meta-Llama-3.1-70B-Instruct.json", llama3_chat),
    ("zeroeval/math-l5/Qwen2.5-7B-Instruct.json", qwen25_chat),
    ("zeroeval/crux/Qwen2.5-72B-Instruct.json", qwen25_chat),
])
def test_templates_reproduce_vllm_model_input(rel, template):
    """Our template functions rebuild ZeroEval's exact vLLM prompt strings byte for byte."""
    rows = json.loads((SRC / rel).read_bytes())
    mismatched = [r["session_id"] for r in rows
                  if template([("user", r["chat_history"][0])]) != r["model_input"]]
    assert mismatched == []


@pytest.mark.parametrize("name", ["responses_deepseek-r1-distill-qwen-14b.json",
                                  "responses_deepseek-r1-distill-llama-8b-legacy-messages.json"])
def test_r1_template_matches_stored_distill_prompts(name):
    rows = json.loads((SRC / "r1distill_thinking_interp" / name).read_bytes())
    bos = "<｜begin▁of▁sentence｜>"
    for r in rows:
        prompt = r1_chat([("user", r["original_message"]["content"])])
        assert prompt.startswith(bos)
        assert r["full_response"].startswith(prompt[len(bos):])


def test_chat_template_tokens():
    ids = encode_prompt("llama3", llama3_chat([("user", "  Hello  ")]))
    assert ids[0] == 128000 and ids[-4:] == [128006, 78191, 128007, 271]
    assert 9906 in ids  # content trimmed, so "Hello" is encoded without a leading space
    q = encode_prompt("qwen", qwen25_chat([("system", "S"), ("user", "Hi")], False))
    assert q[0] == 151644 and q[-1] == 198 and q.count(151644) == 2


@pytest.mark.parametrize("family", FAMILIES)
def test_fingerprint_is_the_encodings_without_building_it(family, monkeypatch):
    """A cached corpus's key needs the fingerprint, not the Encoding (a second of BPE parsing):
    the digest is the one of the built Encoding's own pattern and specials."""
    import hashlib

    from traces import tokenizers as tk

    tk.tokenizer_fingerprint.cache_clear()
    built = []
    real = tk.get_tokenizer_from_ranks
    monkeypatch.setattr(tk, "get_tokenizer_from_ranks",
                        lambda *a: built.append(a[0]) or real(*a))
    tk.get_tokenizer.cache_clear()
    try:
        got = tk.tokenizer_fingerprint(family)
        assert built == []
        enc = tk.get_tokenizer(family)
        h = hashlib.sha256()
        h.update(tk._bpe_path(tk.bpe_file_for(family)).read_bytes())
        h.update(enc._pat_str.encode())
        h.update(repr(sorted(enc._special_tokens.items())).encode())
        h.update(repr(sorted(tk.OUTPUT_SPECIALS[family])).encode())
        assert got == h.hexdigest()[:16]
    finally:
        tk.get_tokenizer.cache_clear()
        tk.tokenizer_fingerprint.cache_clear()
