"""Imported user corpora: stored tokenized in the user cache, loadable by name like built-ins.

Each corpus is `<name>.npz` (the tokenized block, content-checksummed by traces.cache) with
`<name>.import.json` beside it: where it was imported from (path and sha256 of the file), the
format, tokenizer and model. A damaged block is re-imported from that file when the file is
still there unchanged; otherwise the error names the command that re-imports it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

from simkit.errors import InputError, UnknownNameError
from traces import cache
from traces.model_outputs import VOCAB_OF_FAMILY, model_outputs
from traces.importers import NO_TOKENIZER
from traces.model import Corpus, TraceRequest

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def list_user_corpora() -> list[str]:
    """Names of imported corpora in the cache, sorted."""
    return sorted(p.name[:-4] for p in cache.user_dir().glob("*.npz"))


def user_corpus_path(name: str) -> Path:
    """The cached block of an imported corpus (the name is checked first)."""
    if not NAME_RE.match(name):
        raise InputError("corpus name must be 1-64 letters, digits, '_', '.', '-'", field="name")
    return cache.user_dir() / f"{name}.npz"


def import_record_path(name: str) -> Path:
    """The `<name>.import.json` record of how a corpus was imported."""
    return user_corpus_path(name).with_suffix(".import.json")


def import_command(name: str, record: dict) -> str:
    """The `simkit traces import` command line that recreates a corpus from its record."""
    args = ["simkit", "traces", "import", record.get("path", "FILE"), "--format",
            record.get("format", "FORMAT"), "--name", name]
    if record.get("model"):
        args += ["--model", record["model"]]
    if record.get("tokenizer_file"):
        args += ["--tokenizer", record["tokenizer_file"]]
    elif not record.get("model") and record.get("tokenizer") != NO_TOKENIZER:
        args += ["--tokenizer", record.get("tokenizer", "TOKENIZER")]
    return shlex.join(args + ["--replace"])


def read_import_record(name: str) -> dict:
    """The import record of a corpus, or {} when it has none (imported by an older simkit)."""
    try:
        return json.loads(import_record_path(name).read_text())
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def _name_lock(name: str):
    """An exclusive lock on one corpus name (flock on `<name>.lock` in the user cache), so
    that checking whether the name is taken and writing it are one step for concurrent
    imports; released when the block ends (or the process dies)."""
    import fcntl

    path = user_corpus_path(name).with_suffix(".lock")
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def save_user_corpus(name: str, block: cache.TokenizedBlock, record: dict | None = None,
                     replace: bool = True) -> bool:
    """Store an imported corpus under its name (atomically), with its import record; True when
    it replaced an earlier one. replace=False refuses (InputError) a name that is taken, also
    when another import took it after the caller last looked: two imports under one new name
    used to both succeed, the second silently overwriting the first."""
    with _name_lock(name):
        existed = user_corpus_path(name).exists()
        if existed and not replace:
            old = read_import_record(name).get("path", "another import")
            raise InputError(f"corpus '{name}' was stored meanwhile by another import (from "
                             f"{old}); pass --replace to overwrite it, or choose another "
                             "--name", field="name")
        cache.save_block(user_corpus_path(name), block)
        if record is not None:
            target = import_record_path(name)
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp.json")
            with os.fdopen(fd, "w") as fh:
                json.dump(record, fh, indent=1, sort_keys=True)
            os.replace(tmp, target)
    return existed


def _reimport(name: str, record: dict, damage) -> cache.TokenizedBlock | None:
    """Rebuild a damaged corpus from its source file when that file is unchanged, else None."""
    from traces.cache import file_digest
    from traces.importers import import_file

    src = Path(record.get("path", ""))
    if not src.is_file() or file_digest(src) != record.get("sha256"):
        return None
    family, template = record.get("tokenizer"), None
    if family == NO_TOKENIZER:
        family = None
    elif record.get("tokenizer_file"):             # an own tokenizer: only the same file
        from traces.model_outputs import tokenizer_family
        from traces.own_tokenizer import load_own_tokenizer

        template = record.get("template")
        template = None if template in (None, "plain") else template
        try:
            family = load_own_tokenizer(record["tokenizer_file"],
                                        tokenizer_family(record["model"]) if record.get("model")
                                        else None)
        except InputError:
            return None
        if family.fingerprint != record.get("tokenizer_sha256"):
            return None
    print(f"warning: damaged cache entry {damage.path} ({damage.reason}); re-importing it from "
          f"{src}", file=sys.stderr)
    block = import_file(src, record["format"], family, record.get("producer", "unknown"),
                        template)
    save_user_corpus(name, block, record)
    return block


def load_user_block(name: str) -> cache.TokenizedBlock:
    """The tokenized block of an imported corpus; a damaged one is re-imported from its source
    file when that is unchanged, else an InputError names the file and the re-import command."""
    from simkit.cachecheck import DamagedCache

    path = user_corpus_path(name)
    try:
        block = cache.load_block(path)
    except DamagedCache as exc:
        record = read_import_record(name)
        block = _reimport(name, record, exc) if record else None
        if block is None:
            src = record.get("path", "the original file")
            raise InputError(
                f"imported corpus '{name}' is damaged ({exc.reason}) and its source {src} is gone "
                f"or changed; re-import it: {import_command(name, record)}",
                path=str(path)) from None
    if block is None:
        raise UnknownNameError("corpus", name, list_user_corpora())
    return block


def _check_ids_fit(name: str, block: cache.TokenizedBlock, model: str) -> None:
    """Token ids of a corpus imported with the user's own tokenizer (or as ids) must lie in the
    model's vocabulary: else they are another model's tokens."""
    from simkit.catalog.models import get_model

    vocab = get_model(model).vocab
    top = max((int(a.max()) for a in (block.prompt_tokens, block.output_tokens) if a.size),
              default=-1)
    if top >= vocab:
        raise InputError(f"corpus '{name}' holds token id {top}, outside {model}'s vocabulary "
                         f"(0..{vocab - 1}): it was tokenized for another model", field="model")


def load_user_corpus(name: str, model: str):
    """An imported corpus as a Corpus; its token ids must use the model's vocabulary."""
    spec = model_outputs(model)
    block = load_user_block(name)
    family = block.meta["family"]
    if family in VOCAB_OF_FAMILY:
        if VOCAB_OF_FAMILY[family] != VOCAB_OF_FAMILY[spec.family]:
            raise InputError(
                f"corpus '{name}' was tokenized with {family}, but model '{model}' uses "
                f"{spec.family}; re-import it with --model {model} or --tokenizer {spec.family}",
                field="model")
    else:                                # an own tokenizer, or token ids: the model's vocabulary
        _check_ids_fit(name, block, model)
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
