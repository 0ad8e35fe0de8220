"""Prompt block hashes: what a workload ships so that the engine can model prefix caching.

Scheme (fixed; a profile built with another scheme is refused by `SCHEME`): the prompt's token
ids are cut into whole blocks of `block_size` tokens (a trailing partial block gets no hash, as
in vLLM, whose cache holds full blocks only). Block i's hash is the first 8 bytes, read as an
unsigned little-endian 64-bit integer, of BLAKE2b(digest_size=8) over
    parent (8 bytes, little-endian uint64; 0 for block 0) || the block's ids as little-endian int32.
Chaining the parent makes a block's hash name its whole prefix, so equal hashes at position i mean
equal prompts up to the end of block i (up to a 2^-64 collision). Only these integers are
stored; token ids cannot be recovered from them.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

import numpy as np

SCHEME = "blake2b-64 chained over int32 LE token-id blocks, parent 0"
BLOCK_SIZE = 16


def prompt_block_hashes(token_ids: Sequence[int] | np.ndarray, block_size: int = BLOCK_SIZE) -> np.ndarray:
    """Chained 64-bit hashes of the prompt's whole blocks, shape (len // block_size,), uint64."""
    ids = np.ascontiguousarray(np.asarray(token_ids), dtype="<i4")
    n = ids.size // block_size
    out = np.empty(n, np.uint64)
    parent = (0).to_bytes(8, "little")
    raw = ids.tobytes()
    step = 4 * block_size
    for i in range(n):
        h = hashlib.blake2b(parent + raw[i * step:(i + 1) * step], digest_size=8).digest()
        out[i] = int.from_bytes(h, "little")
        parent = h
    return out


def pack(chains: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """CSR form of per-request chains: (flat uint64 hashes, int64 offsets of length n+1)."""
    parts = [np.asarray(c, np.uint64) for c in chains]
    offsets = np.zeros(len(parts) + 1, np.int64)
    if parts:
        offsets[1:] = np.cumsum([p.size for p in parts])
    flat = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    return flat.astype(np.uint64), offsets


def unpack(flat: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    """Per-request chains as lists of Python ints (what the scheduler indexes)."""
    vals = np.asarray(flat, np.uint64).tolist()
    offs = np.asarray(offsets, np.int64).tolist()
    return [vals[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]


def share_table(chains: Iterable[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lossless (for prefix caching within one workload) summary of chained hashes: per request,
    `ref` = the earliest earlier request holding its longest cached-able prefix (-1: none) and
    `shared` = that prefix's length in blocks. Chaining makes block i of two prompts equal exactly
    when their common prefix is longer than i blocks, so (ref, shared) plus the block counts
    rebuild every equality the engine can observe; 8 bytes per request instead of 8 per block."""
    first: dict[int, int] = {}
    refs, shared = [], []
    for r, chain in enumerate(chains):
        s = 0
        while s < len(chain) and chain[s] in first:
            s += 1
        refs.append(first[chain[s - 1]] if s else -1)
        shared.append(s)
        for h in chain[s:]:
            first.setdefault(h, r)
    return np.asarray(refs, np.int32), np.asarray(shared, np.int32)


def chains_from_share(ref: np.ndarray, shared: np.ndarray,
                      n_blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical chains (packed) from `share_table`: request r copies the first shared[r] keys of
    request ref[r] and gets fresh keys 1, 2, ... (in request order) for its other blocks. The
    keys are not the token-block hashes, but equal exactly where those are equal."""
    chains: list[np.ndarray] = []
    nxt = 1
    for r, n in enumerate(np.asarray(n_blocks, np.int64).tolist()):
        s, a = int(shared[r]), int(ref[r])
        if s and (s > n or not 0 <= a < r or s > len(chains[a])):
            raise ValueError(f"request {r}: shares {s} blocks with request {a}, has {n}")
        head = chains[a][:s] if s else np.zeros(0, np.uint64)
        tail = np.arange(nxt, nxt + n - s, dtype=np.uint64)
        nxt += n - s
        chains.append(np.concatenate([head, tail]).astype(np.uint64))
    return pack(chains)


def canonical(flat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Real hashes -> the canonical keys a shipped profile rebuilds (raw and shipped then agree)."""
    chains = unpack(flat, offsets)
    ref, shared = share_table(chains)
    return chains_from_share(ref, shared, np.diff(np.asarray(offsets, np.int64)))
