"""Corpora built from the real traces: which sources feed each corpus, per simulated model.

`load_corpus(corpus, model)` picks, for every source of the corpus, the model's own outputs or
the nearest proxy (traces/model_outputs.py), tokenizes with the model's tokenizer family (cached), and
returns the requests in a deterministic order. "mix" is every corpus together, shuffled with
MIX_SEED; its proportions are the natural request counts (stored in Corpus.proportions).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from simkit.errors import InputError, UnknownNameError
from simkit.paths import traces_src_dir
from traces import cache
from traces.model_outputs import list_models, model_outputs, tokenizer_family
from traces.model import Corpus, TraceRequest
from traces.sources import SOURCES
from traces.tokenizers import tokenizer_fingerprint

CORPORA: dict[str, tuple[str, ...]] = {
    "chat": ("alpaca_eval", "arena_hard", "mt_bench"),
    "code": ("humaneval", "lcb_codegen"),
    "code-edit": ("lcb_selfrepair",),
    "math": ("math_l5", "gsm8k"),
    "code-reasoning": ("crux",),
    "summarization": ("vectara",),
    "translation": ("wmt24",),
    "reasoning": ("r1distill",),       # per-model own long-CoT sources: catalog ModelOutputs.corpora
    "puzzle": ("korgym_instruct",),
}
# mix keeps its definition: the eight task corpora it always had, at natural counts. puzzle is
# left out (adding it would shift every model's mix); `--corpus puzzle` runs it on its own.
MIX_PARTS: tuple[str, ...] = ("chat", "code", "code-edit", "math", "code-reasoning",
                              "summarization", "translation", "reasoning")
MIX = "mix"
MIX_SEED = 20260101

__all__ = ["Corpus", "list_corpora", "list_models", "load_corpus", "tokenizer_family",
           "corpus_sources", "CORPORA", "MIX", "MIX_PARTS", "MIX_SEED"]


def corpus_sources(corpus: str, model: str) -> tuple[str, ...]:
    """The sources of a built-in corpus for a model: CORPORA's, or the model's own where its
    catalogue entry names them (ModelOutputs.corpora: the distills' and R1's reasoning)."""
    return tuple(model_outputs(model).corpora.get(corpus, CORPORA[corpus]))


def _user_names() -> list[str]:
    from traces.user import list_user_corpora

    return list_user_corpora()


def list_corpora() -> list[str]:
    """Built-in corpora (fixed order), then "mix", then imported user corpora (sorted)."""
    return list(CORPORA) + [MIX] + _user_names()


def _source_block(source_name: str, producer: str, family: str, progress=None):
    """A tokenized (source, producer, family) block from the cache, building it on a miss."""
    src = traces_src_dir()
    if src is None:
        raise InputError("raw traces not found: set SIMKIT_TRACES_SRC to the traces-src folder")
    source = SOURCES[source_name]
    parts = [cache.LOADER_VERSION, source_name, producer, family, tokenizer_fingerprint(family)]
    for rel in source.paths(producer):
        path = src / rel
        if not path.is_file():
            raise InputError("raw trace file missing", path=str(path))
        parts += [rel, cache.file_digest(path)]
    path = cache.tokenized_dir() / f"{source_name}-{family}-{cache.cache_key(parts)}.npz"
    from simkit.cachecheck import DamagedCache, discard

    try:
        block = cache.load_block(path)
    except DamagedCache as exc:                # named, removed, rebuilt below from the raw files
        discard(exc)
        block = None
    if block is not None:
        return block
    from traces.tokenize import tokenize_records

    task = None
    if progress is not None:
        task = progress.add_task(f"tokenizing {source_name} ({producer}, {family})", total=2)
    skipped: Counter = Counter()
    records = source.load(src, producer, skipped)
    if task is not None:
        progress.advance(task)
    block = tokenize_records(family, records, dict(skipped),
                             {"source": source_name, "producer": producer, "family": family})
    if task is not None:
        progress.advance(task)
    cache.save_block(path, block)
    return block


def _proxy_note(model: str, sources: dict[str, str]) -> str:
    spec = model_outputs(model)
    from traces.model_outputs import PRODUCER_VOCAB, VOCAB_OF_FAMILY

    vocab = VOCAB_OF_FAMILY[spec.family]
    parts = []
    for s, producer in sources.items():
        if producer == spec.own:
            continue
        same = PRODUCER_VOCAB[producer] == vocab
        how = "same tokenizer family" if same else "other tokenizer family, re-tokenized"
        parts.append(f"{s} <- {producer} ({how})")
    note = ("proxy outputs: " + "; ".join(parts)) if parts else "own outputs"
    if spec.family_note:
        note += f"; {spec.family_note}"
    return note


def _build(corpus: str, model: str, progress) -> Corpus:
    from simkit.progress import phase

    spec = model_outputs(model)
    order = spec.producer_order()
    requests: list[TraceRequest] = []
    sources: dict[str, str] = {}
    skipped: Counter = Counter()
    notes = {}
    names = corpus_sources(corpus, model)
    with phase(f"reading the {corpus} traces for {model}", len(names), "sources") as told:
        for source_name in names:
            source = SOURCES[source_name]
            producer = next(p for p in order if p in source.files)
            sources[source_name] = producer
            notes[source_name] = source.note
            block = _source_block(source_name, producer, spec.family, progress)
            for reason, n in block.skipped.items():
                skipped[f"{source_name}: {reason}"] += n
            for i in range(len(block)):
                requests.append(TraceRequest(
                    request_id=block.request_ids[i], prompt_ids=block.prompt(i),
                    output_ids=block.output(i), corpus=corpus, source=source_name,
                    model=block.producers[i], greedy=bool(block.greedy[i]), turn=int(block.turn[i])))
            told(1)
    return Corpus(corpus, model, spec.family, requests, sources, _proxy_note(model, sources),
                  dict(skipped), {}, notes)


def _progress(enabled: bool):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


def load_corpus(corpus: str, model: str, *, progress: bool = False) -> Corpus:
    """The tokenized corpus for a simulated model (built-in, "mix", or an imported user corpus)."""
    model_outputs(model)  # unknown model -> UnknownNameError before any work
    if corpus not in CORPORA and corpus != MIX:
        if corpus in _user_names():
            from traces.user import load_user_corpus

            return load_user_corpus(corpus, model)
        raise UnknownNameError("corpus", corpus, list_corpora(),
                               "your own traffic is imported first (simkit traces import FILE "
                               f"--name {corpus})")
    bar = _progress(progress)
    if bar is not None:
        bar.start()
    try:
        if corpus != MIX:
            return _build(corpus, model, bar)
        parts = [_build(c, model, bar) for c in MIX_PARTS]
    finally:
        if bar is not None:
            bar.stop()
    requests = [r for p in parts for r in p.requests]
    perm = np.random.default_rng(MIX_SEED).permutation(len(requests))
    total = max(1, len(requests))
    sources = {s: prod for p in parts for s, prod in p.sources.items()}
    return Corpus(
        MIX, model, parts[0].family, [requests[i] for i in perm], sources,
        _proxy_note(model, sources),
        {k: v for p in parts for k, v in p.skipped.items()},
        {p.name: len(p.requests) / total for p in parts},
        {k: v for p in parts for k, v in p.source_notes.items()},
    )
