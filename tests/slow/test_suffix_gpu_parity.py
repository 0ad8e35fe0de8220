"""Parity with vLLM 0.34.0's own suffix-speculator kernels (tests/vllm034_oracle.py: Triton's CPU
interpreter), on histories sampled from real corpora (tokenized by simkit's traces/ code).

For K = 1, 4, 8, 16 and four corpus settings (off; vLLM's default 2^20 tokens; 256 tokens, which
wraps and overwrites the ring and shares 64 buckets; 64 tokens at depth 8, 16 buckets: constant
collisions), plus made-up requests over a 6-token vocabulary (a vote among many disagreeing
candidates, where the match length chosen depends on K), the same ingestion calls (several finished requests per call) and propose calls go to
the oracle and to ours. Checked: every draft slot and num_valid of the reference (reference.py),
the ring, head, document count and index table after the last call, and the compiled drafter's
table row (kernels.py) = the oracle's num_valid and the slots it accepts against the trace, and
each draft's source and match length (reference and compiled) = the adaptive-verification bucket
the finalize kernel records (source * 9 + match-length bucket, -1 without a valid slot).
The oracle is installed by tests/install_vllm034_oracle.sh (after tests/install_arctic.sh); where
it is absent the test is skipped saying so. About 0.15 s per interpreted request, so histories are
sampled, never whole corpora.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simkit.drafters.suffix_gpu import reference as ref
from simkit.drafters.suffix_gpu.compiled import position_row
from simkit.drafters.suffix_gpu.params import SuffixGpuParams
from simkit.paths import traces_src_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vllm034_oracle as oracle  # noqa: E402

# both tests read the module's oracle run (~15 CPU-s): on one xdist worker, so it runs once
pytestmark = [pytest.mark.vllm034, pytest.mark.xdist_group("vllm034-oracle")]

MODEL = "llama-3.1-8b"
CORPORA = ("chat", "code")
KS = (1, 4, 8, 16)
SETTINGS = ((24, 0), (24, 1 << 20), (24, 256), (8, 64))     # (depth, corpus_tokens)
SMALL_VOCAB = (24, 512)          # the same on made-up 6-token requests (_small_vocab_pool)
MAX_LEN = 1024            # history tokens kept (the oldest dropped) and the oracle's max_model_len
N_PROPOSE = 6


def _pool() -> list[tuple[list[int], list[int]]]:
    if traces_src_dir() is None:
        pytest.skip("raw traces (../shared/traces-src) not present")
    from traces.corpora import load_corpus

    pool = []
    for corpus in CORPORA:
        reqs = load_corpus(corpus, MODEL).requests
        for i in np.linspace(0, len(reqs) - 1, 12).astype(int):
            r = reqs[int(i)]
            if len(r.output_ids) >= 16:
                pool.append(([int(x) for x in r.prompt_ids[-300:]],
                             [int(x) for x in r.output_ids[:600]]))
    return pool


def _histories(rng, pool, served) -> list[tuple[list[int], list[int]]]:
    """(history, continuation) pairs: a third end in a served response's prompt context (the
    chat template's assistant header, shared by every document: the corpus vote has many
    candidates that disagree) or its first token; a third continue a served response after another
    prompt (the corpus can match at length); a third are a request's own prompt and output prefix."""
    out = []
    for j in range(N_PROPOSE):
        if j % 3 < 2 and served:
            prompt, output = served[int(rng.integers(len(served)))]
            other = pool[int(rng.integers(len(pool)))][0]
            cut = int(rng.integers(0, 2)) if j % 3 == 0 else int(rng.integers(2, len(output) - 1))
            hist = other[-40:] + prompt[-3:] + output[:cut]
        else:
            prompt, output = pool[int(rng.integers(len(pool)))]
            cut = int(rng.integers(1, len(output) - 1))
            hist = prompt + output[:cut]
        out.append((hist[-MAX_LEN:], output[cut:cut + 16]))
    return out


def _small_vocab_pool(rng) -> list[tuple[list[int], list[int]]]:
    """Made-up requests over 6 tokens: many corpus candidates per bucket that disagree, so the
    vote's tie rule and its choice of match length at each K are exercised."""
    base = rng.integers(0, 6, 60)
    return [([int(x) for x in rng.integers(0, 6, 8)],
             [int(x) for x in np.concatenate([base[rng.integers(0, 30):][:rng.integers(8, 30)],
                                              rng.integers(0, 6, 10)])]) for _ in range(12)]


def _scenarios(pool):
    rng = np.random.default_rng(34)
    scenarios, conts = [], []
    for depth, corpus_tokens in SETTINGS + (SMALL_VOCAB,):
        if (depth, corpus_tokens) == SMALL_VOCAB:
            pool = _small_vocab_pool(rng)
        for k in KS:
            events, cont, served = [], [], []
            order = rng.permutation(len(pool))
            for batch in (order[:4], order[4:7], order[7:9]):
                docs = [pool[int(i)] for i in batch]
                events.append({"ingest": [[p, o] for p, o in docs]})
                served += docs
                pairs = _histories(rng, pool, served)
                events.append({"propose": [h for h, _ in pairs]})
                cont.append([c for _, c in pairs])
            scenarios.append({"depth": depth, "corpus_tokens": corpus_tokens, "k": k,
                              "max_model_len": MAX_LEN, "events": events})
            conts.append(cont)
    return scenarios, conts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    why = oracle.missing()
    if why:
        pytest.skip(f"vLLM 0.34 oracle not installed: {why}")
    scenarios, conts = _scenarios(_pool())
    work = tmp_path_factory.mktemp("oracle")
    (work / "cases.json").write_text(json.dumps({"scenarios": scenarios}))
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, oracle.__file__, str(work / "cases.json"),
                    str(work / "out.json")], check=True, env=env, timeout=1800)
    results = json.loads((work / "out.json").read_text())["results"]
    return list(zip(scenarios, conts, results))


def _sha(a: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a, np.int64).tobytes()).hexdigest()


def _accepted(slots, cont) -> int:
    a = 0
    while a < len(slots) and a < len(cont) and slots[a] == cont[a]:
        a += 1
    return a


def _bucket(valid: int, source: int, match: int) -> int:
    """The counters' row of a draft (simkit.engine.adaptive), -1 without a valid slot."""
    from simkit.engine.adaptive import AcceptanceCounters

    return AcceptanceCounters.bucket(int(source), int(match)) if valid > 0 else -1


def test_drafts_equal_vllm034_kernels(runs):
    checked = corpus_wins = fillers = 0
    buckets: set[int] = set()
    for sc, conts, res in runs:
        params = SuffixGpuParams(max_depth=sc["depth"], corpus_tokens=sc["corpus_tokens"])
        corpus = ref.Corpus(params)
        k = sc["k"]
        props = iter(zip(res["proposals"], conts))
        for ev in sc["events"]:
            if "ingest" in ev:
                corpus.ingest([ref.document(p, o) for p, o in ev["ingest"]])
                continue
            got, cont_list = next(props)
            for b, (hist, cont) in enumerate(zip(ev["propose"], cont_list)):
                slots, valid, source, match = ref.propose_with_source(hist, corpus, params, k)
                what = f"depth {sc['depth']} corpus {sc['corpus_tokens']} K {k} row {b}"
                assert [int(x) for x in slots] == got["drafts"][b], what
                assert valid == got["num_valid"][b], what
                d, a, src, ml = position_row(np.array(hist), np.array(cont), corpus, params, 16)
                assert d[k - 1] == got["num_valid"][b], what + " (compiled d)"
                assert a[k - 1] == _accepted(got["drafts"][b], cont), what + " (compiled a)"
                assert _bucket(valid, source, match) == got["bucket"][b], what + " (bucket)"
                assert _bucket(d[k - 1], src[k - 1], ml[k - 1]) == got["bucket"][b], \
                    what + " (compiled bucket)"
                buckets.add(got["bucket"][b])
                own_len, _ = ref.own_match(np.array(hist), params.max_depth)
                if corpus.cap and ref.corpus_draft(np.array(hist), corpus, params.max_depth, k)[0] > own_len:
                    corpus_wins += 1
                fillers += k - valid
                checked += 1
        if corpus.cap:
            assert _sha(corpus.ring) == res["ring_sha256"], "ring"
            assert _sha(corpus.table) == res["table_sha256"], "index table"
            assert (corpus.head, corpus.docs) == (res["head"], res["docs"])
    # the sample exercises what it claims: corpus drafts chosen, fillers present
    assert checked == (len(SETTINGS) + 1) * len(KS) * 3 * N_PROPOSE
    assert corpus_wins > 0 and fillers > 0
    assert any(0 <= x < 9 for x in buckets) and any(x >= 9 for x in buckets) and -1 in buckets


def test_small_rings_wrap_and_collide(runs):
    """The small settings did wrap the ring (head went back) and fill buckets with several keys."""
    for sc, _, res in runs:
        if sc["corpus_tokens"] in (256, 64):
            served = sum(len(ev["ingest"]) for ev in sc["events"] if "ingest" in ev)
            tokens = sum(min(len(o) + 3, sc["corpus_tokens"] - 1) + 1
                         for ev in sc["events"] if "ingest" in ev for _, o in ev["ingest"])
            assert res["docs"] == served and tokens > sc["corpus_tokens"]
            table = np.array(res["table"])
            assert (table >= 0).all(axis=2).any()      # some bucket has all 8 slots taken
