"""vLLM v1 block-hash cache: chained hashing, the ⌊(n−1)/B⌋·B cap, tail-first LRU, pins, TTL."""

from __future__ import annotations

import orjson
import pytest

from prefixcache.analyzer.cache.base import InsertResult, MatchResult, PrefixCache, hit_cap_tokens
from prefixcache.analyzer.cache.index.block_hash import NONE_HASH, BlockHashCache, chain_seed, hash_blocks
from prefixcache.analyzer.errors import ConfigError
from tests.helpers import SAMPLES, existing

MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


def test_hash_blocks_full_blocks_only_and_chained():
    toks = list(range(50))
    hs = hash_blocks(toks, 16)
    assert len(hs) == 3  # 50 // 16: the 2-token tail is never hashed
    assert hash_blocks(toks[:48], 16) == hs
    changed = toks.copy()
    changed[40] = 999  # inside block 2
    hc = hash_blocks(changed, 16)
    assert hc[:2] == hs[:2] and hc[2] != hs[2]
    changed[0] = 999  # block 0 changes every later hash (chain)
    assert all(a != b for a, b in zip(hash_blocks(changed, 16), hs))
    # same tokens at a different offset are a different block (the parent differs)
    assert hash_blocks(toks[16:32] * 2, 16)[1] != hash_blocks(toks[16:32], 16)[0]
    assert all(0 <= h < 2**64 for h in hs)


def test_extra_keys_namespace_and_per_block():
    toks = list(range(32))
    plain = hash_blocks(toks, 16)
    salted = hash_blocks(toks, 16, ("cache_salt", "tenant-a"))
    assert salted[0] != plain[0] and salted[1] != plain[1]
    assert hash_blocks(toks, 16, ("cache_salt", "tenant-a")) == salted
    assert chain_seed(None) == NONE_HASH != chain_seed(("lora", "x", "/p"))
    mm = hash_blocks(toks, 16, {1: ("mm", "img0", 3)})
    assert mm[0] == plain[0] and mm[1] != plain[1]
    assert hash_blocks([-5, -4, 7, 8], 2) != hash_blocks([5, 4, 7, 8], 2)  # opaque pseudo ids
    with pytest.raises(ConfigError):
        hash_blocks(toks, 0)


def test_hit_capped_at_n_minus_one():
    c = BlockHashCache(block_size=16)
    assert isinstance(c, PrefixCache)
    toks = list(range(32))
    ins = c.insert(toks, 0.0)
    assert isinstance(ins, InsertResult) and len(ins.inserted) == 2 and ins.evicted == ()
    m = c.match(toks, 1.0)
    assert isinstance(m, MatchResult)
    assert m.cached_tokens == 16  # ⌊31/16⌋·16: the last token is recomputed
    assert m.block_hashes == tuple(hash_blocks(toks, 16)[:1])
    assert c.match(toks + [7], 1.0).cached_tokens == 32
    assert c.match([1] + toks, 1.0).cached_tokens == 0
    assert hit_cap_tokens(33, 16) == 32 and hit_cap_tokens(33, 16, False) == 32
    assert hit_cap_tokens(32, 16, False) == 32 and hit_cap_tokens(1, 16) == 0
    raw = BlockHashCache(block_size=16, cap_last_token=False)
    raw.insert(toks, 0.0)
    assert raw.match(toks, 1.0).cached_tokens == 32


def test_match_is_read_only():
    c = BlockHashCache(block_size=4, capacity_blocks=2)
    a, b = list(range(8)), list(range(100, 108))
    c.insert(a, 0)
    c.insert(b, 1)
    c.match(a + [0], 2)  # a lookup must not refresh a
    ins = c.insert(list(range(200, 204)), 3)
    assert len(ins.evicted) == 1 and ins.evicted[0] == hash_blocks(b, 4)[1]


def test_tail_first_free_order_evicts_chain_tail_first():
    a = list(range(16))  # 4 blocks of 4
    ha = hash_blocks(a, 4)
    c = BlockHashCache(block_size=4, capacity_blocks=4)
    c.insert(a, 0.0)
    ev = c.insert(list(range(100, 104)), 1.0).evicted
    assert ev == (ha[3],)  # vLLM: freed reversed, so the tail block is the LRU one
    assert c.match(a + [0], 2.0).cached_tokens == 12
    plain = BlockHashCache(block_size=4, capacity_blocks=4, free_order="head-first")
    plain.insert(a, 0.0)
    assert plain.insert(list(range(100, 104)), 1.0).evicted == (ha[0],)
    assert plain.match(a + [0], 2.0).cached_tokens == 0  # chain head gone: nothing matches


def test_hits_refresh_recency_and_every_eviction_is_reported():
    c = BlockHashCache(block_size=2, capacity_blocks=3)
    x, y, z = [1, 1], [2, 2], [3, 3]
    for t, seq in enumerate((x, y, z)):
        c.insert(seq, t)
    c.insert(x, 3)  # x becomes most recent
    ins = c.insert([4, 4, 5, 5], 4)  # two new blocks: y then z go
    assert set(ins.evicted) == {hash_blocks(y, 2)[0], hash_blocks(z, 2)[0]}
    assert len(c) == 3 and c.match(x + [0], 5).cached_tokens == 2
    assert c.evict(3, 6).freed_tokens == 4  # 3 tokens need 2 blocks of 2
    assert len(c) == 1


def test_in_flight_blocks_are_pinned():
    c = BlockHashCache(block_size=2, capacity_blocks=2)
    a, b = hash_blocks([1, 1, 2, 2], 2), hash_blocks([3, 3, 4, 4], 2)
    c.acquire(a, 0)
    inserted, evicted = c.acquire(b, 1)  # a is in flight: nothing can be evicted yet
    assert inserted == b and evicted == [] and len(c) == 4
    assert c.release(a, 2) == a[::-1]  # once a finishes it is evicted to get back to 2
    assert c.match_hashes(b, 3).cached_tokens == 4


def test_ttl_expiry_and_refresh():
    c = BlockHashCache(block_size=2, ttl_s=300)
    toks = [1, 2, 3, 4, 5]
    c.insert(toks, 0)
    assert c.match(toks, 299).cached_tokens == 4
    c.insert(toks, 299)  # a hit refreshes the TTL
    assert c.match(toks, 500).cached_tokens == 4
    assert c.match(toks, 900).cached_tokens == 0
    ins = c.insert([9, 9], 900)
    assert set(ins.evicted) == set(hash_blocks(toks, 2))
    with pytest.raises(ConfigError):
        BlockHashCache(policy="ttl")
    with pytest.raises(ConfigError):
        BlockHashCache(policy="nope")


@pytest.mark.parametrize("policy", ["lru", "fifo", "lfu", "slru", "length", "gdsf"])
def test_every_policy_respects_capacity(policy):
    c = BlockHashCache(block_size=2, capacity_blocks=5, policy=policy)
    for i in range(40):
        seq = [i % 7, 0, i % 3, 1, i, 2, 9, 9]
        c.insert(seq, float(i))
        assert len(c) <= 5
    assert c.match([39 % 7, 0, 39 % 3, 1, 39, 2, 9, 9, 0], 41.0).cached_tokens == 8


def _mooncake_lru(frac: float) -> float:
    reqs = [orjson.loads(line) for line in existing(MOONCAKE).read_bytes().splitlines()]
    unique = len({h for r in reqs for h in r["hash_ids"]})
    c = BlockHashCache(512, int(frac * unique), "lru", cap_last_token=False, free_order="head-first")
    hit = total = 0
    for r in reqs:
        hit += c.match_hashes(r["hash_ids"], r["timestamp"] / 1000).cached_tokens // 512
        total += len(r["hash_ids"])
        c.insert_hashes(r["hash_ids"], r["timestamp"] / 1000)
    return hit / total


def test_mooncake_lru_ground_truth():
    # shared/reference/papers.md §1: block-level LRU 0.155 at 5%, 0.260 at 10% of 43,924 blocks
    assert round(_mooncake_lru(0.05), 3) == 0.155
    assert round(_mooncake_lru(0.10), 3) == 0.260
