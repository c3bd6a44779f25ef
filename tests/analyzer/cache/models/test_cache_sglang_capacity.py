"""SGLang's capacity: the radix tree's :meth:`serve` against a plain reference.

The reference keeps nodes as a dict from their whole prefix (a tuple) to their usage and
answers every question by brute force (longest common prefix over all keys, leaves
found by scanning, the victim by ``min``): SGLang's ``match_prefix`` split and refresh,
the matched path locked while ``n − matched`` tokens are allocated (``RadixCache.evict``
frees unlocked leaves), ``cache_finished_req``'s insert, and the trim of a request
larger than the pool.
"""

from __future__ import annotations

import random

import pytest

from prefixcache.analyzer.cache.base import hit_cap_tokens
from prefixcache.analyzer.cache.index.eviction import ORDERS
from prefixcache.analyzer.cache.models import CacheSpec, make_model
from prefixcache.analyzer.cache.index.radix import RadixTree
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.sequence import common_prefix_len

CAPACITIES = (1, 7, 40, 160, 10**9)


class PlainRadix:
    """Nodes by whole prefix: ``key -> [last, hits, created, id]``."""

    def __init__(self, b: int, cap: int, policy: str) -> None:
        self.b, self.cap, self.order = b, cap, ORDERS[policy]
        self.nodes: dict[tuple[int, ...], list] = {}
        self.ids = 0

    def parent(self, key):
        return max((k for k in self.nodes if len(k) < len(key) and key[:len(k)] == k), key=len, default=())

    def size(self) -> int:
        return sum(len(k) - len(self.parent(k)) for k in self.nodes)

    def lcp(self, tokens, limit) -> int:
        best = max((common_prefix_len(k, tokens[:limit]) for k in self.nodes), default=0)
        return best - best % self.b

    def split_at(self, tokens, m) -> None:
        """Make ``tokens[:m]`` a node when the match ends inside an edge."""
        if m == 0 or tokens[:m] in self.nodes:
            return
        inside = min((k for k in self.nodes if len(k) > m and k[:m] == tokens[:m]), key=len)
        last, hits, created, _ = self.nodes[inside]
        self.ids += 1
        self.nodes[tokens[:m]] = [last, hits, created, self.ids]

    def path(self, tokens, m):
        return [k for k in self.nodes if len(k) <= m and tokens[:len(k)] == k]

    def evict(self, need: int, locked) -> None:
        freed = 0
        while freed < need:
            leaves = [k for k in self.nodes if k not in locked
                      and not any(len(o) > len(k) and o[:len(k)] == k for o in self.nodes)]
            if not leaves:
                return
            def rank(k):
                last, hits, created, nid = self.nodes[k]
                return (*self.order(hits, last, created), created, nid)
            victim = min(leaves, key=rank)
            freed += len(victim) - len(self.parent(victim))
            del self.nodes[victim]

    def serve(self, tokens: tuple[int, ...], now: float) -> int:
        n = len(tokens)
        m = self.lcp(tokens, hit_cap_tokens(n, self.b))
        self.split_at(tokens, m)
        for k in self.path(tokens, m):
            self.nodes[k][0] = now
        self.evict(self.size() + n - m - self.cap, set(self.path(tokens, m)))
        lim = n - n % self.b
        m2 = self.lcp(tokens, lim)
        self.split_at(tokens, m2)
        on_path = self.path(tokens, m2)
        for k in on_path:
            self.nodes[k][0] = now
            self.nodes[k][1] += 1
        if m2 < lim:
            self.ids += 1
            self.nodes[tokens[:lim]] = [now, 0, self.ids, self.ids]
            on_path.append(tokens[:lim])
        self.evict(self.size() - self.cap, set(on_path))
        self.evict(self.size() - self.cap, set())
        return m


def workload(seed: int, n: int = 70) -> list[tuple[int, ...]]:
    """Agent-like prompts: sessions that extend their previous prompt, a shared system
    prefix, branches and a few unrelated prompts."""
    rng = random.Random(seed)
    system = tuple(rng.randrange(5) for _ in range(12))
    sessions: list[tuple[int, ...]] = []
    out = []
    for _ in range(n):
        roll = rng.random()
        if sessions and roll < 0.6:
            i = rng.randrange(len(sessions))
            grown = sessions[i] + tuple(rng.randrange(5) for _ in range(rng.randrange(1, 12)))
            sessions[i] = grown
        elif sessions and roll < 0.75:
            base = rng.choice(sessions)
            grown = base[:rng.randrange(len(base) + 1)] + tuple(rng.randrange(5) for _ in range(rng.randrange(1, 9)))
            sessions.append(grown)
        elif roll < 0.9:
            grown = system + tuple(rng.randrange(5) for _ in range(rng.randrange(1, 10)))
            sessions.append(grown)
        else:
            grown = tuple(rng.randrange(5) for _ in range(rng.randrange(1, 30)))
        out.append(grown)
    return out


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo"])
@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("seed", [1, 2])
def test_serve_equals_the_plain_reference_at_five_capacities(policy, b, seed):
    prompts = workload(seed)
    for cap in CAPACITIES:
        tree, plain = RadixTree(b, cap, policy), PlainRadix(b, cap, policy)
        for t, tokens in enumerate(prompts):
            assert tree.serve(tokens, float(t))[0] == plain.serve(tokens, float(t)), (cap, t)
            assert tree.size_tokens == plain.size() <= cap or cap < len(tokens)


def _reqs(prompts):
    return [SimRequest(order=i, session="s", index=i, source="x", record=i, model=None, now=float(i),
                       num_tokens=len(p), tokens=p) for i, p in enumerate(prompts)]


def test_capacity_matters_for_the_sglang_model():
    reqs = _reqs(workload(3, 120))
    hits = []
    for cap in CAPACITIES:
        model = make_model(CacheSpec("sglang"), 1, cap)
        hits.append(sum(model.step(r).cached_tokens for r in reqs))
    assert hits[0] <= 0.01 * hits[-1]  # one token holds (almost) nothing
    assert hits == sorted(hits) and hits[0] < hits[2] < hits[-1]
    unbounded = make_model(CacheSpec("sglang"), 1, None)
    assert hits[-1] == sum(unbounded.step(r).cached_tokens for r in reqs)
