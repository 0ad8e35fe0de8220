"""Every loader on the real traces-src files, and load_corpus over the model catalogue."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from simkit.errors import UnknownNameError
from simkit.paths import traces_src_dir
from traces.corpora import (CORPORA, MIX, MIX_PARTS, corpus_sources, list_corpora, list_models,
                            load_corpus, tokenizer_family)
from traces.sources import SOURCES
from traces.tokenizers import get_tokenizer

SRC = traces_src_dir()
pytestmark = pytest.mark.skipif(SRC is None, reason="../shared/traces-src not present")


def _load(source: str, producer: str):
    skipped: Counter = Counter()
    return SOURCES[source].load(SRC, producer, skipped), skipped


# (source, producer, expected requests, expected skipped) from SOURCES.md's record counts.
EXPECTED = [
    ("alpaca_eval", "Llama-3.1-8B-Instruct", 805, {}),
    ("alpaca_eval", "Llama-3.1-405B-Instruct", 805, {}),
    ("alpaca_eval", "Qwen2-72B-Instruct", 805, {}),
    ("arena_hard", "Llama-3.1-8B-Instruct", 750, {}),
    ("arena_hard", "Sky-T1-32B-Preview", 748, {}),
    ("mt_bench", "Llama-3.1-8B-Instruct", 160, {}),
    ("mt_bench", "Llama-3.1-70B-Instruct", 160, {}),
    ("mt_bench", "Qwen2-7B-Instruct", 160, {}),
    ("humaneval", "Llama-3.1-8B-Instruct", 164, {}),
    ("lcb_codegen", "Qwen2.5-7B-Instruct", 1055, {}),
    # 1055 plain + 1055 CoT repairs; 160 + 344 of them have an empty output (failed generations).
    ("lcb_selfrepair", "Qwen2.5-7B-Instruct", 1606, {"empty output": 504}),
    ("math_l5", "Llama-3.1-8B-Instruct", 721, {}),
    ("math_l5", "Llama-3.1-405B-Instruct", 721, {}),
    ("math_l5", "Qwen2.5-72B-Instruct", 721, {}),
    ("gsm8k", "Llama-3.1-70B-Instruct", 1319, {}),
    ("crux", "Llama-3.1-8B-Instruct", 800, {}),
    ("crux", "Qwen2.5-32B-Instruct", 800, {}),
    # 947 articles, 886 with a confident source row (vote_share >= 0.8); 8B's file repeats x4.
    ("vectara", "Llama-3.1-8B-Instruct", 886,
     {"unconfident source row (vote_share < 0.8)": 61, "duplicate article_id row": 2841}),
    ("vectara", "Qwen2.5-7B-Instruct", 886,
     {"unconfident source row (vote_share < 0.8)": 61, "duplicate article_id row": 947}),
    ("vectara", "Llama-3.1-405B-Instruct", 884,
     {"unconfident source row (vote_share < 0.8)": 61, "empty output": 2}),
    ("vectara", "DeepSeek-R1", 886, {"unconfident source row (vote_share < 0.8)": 61}),
    ("wmt24", "Llama-3.1-8B-Instruct", 2039, {}),
    ("wmt24", "Qwen2.5-7B-Instruct", 2039, {}),
    ("r1distill", "DeepSeek-R1-Distill-Qwen-14B", 300, {}),
    ("r1distill", "DeepSeek-R1-Distill-Llama-8B", 500, {}),
    # KORGym (SOURCES.md ADDITIONS section 1): 450 pairs per distill, empties are client errors
    ("korgym", "DeepSeek-R1-Distill-Qwen-7B", 404, {"empty response (client error)": 46}),
    ("korgym", "DeepSeek-R1-Distill-Qwen-32B", 415, {"empty response (client error)": 35}),
    ("korgym", "DeepSeek-R1-Distill-Llama-70B", 404, {"empty response (client error)": 46}),
    ("korgym_instruct", "Qwen2.5-7B-Instruct", 150, {}),
    ("korgym_instruct", "Qwen2.5-32B-Instruct", 350, {}),
    ("korgym_instruct", "Qwen2.5-72B-Instruct", 450, {}),
    # IntegralBench (section 2): 951 outputs, 664 with the <think> trace, 287 answer-only
    ("integralbench", "DeepSeek-R1", 664, {"final answer only (reasoning not captured)": 287}),
]


def test_reasoning_outputs_follow_the_r1_prompt_not_repeat_its_think_opening():
    """The R1 format's generation prompt ends with "<think>\n"; an output that repeated it
    would double it (the 32B/70B KORGym runs generated it themselves)."""
    from traces.tokenize import prompt_text

    for source, producer in (("korgym", "DeepSeek-R1-Distill-Qwen-32B"),
                             ("integralbench", "DeepSeek-R1")):
        records, _ = _load(source, producer)
        assert not any(r.output.startswith("<think>") for r in records)
        assert sum("</think>" in r.output for r in records) > len(records) // 2
        text = prompt_text("r1-qwen", records[0])
        assert text.startswith("<｜begin▁of▁sentence｜><｜User｜>")
        assert text.endswith("<｜Assistant｜><think>\n")


@pytest.mark.parametrize("source, producer, n, skipped", EXPECTED)
def test_loader_counts(source, producer, n, skipped):
    records, got_skipped = _load(source, producer)
    assert len(records) == n
    assert dict(got_skipped) == skipped
    assert len({r.request_id for r in records}) == n
    assert all(r.output and r.messages and r.messages[-1][0] == "user" for r in records)
    assert all(r.producer == producer for r in records)


def test_every_source_producer_loads():
    for source in SOURCES.values():
        for producer in source.producers:
            records, _ = _load(source.name, producer)
            assert records, (source.name, producer)


def test_mt_bench_turn_two_holds_turn_one_answer():
    records, _ = _load("mt_bench", "Llama-3.1-8B-Instruct")
    by_id = {r.request_id: r for r in records}
    assert Counter(r.turn for r in records) == {1: 80, 2: 80}
    for r in records:
        if r.turn == 2:
            first = by_id[r.request_id.replace("/t2", "/t1")]
            assert [m[0] for m in r.messages] == ["user", "assistant", "user"]
            assert r.messages[0] == first.messages[0]
            assert r.messages[1][1] == first.output
    # FastChat decodes math/coding/reasoning/extraction greedily (10 questions each x 2 turns).
    assert sum(r.greedy for r in records) == 80


def test_greedy_flags_follow_decoding_notes():
    assert not any(r.greedy for r in _load("alpaca_eval", "Llama-3.1-8B-Instruct")[0])
    assert all(r.greedy for r in _load("crux", "Llama-3.1-405B-Instruct")[0])
    assert not any(r.greedy for r in _load("lcb_codegen", "Qwen2.5-7B-Instruct")[0])
    assert all(r.greedy for r in _load("wmt24", "Qwen2.5-7B-Instruct")[0])


def test_zeroeval_exact_prompt_used_unless_api_run():
    local, _ = _load("math_l5", "Llama-3.1-8B-Instruct")
    api, _ = _load("math_l5", "Llama-3.1-405B-Instruct")
    assert all(r.exact_prompt and r.exact_template == "llama3" for r in local)
    assert all(r.exact_prompt is None for r in api)


def test_self_repair_prompt_carries_code_and_feedback():
    records, _ = _load("lcb_selfrepair", "Qwen2.5-7B-Instruct")
    cot = [r for r in records if r.request_id.startswith("lcb_repair_cot/")]
    plain = [r for r in records if r.request_id.startswith("lcb_repair/")]
    assert len(plain) == 1055 - 160 and len(cot) == 1055 - 344
    for r in records[:50]:
        user = r.messages[1][1]
        assert user.startswith("### Question:\n") and "### Answer:\n```python\n" in user
        assert ("The code passed all test cases." in user) or ("The above code is incorrect" in user)
    assert all("Think step by step about what is causing" in r.messages[1][1] for r in cot)


def test_code_corpus_for_llama_8b():
    corpus = load_corpus("code", "llama-3.1-8b")
    assert corpus.sources == {"humaneval": "Llama-3.1-8B-Instruct",
                              "lcb_codegen": "Qwen2.5-7B-Instruct"}
    assert len(corpus) == 164 + 1055
    assert "lcb_codegen <- Qwen2.5-7B-Instruct" in corpus.proxy_note
    first = corpus.requests[0]
    assert first.request_id == "HumanEval/0" and first.corpus == "code"
    assert first.prompt_ids.dtype == np.int32 and first.prompt_ids[0] == 128000
    text = get_tokenizer("llama3").decode(first.prompt_ids.tolist())
    assert text.endswith("passes corresponding tests:\n```python\n")
    assert all(r.output_len > 0 and r.prompt_len > 0 for r in corpus.requests)


def test_own_outputs_note_and_reload_is_identical():
    a = load_corpus("math", "qwen2.5-7b")
    b = load_corpus("math", "qwen2.5-7b")
    assert a.sources["math_l5"] == "Qwen2.5-7B-Instruct"
    assert a.sources["gsm8k"] != "Qwen2.5-7B-Instruct"  # no Qwen GSM8K outputs: proxy
    assert "gsm8k <- " in a.proxy_note
    assert [r.request_id for r in a.requests] == [r.request_id for r in b.requests]
    assert all(np.array_equal(x.prompt_ids, y.prompt_ids) and
               np.array_equal(x.output_ids, y.output_ids) for x, y in zip(a.requests, b.requests))


def test_cache_roundtrip_equals_fresh_tokenization(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path))
    fresh = load_corpus("translation", "qwen2.5-7b")
    assert list((tmp_path / "tokenized").glob("wmt24-qwen-*.npz"))
    cached = load_corpus("translation", "qwen2.5-7b")
    assert len(fresh) == len(cached) == 2039
    for x, y in zip(fresh.requests, cached.requests):
        assert x.request_id == y.request_id
        assert np.array_equal(x.prompt_ids, y.prompt_ids)
        assert np.array_equal(x.output_ids, y.output_ids)


def test_prompts_use_the_simulated_models_template():
    r1 = load_corpus("summarization", "ds-r1-distill-qwen-7b")
    assert r1.sources["vectara"] == "DeepSeek-R1"
    ids = r1.requests[0].prompt_ids.tolist()
    assert ids[:2] == [151646, 151644] and ids[-2:] == [151648, 198]  # BOS, User ... <think>\n
    qwen = load_corpus("reasoning", "qwen2.5-7b")
    assert qwen.requests[0].prompt_ids[0] == 151644  # <|im_start|>system (Qwen2.5 default)


def test_unknown_names():
    with pytest.raises(UnknownNameError):
        load_corpus("code", "gpt-5")
    with pytest.raises(UnknownNameError):
        load_corpus("poetry", "llama-3.1-8b")
    with pytest.raises(UnknownNameError):
        tokenizer_family("nope")


def test_catalogue_lists():
    assert list(CORPORA) + [MIX] == list_corpora()[:len(CORPORA) + 1]
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b-fp8", "qwen2.5-7b", "qwen2.5-32b",
            "qwen2.5-72b", "ds-r1-distill-qwen-7b", "ds-r1-distill-qwen-32b",
            "ds-r1-distill-llama-70b", "deepseek-r1", "k-exaone-236b"} == set(list_models())
    assert tokenizer_family("deepseek-r1") == "r1-llama"
    assert tokenizer_family("ds-r1-distill-qwen-32b") == "r1-qwen"


def test_distill_proxy_note_warns_about_missing_think_traces():
    chat = load_corpus("chat", "ds-r1-distill-llama-70b")
    assert "no <think> trace" in chat.proxy_note
    assert chat.sources["alpaca_eval"] == "Llama-3.1-70B-Instruct"
    reasoning = load_corpus("reasoning", "ds-r1-distill-llama-70b")
    assert reasoning.sources == {"korgym": "DeepSeek-R1-Distill-Llama-70B"}   # its own
    assert reasoning.proxy_note.startswith("own outputs")


def test_mix_is_every_corpus_shuffled_deterministically():
    mix = load_corpus(MIX, "llama-3.1-8b")
    parts = {c: len(load_corpus(c, "llama-3.1-8b")) for c in MIX_PARTS}
    assert "puzzle" in CORPORA and "puzzle" not in MIX_PARTS
    assert len(mix) == sum(parts.values())
    assert len({r.request_id for r in mix.requests}) == len(mix)
    assert Counter(r.corpus for r in mix.requests) == parts
    assert mix.proportions == pytest.approx({c: n / len(mix) for c, n in parts.items()})
    again = load_corpus(MIX, "llama-3.1-8b")
    assert [r.request_id for r in mix.requests] == [r.request_id for r in again.requests]
    assert [r.corpus for r in mix.requests[:50]] != sorted(r.corpus for r in mix.requests[:50])


@pytest.mark.slow
@pytest.mark.parametrize("model", list_models())
def test_every_corpus_for_every_model(model):
    family_vocab = get_tokenizer(tokenizer_family(model)).n_vocab
    for corpus in CORPORA:
        c = load_corpus(corpus, model)
        assert len(c) > 0 and c.proxy_note
        assert set(c.sources) == set(corpus_sources(corpus, model))
        assert len({r.request_id for r in c.requests}) == len(c)
        for r in c.requests:
            assert r.output_len > 0 and r.prompt_len > 0
            assert int(r.prompt_ids.max()) < family_vocab and int(r.output_ids.max()) < family_vocab
