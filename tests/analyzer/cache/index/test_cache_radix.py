"""SGLang radix cache: n−1 cap, pages, node splitting, leaf eviction."""

from __future__ import annotations

import random

import pytest

from prefixcache.analyzer.cache.base import PrefixCache
from prefixcache.analyzer.cache.index.radix import RadixTree
from prefixcache.analyzer.errors import ConfigError


def test_match_capped_at_n_minus_one_and_split():
    c = RadixTree()
    assert isinstance(c, PrefixCache)
    a = list(range(10))
    assert c.insert(a, 0).inserted and c.size_tokens == 10
    assert c.match(a, 1).cached_tokens == 9  # last token recomputed
    assert c.match(a + [99], 1).cached_tokens == 10
    b = list(range(6)) + [50, 51, 52]
    assert c.match(b, 1).cached_tokens == 6
    c.insert(b, 2)  # splits the 10-token node at 6
    assert c.size_tokens == 13
    assert sorted(len(n.key) for n in c._leaves()) == [3, 4]
    assert len(c.root.children) == 1 and len(next(iter(c.root.children.values())).key) == 6
    assert c.longest_prefix(b) == 9 and c.longest_prefix([7]) == 0


def test_page_alignment():
    c = RadixTree(block_size=4)
    toks = list(range(11))
    c.insert(toks, 0)
    assert c.size_tokens == 8  # partial last page never inserted
    assert c.match(toks, 1).cached_tokens == 8
    assert c.match(toks[:9], 1).cached_tokens == 8
    assert c.match(toks[:8], 1).cached_tokens == 4  # n−1 = 7 → one page
    assert c.match([0, 1, 2, 3, 4, 5, 99, 7, 8], 1).cached_tokens == 4


def test_lru_leaf_eviction_keeps_shared_prefix():
    c = RadixTree(capacity_tokens=12)
    shared = [1, 2, 3, 4]
    c.insert(shared + [10, 11, 12, 13], 0)
    c.insert(shared + [20, 21, 22, 23], 1)
    ins = c.insert([30, 31, 32, 33], 2)
    assert len(ins.evicted) == 1 and c.size_tokens == 12
    assert c.match(shared + [10, 11, 12, 13, 0], 3).cached_tokens == 4  # oldest leaf went
    assert c.match(shared + [20, 21, 22, 23, 0], 3).cached_tokens == 8
    ev = c.evict(5, 4)
    assert ev.freed_tokens >= 5 and c.size_tokens <= 7


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo", "slru", "mru"])
def test_capacity_respected_and_matches_agree_with_prefixes(policy):
    rng = random.Random(3)
    c = RadixTree(capacity_tokens=40, policy=policy)
    seen: list[tuple[int, ...]] = []
    for t in range(60):
        toks = tuple([rng.randrange(3) for _ in range(rng.randrange(1, 12))])
        m = c.match(toks, t).cached_tokens
        best = max((_lcp(toks, s) for s in seen), default=0)
        assert m <= min(best, len(toks) - 1)
        c.insert(toks, t)
        seen.append(toks)
        assert c.size_tokens <= 40 or len(toks) > 40
    with pytest.raises(ConfigError):
        RadixTree(policy="nope")


def test_unbounded_equals_longest_common_prefix():
    rng = random.Random(5)
    c = RadixTree(cap_last_token=False)
    seen: list[tuple[int, ...]] = []
    for t in range(80):
        toks = tuple([rng.randrange(2) for _ in range(rng.randrange(1, 200))])
        assert c.match(toks, t).cached_tokens == max((_lcp(toks, s) for s in seen), default=0)
        c.insert(toks, t)
        seen.append(toks)


def _lcp(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k
