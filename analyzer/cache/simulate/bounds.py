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
Callers report both and take the larger as the offline bound (:mod:`.sweeps`).

How it runs: next uses are computed once, with numpy, into a :class:`MinPlan` that
every capacity and both variants share. A replay keeps the cached blocks in
*buckets* keyed by the request of their next use, each bucket holding the positions
of its blocks in that request. The blocks request ``r`` finds cached are then
exactly bucket ``r``, and eviction takes whole buckets (or the deepest positions of
one) from the furthest request down; blocks never used again are only a count. So
one request costs a few list operations per *distinct next request* of its blocks,
not one heap operation per block. The replay is the same MIN as a per-block heap
(tests compare them on random traces, both variants, every capacity), ties aside:
blocks never used again tie, and which of them goes cannot change a hit.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, chain_values

#: A bucket of one next request: (that request's index, positions of its blocks there).
Bucket = tuple[int, list[int]]


@dataclass(frozen=True, slots=True)
class MinPlan:
    """What every MIN replay of one request sequence needs, per request ``r``:

    ``stores[r]``: its distinct blocks that are used again, as buckets in next-use
    order (next request ascending; positions ascending inside one); ``never[r]``:
    how many of its distinct blocks are never used again; ``distinct[r]``: its
    distinct blocks; ``first[r]``: for a request that repeats a hash, each
    position's first position of the same hash (None otherwise); ``limit[r]``: the
    most leading blocks a hit may count (``max_blocks``, else the chain length)."""

    stores: list[list[Bucket]]
    never: list[int]
    distinct: list[int]
    first: list[list[int] | None]
    limit: list[int]


def min_plan(requests: Sequence[ChainRequest]) -> MinPlan:
    """The :class:`MinPlan` of ``requests``: one stable sort of all hashes (numpy),
    then one Python step per (request, next request) pair."""
    reqs = requests if isinstance(requests, list) else list(requests)
    n = len(reqs)
    lens = np.fromiter((len(r.hashes) for r in reqs), np.int64, n)
    total = int(lens.sum())
    limit = [len(r.hashes) if r.max_blocks is None else min(len(r.hashes), r.max_blocks) for r in reqs]
    if not total:
        return MinPlan([[] for _ in reqs], [0] * n, [0] * n, [None] * n, limit)
    req = np.repeat(np.arange(n, dtype=np.int64), lens)
    pos = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    flat = chain_values(reqs, total)
    order = np.argsort(flat, kind="stable")  # equal hashes together, in (request, position) order
    vals, ro = flat[order], req[order]
    same = np.concatenate(([False], vals[1:] == vals[:-1]))
    repeat = same & np.concatenate(([False], ro[1:] == ro[:-1]))  # a later position of a hash in one request
    heads = np.flatnonzero(~repeat)                               # first positions, in sorted order
    first = np.empty(total, dtype=np.int64)                       # flat index -> flat index of its first position
    first[order] = order[np.repeat(heads, np.diff(np.append(heads, total)))]
    again = same[heads[1:]]                                       # the next first position holds the same hash
    nxt = np.full(total, -1, dtype=np.int64)                      # flat index -> flat index of its next use
    nxt[order[heads[:-1][again]]] = order[heads[1:][again]]
    distinct = np.bincount(req[order[heads]], minlength=n)
    src = np.flatnonzero(nxt >= 0)                                # request-major: no sort needed across requests
    never = distinct - np.bincount(req[src], minlength=n)
    stores = _stores(n, req[src], req[nxt[src]], pos[nxt[src]], int(lens.max()) + 1)
    return MinPlan(stores, never.tolist(), distinct.tolist(), _first_maps(req, pos, first, lens), limit)


def _stores(n: int, src: np.ndarray, dst: np.ndarray, at: np.ndarray, stride: int) -> list[list[Bucket]]:
    """Buckets per storing request ``src`` (ascending): its blocks grouped by next
    request ``dst``, positions ``at`` there ascending."""
    stores: list[list[Bucket]] = [[] for _ in range(n)]
    if not len(src):
        return stores
    if (n + 1) ** 2 * stride < 1 << 62:  # one key; the stable sort runs on nearly sorted data
        o = np.argsort((src * (n + 1) + dst) * stride + at, kind="stable")
    else:
        o = np.lexsort((at, dst, src))
    s, d, p = src[o], dst[o], at[o].tolist()
    cut = np.flatnonzero((s[1:] != s[:-1]) | (d[1:] != d[:-1])) + 1
    starts, ends = np.append(0, cut), np.append(cut, len(s))
    for a, e, r, t in zip(starts.tolist(), ends.tolist(), s[starts].tolist(), d[starts].tolist()):
        stores[r].append((t, p[a:e]))
    return stores


def _first_maps(req: np.ndarray, pos: np.ndarray, first: np.ndarray, lens: np.ndarray) -> list[list[int] | None]:
    """Position -> first position of the same hash, for the requests that repeat one."""
    out: list[list[int] | None] = [None] * len(lens)
    rep = first != np.arange(len(first))
    if rep.any():
        fpos, offsets = pos[first], np.append(0, np.cumsum(lens))
        for r in np.unique(req[rep]).tolist():
            out[r] = fpos[offsets[r]:offsets[r + 1]].tolist()
    return out


def belady_hits(requests: Sequence[ChainRequest], capacity_blocks: int, pinned: bool = True,
                plan: MinPlan | None = None) -> np.ndarray:
    """Leading-block hits per request (int array) under MIN with ``capacity_blocks``.

    Hits respect each request's ``max_blocks``; every block of a request is then
    stored and the cache evicted back to capacity, furthest next use first, the
    request's own blocks pinned when ``pinned`` (they go only when the request alone
    exceeds the capacity, and then its furthest ones). ``plan``: the
    :func:`min_plan` of ``requests`` (computed when None), to share between
    capacities and variants."""
    plan = min_plan(requests) if plan is None else plan
    cache = _Buckets()
    hits = np.zeros(len(plan.limit), dtype=np.int64)
    for r, (stores, never, distinct, first, limit) in enumerate(
            zip(plan.stores, plan.never, plan.distinct, plan.first, plan.limit)):
        got = cache.take(r)
        if got:
            k, found = 0, set(got)
            if first is None:
                while k < limit and k in found:
                    k += 1
            else:
                while k < limit and first[k] in found:
                    k += 1
            hits[r] = k
        if not pinned:
            cache.store(stores, never)
            cache.evict_to(capacity_blocks)
        elif distinct <= capacity_blocks:
            cache.evict_to(capacity_blocks - distinct)
            cache.store(stores, never)
        else:  # the request alone is too big: nothing else stays, and of it the nearest next uses
            cache.evict_to(0)
            cache.store(*_nearest(stores, never, capacity_blocks))
    return hits


class _Buckets:
    """Cached blocks by the request of their next use: ``{request: [positions]}``, a
    max-heap of those requests (stale entries skipped), and a count of blocks never
    used again (evicted first)."""

    __slots__ = ("buckets", "heap", "size", "never")

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}
        self.heap: list[int] = []
        self.size = 0
        self.never = 0

    def take(self, r: int) -> list[int] | None:
        """Remove and return the positions request ``r`` finds cached."""
        got = self.buckets.pop(r, None)
        if got:
            self.size -= len(got)
        return got

    def store(self, stores: list[Bucket], never: int) -> None:
        buckets = self.buckets
        for t, ps in stores:
            held = buckets.get(t)
            if held is None:
                buckets[t] = ps.copy()
                heapq.heappush(self.heap, -t)
            else:
                held.extend(ps)
            self.size += len(ps)
        self.never += never

    def evict_to(self, capacity: int) -> None:
        """Evict furthest next use first until at most ``capacity`` blocks remain."""
        over = self.size + self.never - capacity
        if over <= 0:
            return
        gone = min(over, self.never)
        self.never -= gone
        over -= gone
        buckets, heap = self.buckets, self.heap
        while over > 0:
            held = buckets.get(-heap[0])
            if held is None:
                heapq.heappop(heap)  # taken by its request already
            elif len(held) <= over:
                del buckets[-heapq.heappop(heap)]
                over -= len(held)
                self.size -= len(held)
            else:
                held.sort()
                del held[len(held) - over:]
                self.size -= over
                over = 0


def _nearest(stores: list[Bucket], never: int, capacity: int) -> tuple[list[Bucket], int]:
    """The ``capacity`` blocks of one request with the nearest next uses."""
    out = []
    for t, ps in stores:
        if capacity <= 0:
            break
        out.append((t, ps[:capacity]))
        capacity -= len(ps)
    return out, max(0, min(never, capacity))
