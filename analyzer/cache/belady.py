"""Belady's offline optimum (MIN) for block caches: evict the block used furthest in the future.

The reference for any online policy at a capacity (Belady 1966, "A study of
replacement algorithms for a virtual-storage computer": report H_MIN(C) next to
H_policy(C)). Each block access is timed by (next request that uses the block,
position inside it), so among blocks needed by the same future request the deeper
one goes first (keeping chain heads, which is what a prefix hit needs).

Two variants, both offline:

* **pinned** (``pinned=True``): the blocks of the request just stored cannot be
  evicted to make room for each other unless the request alone exceeds the capacity
  — what an engine with that request in flight can do (vLLM ``ref_cnt``, SGLang
  ``lock_ref``);
* **unpinned**: every block, the request's own included, competes by next use.

Block-level MIN is optimal for *per-block* hits, not for the *leading-blocks* prefix
metric, so neither variant is a proven optimum and either can win: on the Mooncake
synthetic trace the unpinned one is higher (0.395 vs 0.390 block hit ratio at 5%).
Callers report both and take the larger as the offline bound (:mod:`.runs`).

Cost: the next-use table is computed once (numpy, :func:`next_uses`) and shared by
every capacity and variant; a replay is one heap push per block and one pop per
eviction, O(blocks · log blocks).
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.sweep import ChainRequest

#: Next-use key of a block never used again (above every ``request · stride + pos``).
NEVER = 1 << 62


def next_uses(requests: Sequence[ChainRequest]) -> list[list[int]]:
    """For every block of every request, the key ``request · stride + position`` of its
    next use in a *later* request (first position there), or :data:`NEVER`.

    One stable sort over all hashes (numpy); a Python pass only when a hash repeats
    inside one request. Keys order like ``(request, position)`` pairs."""
    lens = [len(r.hashes) for r in requests]
    total = sum(lens)
    if not total:
        return [[] for _ in requests]
    stride = max(lens) + 1
    try:
        flat = np.fromiter((h for r in requests for h in r.hashes), np.uint64, total)
    except (OverflowError, ValueError, TypeError):
        return _next_uses_loop(requests, stride)
    req = np.repeat(np.arange(len(requests), dtype=np.int64), lens)
    offsets = np.concatenate(([0], np.cumsum(lens)))
    pos = np.arange(total, dtype=np.int64) - offsets[req]
    order = np.argsort(flat, kind="stable")
    same = flat[order[1:]] == flat[order[:-1]]
    nxt = np.full(total, -1, dtype=np.int64)
    nxt[order[:-1][same]] = order[1:][same]
    has = nxt >= 0
    if (req[nxt[has]] == req[has]).any():
        return _next_uses_loop(requests, stride)  # a hash repeats inside a request
    key = np.full(total, NEVER, dtype=np.int64)
    key[has] = req[nxt[has]] * stride + pos[nxt[has]]
    keys = key.tolist()
    return [keys[offsets[i]:offsets[i + 1]] for i in range(len(requests))]


def _next_uses_loop(requests: Sequence[ChainRequest], stride: int) -> list[list[int]]:
    nxt: dict[int, int] = {}
    out: list[list[int]] = [[] for _ in requests]
    for r in range(len(requests) - 1, -1, -1):
        hashes = requests[r].hashes
        out[r] = [nxt.get(h, NEVER) for h in hashes]
        for i in range(len(hashes) - 1, -1, -1):
            nxt[hashes[i]] = r * stride + i
    return out


def belady_hits(requests: Sequence[ChainRequest], capacity_blocks: int, pinned: bool = True,
                nexts: list[list[int]] | None = None) -> np.ndarray:
    """Leading-block hits per request (int array) under MIN with ``capacity_blocks``.

    Hits respect each request's ``max_blocks``; every block of a request is then
    stored and the cache evicted back to capacity, the request's own blocks pinned
    when ``pinned``. ``nexts``: :func:`next_uses` of ``requests`` (computed when
    None), to share between capacities. Deterministic: ties on next use break on
    block hash."""
    requests = requests if isinstance(requests, list) else list(requests)
    nexts = next_uses(requests) if nexts is None else nexts
    when: dict[int, int] = {}          # cached block -> its next-use key
    heap: list[tuple[int, int]] = []   # (-key, hash): furthest next use on top
    hits = np.zeros(len(requests), dtype=np.int64)
    push, pop = heapq.heappush, heapq.heappop
    for r, req in enumerate(requests):
        hashes = req.hashes
        limit = len(hashes) if req.max_blocks is None else min(len(hashes), req.max_blocks)
        k = 0
        while k < limit and hashes[k] in when:
            k += 1
        hits[r] = k
        for h, nu in zip(hashes, nexts[r]):
            when[h] = nu
            push(heap, (-nu, h))
        if len(when) <= capacity_blocks:
            continue
        if pinned:
            _evict_pinned(heap, when, capacity_blocks, set(hashes))
        while len(when) > capacity_blocks and heap:  # unpinned, or the request alone is too big
            nu, h = pop(heap)
            if when.get(h) == -nu:
                del when[h]
    return hits


def _evict_pinned(heap: list, when: dict, capacity: int, pinned: set) -> None:
    """Pop furthest-next-use blocks outside ``pinned`` until ``capacity`` fits."""
    held = []
    unpinned = len(when) - len(pinned)
    while len(when) > capacity and heap and unpinned > 0:
        item = heapq.heappop(heap)
        h = item[1]
        if when.get(h) != -item[0]:
            continue  # stale entry
        if h in pinned:
            held.append(item)
            continue
        del when[h]
        unpinned -= 1
    for item in held:
        heapq.heappush(heap, item)
