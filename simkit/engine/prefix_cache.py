"""Automatic prefix caching of KV blocks, by the rules of vLLM 0.26's V1 block pool.

Only the bookkeeping the schedule depends on is kept; which physical block is which does not
matter. State:
- `refs`: every cached block (a full block with a hash), key -> number of running requests
  holding it (0 = free but still hittable);
- `lru`: the free cached blocks, least recently freed first (evicted first);
- `anon`: free blocks without a hash (never used, partial, or duplicate). vLLM puts hashless
  blocks at the head of its free queue, so they are always taken before any cached block.
The scheduler keeps the total free count (`anon + len(lru)` == Scheduler.free_blocks, invariant
checked by the tests).

Keys: a prompt block's key is its chained hash (simkit.block_hash, a non-negative int).
Blocks past the prompt's last whole block (they hold output tokens) get the request-unique key
(seq, block index): only the same request, resuming after a preemption, can hit them, as in vLLM
where no other request of a replayed corpus shares those tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Iterable, Sequence

from simkit.history import History


class PrefixCache:
    """Cached-block map plus the free pool's eviction order."""

    __slots__ = ("refs", "lru", "anon", "evicted")

    def __init__(self, num_blocks: int) -> None:
        self.refs: dict[Hashable, int] = {}
        self.lru: OrderedDict[Hashable, None] = OrderedDict()
        self.anon = num_blocks
        self.evicted = 0

    def preload(self, chains: Iterable[Sequence[int]]) -> int:
        """Blocks already cached when the run starts: each chain is one earlier request's prompt
        block hashes, in the order the requests were served (the first is evicted first). Each
        chain is freed tail first, as vLLM frees a finished request. Returns blocks inserted
        (capped by the pool; a chain that no longer fits evicts the oldest, as in the server)."""
        inserted = 0
        for chain in chains:
            new = [h for h in chain if h not in self.refs]
            for h in reversed(new):
                if self.anon:
                    self.anon -= 1
                elif self.lru:
                    self._evict_one()
                else:
                    break
                self.refs[h] = 0
                self.lru[h] = None
                inserted += 1
        return inserted

    def lookup(self, keys: Sequence[Hashable], max_blocks: int) -> tuple[int, int]:
        """(hit blocks, how many of them are free now): the longest cached prefix of `keys`,
        at most `max_blocks` long. Pure: nothing changes until `acquire`."""
        refs = self.refs
        n = min(max_blocks, len(keys))
        hit = free = 0
        while hit < n:
            r = refs.get(keys[hit])
            if r is None:
                break
            if r == 0:
                free += 1
            hit += 1
        return hit, free

    def acquire(self, keys: Sequence[Hashable]) -> None:
        """A request takes the hit blocks `keys` (all cached): free ones leave the pool."""
        refs, lru = self.refs, self.lru
        for k in keys:
            r = refs[k]
            if r == 0:
                del lru[k]
            refs[k] = r + 1

    def take(self, n: int) -> None:
        """Allocate n new blocks: hashless free blocks first, then the LRU cached ones (evicted)."""
        a = self.anon
        if n <= a:
            self.anon = a - n
            return
        self.anon = 0
        for _ in range(n - a):
            self._evict_one()

    def _evict_one(self) -> None:
        key, _ = self.lru.popitem(last=False)
        del self.refs[key]
        self.evicted += 1

    def register(self, key: Hashable) -> bool:
        """A block just became full and computed: cache it under `key` (held by its request).
        False when the key is already cached by another block (the duplicate stays hashless)."""
        if key in self.refs:
            return False
        self.refs[key] = 1
        return True

    def release(self, chain: Sequence[Hashable | None], blocks: int) -> None:
        """Free a request's `blocks` blocks, of which the first len(chain) are cached under
        chain's keys (None = hashless duplicate): tail first, as vLLM frees them, so a request's
        last blocks are evicted before its first ones."""
        self.anon += blocks - len(chain)
        refs, lru = self.refs, self.lru
        for k in reversed(chain):
            if k is None:
                self.anon += 1
                continue
            r = refs[k] - 1
            refs[k] = r
            if r == 0:
                lru[k] = None

    @property
    def free(self) -> int:
        return self.anon + len(self.lru)


def history_prefixes(chains: Sequence[Sequence[int]], history: History | None) -> list:
    """What `simulate(cached_prefixes=...)` takes for a request history over these requests'
    prompt chains, in the order the server served them: cold / warm nothing (warm is a suffix-
    tree assumption; the prefix cache of a steady stream holds only the shared headers, which
    the run itself caches at once); repeat:P the share P named by simkit.history.repeat_indices
    (served just before, as the GPU harness does); hot the whole list in its order; None (not
    known) as cold."""
    from simkit.history import repeat_indices

    h = history
    if h is None or not h.prompts_cached:            # cold, warm, or a repeat whose prompts were evicted
        return []
    if h.share == 1.0:                      # hot: the same list served once before, in order
        return list(chains)
    return [chains[i] for i in repeat_indices(len(chains), h.share)]
