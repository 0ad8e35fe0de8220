"""Load-independent routing policies: the replica of every request of a stream, from its prompt alone.

These are the policies whose assignment does not depend on timing, so each replica's stream can be
simulated (or served on a real GPU) on its own, one after another. `round-robin` sends arrival i
to replica i mod N. `prefix-affinity` sends a request to the replica named by the chained hash of
its prompt's first `affinity_blocks` whole KV blocks (simkit.block_hash, 16 tokens each),
so requests that share that prefix (a repeated prompt, a later turn of one conversation, a long
shared preamble) meet the same replica's prefix cache and suffix tree; prompts shorter than one
block hash their raw ids. No load cap: a skewed stream stays skewed, as a pure hash router would.
`session-affinity` (route_sessions) sends every request of one session (a conversation id where
the trace has one, simkit.fleet.traffic.session_ids) to the replica named by the session id's
hash. `least-outstanding` is load-aware: it depends on the simulated timing and is decided inside
the joint simulation (simkit.fleet.sim.run_joint), not here.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from simkit.block_hash import BLOCK_SIZE, prompt_block_hashes
from simkit.errors import InputError

POLICIES = ("round-robin", "prefix-affinity")       # by prompt alone (the GPU fleet streams)
SESSION_AFFINITY = "session-affinity"
LEAST_OUTSTANDING = "least-outstanding"
ALL_POLICIES = POLICIES + (SESSION_AFFINITY, LEAST_OUTSTANDING)
LOAD_INDEPENDENT = POLICIES + (SESSION_AFFINITY,)
AFFINITY_BLOCKS = 16          # 256 tokens: past any chat-template header of the built-in models


def affinity_key(prompt_ids: Sequence[int] | np.ndarray, affinity_blocks: int = AFFINITY_BLOCKS) -> int:
    """64-bit key of a prompt's first `affinity_blocks` whole blocks (its raw ids when shorter)."""
    ids = np.asarray(prompt_ids)
    head = ids[: affinity_blocks * BLOCK_SIZE]
    chain = prompt_block_hashes(head)
    if chain.size:
        return int(chain[-1])
    raw = np.ascontiguousarray(head, dtype="<i4").tobytes()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


def route(policy: str, prompts: Sequence[Sequence[int] | np.ndarray], replicas: int,
          affinity_blocks: int = AFFINITY_BLOCKS) -> np.ndarray:
    """Replica index (int64) of each request, in arrival order."""
    if replicas < 1:
        raise InputError("must be >= 1", field="replicas")
    if policy == "round-robin":
        return np.arange(len(prompts), dtype=np.int64) % replicas
    if policy == "prefix-affinity":
        return np.array([affinity_key(p, affinity_blocks) % replicas for p in prompts],
                        dtype=np.int64)
    raise InputError(f"unknown router policy {policy!r}; known: {', '.join(POLICIES)}",
                     field="policy")


def route_sessions(sessions: Sequence[str], replicas: int) -> np.ndarray:
    """Replica index (int64) of each request from its session id: BLAKE2b-64 of the id mod N."""
    if replicas < 1:
        raise InputError("must be >= 1", field="replicas")
    return np.array([int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(),
                                    "little") % replicas for s in sessions], dtype=np.int64)
