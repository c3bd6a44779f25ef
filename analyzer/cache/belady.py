"""Belady's offline optimum (MIN) for block caches: evict the block used furthest in the future.

The upper reference for any online policy at a capacity (Belady 1966, "A study of
replacement algorithms for a virtual-storage computer": report H_MIN(C) next to
H_policy(C)). Each block access is timed by (next request that
uses the block, position inside it), so among blocks needed by the same future
request the deeper one goes first (keeping chain heads, which is what a prefix hit
needs). Blocks of the request in flight are pinned: they cannot be evicted to
make room for each other unless the request alone exceeds the capacity (an
unpinned MIN loses to LRU on prefix chains, as the study in
github.com/gauravapiscean/agentic-kv-cache found). Block-level MIN is a
heuristic optimum for the leading-blocks metric, not a proven one.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.sweep import ChainRequest

_NEVER = (1 << 62, 0)


def _next_uses(requests: Sequence[ChainRequest]) -> list[list[tuple[int, int]]]:
    """For every block of every request: (request index, position) of its next use."""
    nxt: dict[int, tuple[int, int]] = {}
    out: list[list[tuple[int, int]]] = [[] for _ in requests]
    for r in range(len(requests) - 1, -1, -1):
        hashes = requests[r].hashes
        row = [nxt.get(h, _NEVER) for h in hashes]
        out[r] = row
        for i in range(len(hashes) - 1, -1, -1):
            nxt[hashes[i]] = (r, i)
    return out


def belady_hits(requests: Sequence[ChainRequest], capacity_blocks: int) -> np.ndarray:
    """Leading-block hits per request (int array) under MIN with ``capacity_blocks``.

    Hits respect each request's ``max_blocks``; every block of a request is then
    stored. Deterministic: ties on next use break on block hash.
    """
    requests = list(requests)
    nexts = _next_uses(requests)
    when: dict[int, tuple[int, int]] = {}   # cached block -> its next use
    heap: list[tuple[int, int, int]] = []   # (-req, -pos, hash): furthest next use on top
    hits = np.zeros(len(requests), dtype=np.int64)
    for r, req in enumerate(requests):
        hashes = req.hashes
        limit = len(hashes) if req.max_blocks is None else min(len(hashes), req.max_blocks)
        k = 0
        while k < limit and hashes[k] in when:
            k += 1
        hits[r] = k
        for h, nu in zip(hashes, nexts[r]):
            when[h] = nu
            heapq.heappush(heap, (-nu[0], -nu[1], h))
        pinned = set(hashes)
        _evict(heap, when, capacity_blocks, pinned)
        _evict(heap, when, capacity_blocks, frozenset())  # the request alone is too big
    return hits


def _evict(heap: list, when: dict, capacity: int, pinned) -> None:
    """Pop furthest-next-use blocks outside ``pinned`` until ``capacity`` fits."""
    held = []
    unpinned = len(when) - len(pinned)
    while len(when) > capacity and heap and (unpinned > 0 or not pinned):
        item = heapq.heappop(heap)
        h = item[2]
        if when.get(h) != (-item[0], -item[1]):
            continue  # stale entry
        if h in pinned:
            held.append(item)
            continue
        del when[h]
        unpinned -= 1
    for item in held:
        heapq.heappush(heap, item)
