"""Eviction orders of each policy (SGLang evict_policy keys, GDSF, Mooncake length-aware)."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.cache.index.eviction import HeapPolicy, SLRUPolicy, make_policy
from prefixcache.analyzer.errors import ConfigError


def _fill(policy, keys):
    for t, k in enumerate(keys):
        policy.add(k, float(t), 0)


def test_lru_and_fifo():
    lru, fifo = make_policy("lru"), make_policy("fifo")
    for p in (lru, fifo):
        _fill(p, "abc")
        p.touch("a", 5.0)
    assert lru.pop_victim() == "b" and fifo.pop_victim() == "a"
    assert lru.pop_victim(pinned={"c"}) == "a"
    assert len(lru) == 1 and "c" in lru


def test_lfu_prefers_rarely_hit_then_old():
    p = make_policy("lfu")
    _fill(p, "abc")
    p.touch("a", 3.0)
    p.touch("a", 4.0)
    p.touch("b", 5.0)
    assert [p.pop_victim() for _ in range(3)] == ["c", "b", "a"]
    with pytest.raises(KeyError):
        p.pop_victim()


def test_slru_protects_blocks_hit_twice():
    p = SLRUPolicy()
    _fill(p, "abc")
    p.touch("a", 3.0)
    p.touch("a", 4.0)  # 2 hits: protected
    p.touch("b", 5.0)  # 1 hit: still probation, but recent
    assert [p.pop_victim() for _ in range(3)] == ["c", "b", "a"]


def test_length_aware_evicts_deeper_blocks_first():
    p = make_policy("length")
    for pos, k in enumerate("abcd"):
        p.add(k, 0.0, pos)
    assert p.pop_victim() == "d" and p.pop_victim(pinned={"c"}) == "b"


def test_gdsf_cost_and_clock():
    p = HeapPolicy("gdsf", block_size=16, attention_scale=16)
    p.add("head", 0.0, 0)   # cost 16·(1+0)
    p.add("deep", 0.0, 10)  # cost 16·(1+10): dearer to recompute
    p.add("mid", 0.0, 1)
    assert p.pop_victim() == "head" and p.clock == 16.0
    p.add("new", 1.0, 0)  # priority clock + cost = 32 > mid's 32? ties broken by time
    assert p.pop_victim() == "mid"
    p.remove("deep")
    assert p.pop_victim() == "new" and len(p) == 0


def test_unknown_policy():
    with pytest.raises(ConfigError):
        make_policy("random")


def test_gdsf_is_prefix_aware():
    # the head of a 4-block chain makes 4 blocks reachable: it outlives the tail
    p = HeapPolicy("gdsf", block_size=16)
    for pos in range(4):
        p.add(("chain", pos), 0.0, pos, span=4 - pos)
    assert p.pop_victim() == ("chain", 3)
    assert p.pop_victim() == ("chain", 2)
