"""Automatic prefix caching: the block pool's rules (simkit.engine.prefix_cache), the engine's use
of them on hand-computed cases, and the documented n/a and off behaviours."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine_doubles import LinearCost, make_table
from simkit.block_hash import pack, prompt_block_hashes, unpack
from simkit.engine.config import EngineConfig, parse_configs
from simkit.engine.prefix_cache import PrefixCache
from simkit.engine.scheduler import Scheduler
from simkit.engine.sim import ClosedLoop, simulate
from simkit.engine.workload import Workload
from simkit.errors import InputError

VANILLA = parse_configs("vanilla")[0]


# -- hashes -----------------------------------------------------------------------------------
def test_hash_chain_names_the_whole_prefix():
    a = prompt_block_hashes(np.arange(40))
    b = prompt_block_hashes(np.r_[np.arange(16), np.arange(100, 124)])
    c = prompt_block_hashes(np.r_[np.arange(1, 17), np.arange(16, 40)])
    assert a.shape == (2,) and a.dtype == np.uint64          # 40 tokens: 2 whole blocks
    assert a[0] == b[0] and a[1] != b[1]                      # same first block, then differ
    assert a[0] != c[0] and a[1] != c[1]                      # block 1 equal, parent differs
    flat, offs = pack([a, b[:1], np.zeros(0, np.uint64)])
    assert unpack(flat, offs) == [a.tolist(), b[:1].tolist(), []]


def test_share_table_keeps_every_block_equality():
    from simkit.block_hash import canonical, chains_from_share, share_table

    rng = np.random.default_rng(5)
    head = rng.integers(0, 5, 64)
    prompts = [np.r_[head[:int(rng.integers(0, 64))], rng.integers(0, 3, int(rng.integers(0, 90)))]
               for _ in range(60)]
    real = [prompt_block_hashes(p) for p in prompts]
    keys = unpack(*canonical(*pack(real)))
    for a in range(len(real)):                    # equal keys exactly where hashes are equal
        for b in range(len(real)):
            for i in range(min(len(real[a]), len(real[b]))):
                assert (real[a][i] == real[b][i]) == (keys[a][i] == keys[b][i])
    ref, shared = share_table(real)
    assert ref.dtype == np.int32 and shared.tolist() == share_table(keys)[1].tolist()
    with pytest.raises(ValueError):
        chains_from_share(np.array([0], np.int32), np.array([1], np.int32), np.array([2]))


# -- block pool -------------------------------------------------------------------------------
def test_lookup_stops_at_first_miss_and_cap():
    pc = PrefixCache(10)
    for k in (1, 2, 3):
        assert pc.register(k)
    assert pc.lookup([1, 2, 3, 4], 10) == (3, 0)               # held blocks: hit, not free
    assert pc.lookup([1, 9, 3], 10) == (1, 0)                  # a miss ends the prefix
    assert pc.lookup([1, 2, 3], 2) == (2, 0)                   # capped
    pc.release([1, 2, 3], 4)                                   # 3 cached + 1 hashless block
    assert pc.lookup([1, 2, 3], 10) == (3, 3)                  # free but still hittable
    assert pc.anon == 11 and list(pc.lru) == [3, 2, 1]         # tail first into the LRU


def test_eviction_takes_hashless_first_then_least_recent():
    pc = PrefixCache(2)
    pc.register("a"), pc.register("b")
    pc.release(["a", "b"], 2)                                  # lru: b, a
    pc.take(2)                                                 # the 2 never-used blocks
    assert pc.lookup(["a"], 5) == (1, 1) and pc.evicted == 0
    pc.take(1)                                                 # evicts b (freed first)
    assert pc.evicted == 1 and "b" not in pc.refs and pc.lookup(["a"], 5) == (1, 1)
    pc.acquire(["a"])                                          # a hit protects it
    with pytest.raises(KeyError):
        pc.take(1)                                             # nothing left to evict


def test_duplicate_block_stays_hashless_and_preload_order():
    pc = PrefixCache(8)
    pc.take(2)
    assert pc.register(7) and not pc.register(7)              # same hash computed twice
    pc.release([7, None], 2)
    assert pc.anon == 7 and list(pc.lru) == [7]               # the duplicate went hashless
    pc2 = PrefixCache(3)
    # 3 blocks for 4 hashes, served [1, 2] then [3, 4], each freed tail first: 2, 1, 4, then 3
    # evicts the least recent (2)
    assert pc2.preload([[1, 2], [3, 4]]) == 4
    assert list(pc2.lru) == [1, 4, 3] and pc2.evicted == 1 and pc2.anon == 0


# -- engine -----------------------------------------------------------------------------------
def _workload(prompts: list[np.ndarray], out_len: int = 4) -> Workload:
    plen = [len(p) for p in prompts]
    tab = make_table(plen, [out_len] * len(plen), lambda r, t, k: 0, lambda r, t, k: 0)
    return Workload(np.asarray(plen, np.int32), np.full(len(plen), out_len, np.int32),
                    {"suffix": tab}, name="t",
                    block_hashes=pack(prompt_block_hashes(p) for p in prompts))


def _run(w: Workload, *, caching: bool = True, kv: int = 1 << 20, conc: int = 1, **kw):
    cfg = EngineConfig(kv_capacity_tokens=kv, prefix_caching=caching)
    return simulate(w, LinearCost(), cfg, VANILLA, load=ClosedLoop(conc), shuffle=False,
                    keep_steps=True, **kw)


def _prefill(res) -> int:
    return sum(d.num_prefill_tokens for d, _ in res.step_log)


@pytest.mark.parametrize("plen", [16, 17, 100, 160, 161])
def test_repeated_prompt_hits_whole_blocks_below_prompt_len(plen):
    p = np.arange(plen) + 5
    res = _run(_workload([p, p]))
    hit = ((plen - 1) // 16) * 16                              # capped at plen - 1, whole blocks
    assert res.prefix["hit_tokens"] == hit
    assert _prefill(res) == res.prefix["prefill_tokens"] == 2 * plen - hit
    assert res.prefix["hit_rate"] == pytest.approx(hit / (2 * plen))


def test_shared_header_hits_only_common_whole_blocks():
    head = np.arange(40)                                       # 2 whole blocks + 8 tokens
    a, b = np.r_[head, np.arange(500, 560)], np.r_[head, np.arange(900, 930)]
    res = _run(_workload([a, b]))
    assert res.prefix["hit_tokens"] == 32
    assert _prefill(res) == len(a) + len(b) - 32


def test_eviction_under_kv_pressure_loses_the_hit():
    p = np.arange(160)
    other = np.arange(1000, 1160)
    # 12 blocks; each request holds 11 (10 prompt blocks + 1 partial). After the first, 2 blocks
    # are hashless-free and its 10 cached blocks sit in the LRU, block 9 first (tail first); the
    # second takes the 2 and evicts 9 of them, leaving block 0: the repeat hits 16 tokens.
    res = _run(_workload([p, other, p]), kv=12 * 16)
    assert res.prefix["evicted_blocks"] == 9 + 9               # the repeat evicts 9 of `other`
    assert res.prefix["hit_tokens"] == 16
    roomy = _run(_workload([p, other, p]), kv=200 * 16)
    assert roomy.prefix["hit_tokens"] == 144 and roomy.prefix["evicted_blocks"] == 0


def test_cycled_copies_are_new_prompts_behind_the_shared_prefix():
    head = np.arange(32)                                       # 2 blocks shared by both
    a, b = np.r_[head, np.arange(100, 180)], np.r_[head, np.arange(300, 364)]
    w = _workload([a, b])
    assert w.shared_blocks() == [2, 2]
    fresh = _run(w, num_requests=4)                            # a, b, a', b'
    assert fresh.prefix["hit_tokens"] == 3 * 32                # all but the first: the header
    again = _run(w, num_requests=4, repeat_prompts=True)
    # b hits the header; the exact copies hit every whole block below their last token
    assert again.prefix["hit_tokens"] == 32 + (len(a) - 1) // 16 * 16 + (len(b) - 1) // 16 * 16


def test_cached_prefixes_make_the_first_request_hit():
    p = np.arange(64)
    w = _workload([p])
    cold = _run(w)
    hot = _run(w, cached_prefixes=[prompt_block_hashes(p).tolist()])
    assert cold.prefix["hit_tokens"] == 0 and hot.prefix["preloaded_blocks"] == 4
    assert hot.prefix["hit_tokens"] == 48 and hot.prefix["prefill_tokens"] == 16


def test_off_equals_no_hashes_and_says_not_modelled():
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, 50, int(n)) for n in rng.integers(20, 300, 24)]
    w = _workload(prompts, out_len=30)
    off = _run(w, caching=False, conc=4)
    bare = dataclasses.replace(w, block_hashes=None, _columns={})
    na = _run(bare, conc=4)
    assert off.prefix is None
    assert na.prefix["modelled"] is False and na.prefix["hit_rate"] is None
    assert off.metrics == na.metrics                           # prefill everything, same run
    with pytest.raises(InputError):
        _run(w, caching=False, cached_prefixes=[[1]])


def test_pool_count_matches_free_blocks_every_step():
    rng = np.random.default_rng(7)
    head = rng.integers(0, 9, 48)
    prompts = [np.r_[head, rng.integers(0, 9, int(n))] for n in rng.integers(1, 400, 40)]
    prompts += prompts[:10]
    w = _workload(prompts, out_len=60)
    cfg = EngineConfig(kv_capacity_tokens=60 * 16)             # tight: preemptions + evictions
    sched = Scheduler(cfg, VANILLA, w, LinearCost(), PrefixCache(cfg.num_blocks))
    from simkit.engine.scheduler import Req
    chains = w.hash_chains()
    for i in range(len(prompts)):
        r = Req(i, i, len(prompts[i]), 60, w.offsets()[i], 0.0)
        r.keys = chains[i]
        sched.add(r)
    steps = 0
    while sched.has_work():
        plan = sched.schedule()
        sched.update(plan, float(steps), [], [], lambda r, t: None)
        steps += 1
        pc = sched.pc
        assert pc.free == sched.free_blocks
        # every physical block is free or held: cached ones once (shared), hashless per request
        held_cached = {k for k, n in pc.refs.items() if n > 0}
        held_plain = sum(r.blocks - sum(k is not None for k in r.chain) for r in sched.running)
        assert len(held_cached) + held_plain + sched.free_blocks == sched.total_blocks
        holders: dict = {}
        for r in sched.running:
            for k in r.chain:
                if k is not None:
                    holders[k] = holders.get(k, 0) + 1
        assert holders == {k: n for k, n in pc.refs.items() if n > 0}
    assert sched.preemptions > 0 and sched.pc.evicted > 0 and sched.hit_tokens > 0


def test_history_prefixes_follow_the_harness():
    from simkit.engine.prefix_cache import history_prefixes
    from simkit.history import parse_history, repeat_indices

    chains = [[i] for i in range(10)]
    assert history_prefixes(chains, parse_history("cold")) == []
    assert history_prefixes(chains, parse_history("warm")) == []
    assert history_prefixes(chains, parse_history("hot")) == chains
    rep = history_prefixes(chains, parse_history("repeat:0.5"))
    assert rep == [[int(i)] for i in repeat_indices(10, 0.5)] and len(rep) == 5
