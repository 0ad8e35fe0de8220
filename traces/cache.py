"""On-disk cache of tokenized sources and imported user corpora (never inside the repo).

A tokenized (source, producer, tokenizer family) is one .npz under cache_dir()/tokenized/, named by
a key over the sha256 of every raw file it reads, the tokenizer fingerprint and LOADER_VERSION, so
any change to the data, tokenizer or loaders misses the cache. Token arrays are concatenated with
int64 offsets; request metadata sits beside them as numpy arrays (no pickle).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simkit.paths import cache_dir

# Bump when a loader, chat template or the stored layout changes.
# 2: every block carries a content checksum (simkit.cachecheck), verified on load.
LOADER_VERSION = "2"


@dataclass
class TokenizedBlock:
    """Tokenized requests of one source (or one user corpus), stored column-wise."""

    request_ids: list[str]
    prompt_tokens: np.ndarray  # int32, concatenated
    prompt_offsets: np.ndarray  # int64, len n+1
    output_tokens: np.ndarray
    output_offsets: np.ndarray
    greedy: np.ndarray  # bool
    turn: np.ndarray  # int32
    producers: list[str]
    skipped: dict[str, int]
    meta: dict

    def __len__(self) -> int:
        return len(self.request_ids)

    def prompt(self, i: int) -> np.ndarray:
        return self.prompt_tokens[self.prompt_offsets[i]:self.prompt_offsets[i + 1]]

    def output(self, i: int) -> np.ndarray:
        return self.output_tokens[self.output_offsets[i]:self.output_offsets[i + 1]]


def pack(seqs: list[list[int]] | list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate token sequences into (int32 tokens, int64 offsets)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int32)
    for s, a, b in zip(seqs, offsets[:-1], offsets[1:]):
        flat[a:b] = s
    return flat, offsets


@functools.lru_cache(maxsize=512)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (memoised per process by path, size and mtime)."""
    st = path.stat()
    return _file_sha256(str(path), st.st_size, st.st_mtime_ns)


def cache_key(parts: list[str]) -> str:
    """A short stable key over the given strings."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def tokenized_dir() -> Path:
    path = cache_dir() / "tokenized"
    path.mkdir(parents=True, exist_ok=True)
    return path


def user_dir() -> Path:
    path = cache_dir() / "user_corpora"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _arrays(block: TokenizedBlock) -> dict[str, np.ndarray]:
    return {"request_ids": np.array(block.request_ids, dtype=str),
            "prompt_tokens": block.prompt_tokens, "prompt_offsets": block.prompt_offsets,
            "output_tokens": block.output_tokens, "output_offsets": block.output_offsets,
            "greedy": block.greedy.astype(bool), "turn": block.turn.astype(np.int32),
            "producers": np.array(block.producers, dtype=str)}


def save_block(path: Path, block: TokenizedBlock) -> None:
    """Write a block atomically (temp file + rename) so a crash never leaves a half file; the
    sha256 of its content (simkit.cachecheck) goes beside the arrays and is checked on load."""
    from simkit.cachecheck import content_digest

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    os.close(fd)
    arrays = _arrays(block)
    try:
        np.savez(
            tmp, **arrays,
            extra=np.array(json.dumps({"skipped": block.skipped, "meta": block.meta,
                                       "content_sha256": content_digest(arrays)},
                                      sort_keys=True)),
        )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_block(path: Path) -> TokenizedBlock | None:
    """Read a block, or None when it is absent; simkit.cachecheck.DamagedCache (naming the file)
    when it is unreadable, truncated, or its content does not match its stored checksum."""
    import zipfile

    from simkit.cachecheck import DamagedCache, verify

    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            extra = json.loads(str(z["extra"]))
            block = TokenizedBlock(
                request_ids=z["request_ids"].tolist(),
                prompt_tokens=z["prompt_tokens"], prompt_offsets=z["prompt_offsets"],
                output_tokens=z["output_tokens"], output_offsets=z["output_offsets"],
                greedy=z["greedy"], turn=z["turn"], producers=z["producers"].tolist(),
                skipped=extra["skipped"], meta=extra["meta"],
            )
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise DamagedCache(path, f"unreadable: {type(exc).__name__}: {exc}") from None
    verify(path, _arrays(block), extra.get("content_sha256"))
    return block
