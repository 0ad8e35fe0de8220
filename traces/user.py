"""Imported user corpora: stored tokenized in the user cache, loadable by name like built-ins."""

from __future__ import annotations

import re

from simkit.errors import InputError, UnknownNameError
from traces import cache
from traces.catalog import VOCAB_OF_FAMILY, model_spec
from traces.model import TraceRequest

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def list_user_corpora() -> list[str]:
    """Names of imported corpora in the cache, sorted."""
    return sorted(p.name[:-4] for p in cache.user_dir().glob("*.npz"))


def user_corpus_path(name: str):
    if not NAME_RE.match(name):
        raise InputError("corpus name must be 1-64 letters, digits, '_', '.', '-'", field="name")
    return cache.user_dir() / f"{name}.npz"


def save_user_corpus(name: str, block: cache.TokenizedBlock) -> None:
    """Store an imported corpus under its name (replacing an earlier import of that name)."""
    cache.save_block(user_corpus_path(name), block)


def load_user_block(name: str) -> cache.TokenizedBlock:
    block = cache.load_block(user_corpus_path(name))
    if block is None:
        raise UnknownNameError("corpus", name, list_user_corpora())
    return block


def load_user_corpus(name: str, model: str):
    """An imported corpus as a Corpus; its token ids must use the model's vocabulary."""
    from traces.corpora import Corpus

    spec = model_spec(model)
    block = load_user_block(name)
    family = block.meta["family"]
    if VOCAB_OF_FAMILY[family] != VOCAB_OF_FAMILY[spec.family]:
        raise InputError(
            f"corpus '{name}' was tokenized with {family}, but model '{model}' uses "
            f"{spec.family}; re-import it with --model {model} or --tokenizer {spec.family}",
            field="model")
    requests = [
        TraceRequest(request_id=block.request_ids[i], prompt_ids=block.prompt(i),
                     output_ids=block.output(i), corpus=name, source=block.meta["format"],
                     model=block.producers[i], greedy=bool(block.greedy[i]),
                     turn=int(block.turn[i]))
        for i in range(len(block))
    ]
    producers = sorted(set(block.producers))
    note = (f"user corpus imported from {block.meta.get('path', '?')} "
            f"({block.meta['format']}, tokenizer {family}); outputs as recorded")
    return Corpus(name, model, family, requests, {block.meta["format"]: ", ".join(producers)},
                  note, dict(block.skipped), {}, {})
