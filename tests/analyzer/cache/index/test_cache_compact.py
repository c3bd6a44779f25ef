"""Prefix-sharing compact ids (analyzer/cache/index/compact.py) against plain tuples: same ids, same
chains, same radix tree and the same simulated figures."""

from __future__ import annotations

import random
from array import array
from dataclasses import replace

import pytest

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache, hash_blocks
from prefixcache.analyzer.cache.index.compact import MAX_DEPTH, Shared, compact
from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.index.radix import RadixTree
from prefixcache.analyzer.cache.simulate.simulator import baseline, simulate_stream
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError


def _sessions(seed: int, n: int = 120, vocab: int = 50) -> list[tuple[str, tuple[int, ...]]]:
    """(session, prompt) in input order: prompts mostly extend their session's last, some drift."""
    rng = random.Random(seed)
    last: dict[str, tuple[int, ...]] = {}
    out = []
    for _ in range(n):
        s = f"s{rng.randrange(6)}"
        prev = last.get(s, ())
        cut = len(prev) if rng.random() < 0.7 else rng.randrange(len(prev) + 1)
        ids = prev[:cut] + tuple(rng.randrange(vocab) for _ in range(rng.randrange(0, 40)))
        last[s] = ids
        out.append((s, ids))
    return out


def _shared(prompts):
    last: dict[str, Shared] = {}
    out = []
    for s, ids in prompts:
        last[s] = Shared.of(ids, last.get(s))
        out.append(last[s])
    return out


def test_shared_sequences_read_back_the_same_ids():
    prompts = _sessions(1)
    for (_, ids), sh in zip(prompts, _shared(prompts)):
        assert tuple(sh.ids()) == ids and len(sh) == len(ids) and sh == ids and sh == list(ids)
        assert tuple(sh[3:9]) == ids[3:9] and (not ids or sh[len(ids) - 1] == ids[-1])
        assert sh.depth <= MAX_DEPTH


def test_a_session_costs_its_new_ids_only():
    base = tuple(range(1000, 3000))
    chain = [Shared.of(base)]
    for k in range(10):
        chain.append(Shared.of(base + tuple(range(k * 10)), chain[-1]))
    assert sum(len(s.tail) for s in chain) == 2000 + 90  # each request stores what it adds
    assert isinstance(chain[-1].tail, array) and chain[-1].tail.itemsize == 4


def test_ids_too_wide_for_32_bits_widen():
    assert compact([1, -2]).typecode == "q" and compact([2 ** 64 - 1]).typecode == "Q"
    assert compact([2 ** 70]) == (2 ** 70,)
    big = Shared.of((1, 2, 2 ** 70), Shared.of((1, 2, 3)))
    assert tuple(big) == (1, 2, 2 ** 70) and big == (1, 2, 2 ** 70)


def test_chains_share_blocks_and_equal_full_hashing():
    prompts = _sessions(2, vocab=5)
    for bs in (1, 4, 16):
        for (_, ids), sh in zip(prompts, _shared(prompts)):
            got = sh.blocks(bs, (bs, None), lambda x, parent: hash_blocks(x, bs, None, parent)).ids()
            assert list(got) == hash_blocks(ids, bs)


def test_radix_tree_over_shared_prompts_matches_tuples():
    prompts = _sessions(3, vocab=4)
    plain, shared = RadixTree(cap_last_token=False), RadixTree(cap_last_token=False)
    for i, ((_, ids), sh) in enumerate(zip(prompts, _shared(prompts))):
        assert plain.share(ids, i).length == shared.share(sh, i).length
    assert sorted(plain.depths()) == sorted(shared.depths()) and plain.size_tokens == shared.size_tokens
    for page in (1, 4):
        a, b = RadixTree(page, 200), RadixTree(page, 200)
        for i, ((_, ids), sh) in enumerate(zip(prompts, _shared(prompts))):
            assert a.serve(ids, float(i))[0] == b.serve(sh, float(i))[0]


def test_simulated_figures_are_the_same_with_shared_ids():
    prompts = _sessions(4, n=200, vocab=3)
    plain = [SimRequest(order=i, session=s, index=i, source="t", record=i + 1, model=None, now=float(i),
                        num_tokens=len(ids), tokens=ids) for i, (s, ids) in enumerate(prompts)]
    shared = [replace(r, tokens=sh) for r, sh in zip(plain, _shared(prompts))]
    assert baseline(plain) == baseline(shared)
    for cache, cap in (("vllm", None), ("vllm", 30), ("blocks", 12), ("sglang", 100), ("deepseek", None)):
        spec = CacheSpec(cache, block_size=None if cache == "deepseek" else 4)
        assert simulate_stream(plain, spec, cap) == simulate_stream(shared, spec, cap), cache


def test_an_unbounded_block_cache_keeps_no_order_and_matches_the_same():
    ordered, plain = BlockHashCache(4), BlockHashCache(4, ordered=False)
    for i, (_, ids) in enumerate(_sessions(5, vocab=3)):
        assert ordered.match(ids, float(i)) == plain.match(ids, float(i))
        assert ordered.insert(ids, float(i)).inserted == plain.insert(ids, float(i)).inserted
    assert len(ordered) == len(plain) and not plain._policy._od
    with pytest.raises(ConfigError):
        plain.evict(4, 0.0)
    assert BlockHashCache(4, 10, ordered=False)._ordered  # a bounded cache always keeps its order
