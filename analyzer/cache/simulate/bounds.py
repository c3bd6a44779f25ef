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

How it runs: next uses are computed once, with numpy, into a columnar :class:`MinPlan`
that every capacity and both variants share; the replay runs in the compiled core
(:mod:`..index.kernels`) or, with ``PREFIXCACHE_PURE=1`` or no compiler at install, its
pure-Python twin below (identical hits). A replay keeps the cached blocks in
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
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.index.kernels import i64, native
from prefixcache.analyzer.cache.simulate.stack_profile import ChainColumns, ChainRequest, chain_values

#: A bucket of one next request: (that request's index, positions of its blocks there).
Bucket = tuple[int, list[int]]


@dataclass(frozen=True, slots=True)
class MinPlan:
    """What every MIN replay of one request sequence needs, in columnar form (int64 arrays).

    Request ``r`` stores its distinct blocks that are used again as *buckets* ``k`` in
    ``req_off[r]:req_off[r+1]`` (next request ``bucket_dst[k]`` ascending), bucket ``k``
    holding the positions ``pos[bucket_off[k]:bucket_off[k+1]]`` (ascending) of its
    blocks in that request. Per request: ``never`` (its distinct blocks never used
    again), ``distinct`` (its distinct blocks), ``limit`` (the most leading blocks a hit
    may count: ``max_blocks``, else the chain length). Per block, flat in request order
    (``chain_off``): ``first``, the position of the first block of the same hash in its
    request (its own position unless the request repeats a hash)."""

    req_off: np.ndarray
    bucket_dst: np.ndarray
    bucket_off: np.ndarray
    pos: np.ndarray
    never: np.ndarray
    distinct: np.ndarray
    limit: np.ndarray
    chain_off: np.ndarray
    first: np.ndarray
    _lists: dict = field(default_factory=dict, compare=False, repr=False)

    def stores(self) -> list[list[Bucket]]:
        """Per request, its buckets as ``(next request, [positions])`` (the pure replay's form; built once)."""
        if "stores" not in self._lists:
            p, off, dst = self.pos.tolist(), self.bucket_off.tolist(), self.bucket_dst.tolist()
            ro = self.req_off.tolist()
            self._lists["stores"] = [[(dst[k], p[off[k]:off[k + 1]]) for k in range(ro[r], ro[r + 1])]
                                     for r in range(len(ro) - 1)]
        return self._lists["stores"]

    def first_maps(self) -> list[list[int] | None]:
        """Per request, position → first position of the same hash, or None where no hash repeats."""
        if "first" not in self._lists:
            out: list[list[int] | None] = [None] * len(self.limit)
            co = self.chain_off
            rep = self.first != (np.arange(len(self.first), dtype=np.int64) - np.repeat(co[:-1], np.diff(co)))
            if rep.any():
                req = np.repeat(np.arange(len(self.limit)), np.diff(co))
                for r in np.unique(req[rep]).tolist():
                    out[r] = self.first[co[r]:co[r + 1]].tolist()
            self._lists["first"] = out
        return self._lists["first"]


def min_plan(requests: Sequence[ChainRequest]) -> MinPlan:
    """The :class:`MinPlan` of ``requests``: one stable sort of all hashes and a few
    array passes (numpy), no Python step per block."""
    reqs = requests if isinstance(requests, (list, ChainColumns)) else list(requests)
    n = len(reqs)
    if isinstance(reqs, ChainColumns):
        lens = reqs.lens
        limit = np.minimum(lens, reqs.max_blocks)
    else:
        lens = np.fromiter((len(r.hashes) for r in reqs), np.int64, n)
        limit = np.fromiter((len(r.hashes) if r.max_blocks is None else min(len(r.hashes), r.max_blocks)
                             for r in reqs), np.int64, n)
    total = int(lens.sum())
    chain_off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    empty = np.zeros(0, dtype=np.int64)
    if not total:
        zeros = np.zeros(n, dtype=np.int64)
        return MinPlan(np.zeros(n + 1, dtype=np.int64), empty, np.zeros(1, dtype=np.int64), empty, zeros,
                       zeros.copy(), limit, chain_off, empty)
    req = np.repeat(np.arange(n, dtype=np.int64), lens)
    pos = np.arange(total, dtype=np.int64) - chain_off[req]
    flat = reqs.ids if isinstance(reqs, ChainColumns) else chain_values(reqs, total)
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
    distinct = np.bincount(req[order[heads]], minlength=n).astype(np.int64)
    src = np.flatnonzero(nxt >= 0)                                # request-major: no sort needed across requests
    never = distinct - np.bincount(req[src], minlength=n)
    req_off, bucket_dst, bucket_off, at = _buckets(n, req[src], req[nxt[src]], pos[nxt[src]], int(lens.max()) + 1)
    return MinPlan(req_off, bucket_dst, bucket_off, at, never.astype(np.int64), distinct, limit, chain_off,
                   pos[first])


def _buckets(n: int, src: np.ndarray, dst: np.ndarray, at: np.ndarray,
             stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Buckets per storing request ``src`` (ascending): its blocks grouped by next
    request ``dst``, positions ``at`` there ascending. Returns (request → bucket
    offsets, each bucket's next request, bucket → position offsets, positions)."""
    if not len(src):
        return np.zeros(n + 1, dtype=np.int64), src[:0], np.zeros(1, dtype=np.int64), at[:0]
    if (n + 1) ** 2 * stride < 1 << 62:  # one key; the stable sort runs on nearly sorted data
        o = np.argsort((src * (n + 1) + dst) * stride + at, kind="stable")
    else:
        o = np.lexsort((at, dst, src))
    s, d, p = src[o], dst[o], at[o]
    cut = np.flatnonzero((s[1:] != s[:-1]) | (d[1:] != d[:-1])) + 1
    starts = np.append(0, cut).astype(np.int64)
    bucket_off = np.append(starts, len(s)).astype(np.int64)
    req_off = np.searchsorted(s[starts], np.arange(n + 1), side="left").astype(np.int64)
    return req_off, d[starts].astype(np.int64), bucket_off, p.astype(np.int64)


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
    hits = np.zeros(len(plan.limit), dtype=np.int64)
    lib = native()
    if lib is not None:  # the compiled twin of the replay below (index/_kernels.c)
        if len(hits):
            lib.belady_hits(int(capacity_blocks), bool(pinned), plan.req_off, plan.bucket_dst, plan.bucket_off,
                            plan.pos, plan.never, plan.distinct, plan.limit, plan.chain_off, i64(plan.first), hits)
        return hits
    cache = _Buckets()
    for r, (stores, never, distinct, first, limit) in enumerate(
            zip(plan.stores(), plan.never.tolist(), plan.distinct.tolist(), plan.first_maps(), plan.limit.tolist())):
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
