"""Eviction policies for block caches: which cached, unpinned block goes first.

Every policy keeps the set of *evictable* entries (keys are block hashes or
radix nodes) and answers :meth:`EvictionPolicy.pop_victim`. ``now`` is the
logical clock (seconds); ``pos`` is the block's index inside the request that
touched it (0 = first block of the prompt). Sources of the orderings:

* ``lru``  — vLLM v1 ``FreeKVCacheBlockQueue`` (evict from the head, freed blocks
  appended), SGLang ``evict_policy.py`` key ``last_access_time``.
* ``fifo`` — SGLang key ``creation_time``: hits do not refresh.
* ``lfu``  — SGLang key ``(hit_count, last_access_time)``.
* ``slru`` — SGLang key ``(hit_count >= protected_threshold, last_access_time)``,
  threshold 2: a probation and a protected LRU segment.
* ``length`` — Mooncake (arXiv 2407.00079 v1, Table 1) "LengthAwareCache", LFU-like and
  position-aware: key ``(hit_count, −pos, last_access)``, i.e. among equally used
  blocks those deeper in a request go first. (The opposite order — evicting block
  0 first — breaks every chain it heads: 0.008 hit ratio at 5% on the Mooncake
  synthetic trace, far below the paper's LFU-like figures.)
* ``gdsf`` — Greedy-Dual-Size-Frequency (Cherkasova 1998), prefix-aware like
  RAGCache's PGDSF: priority = clock + frequency × recompute cost / size; the
  clock rises to the evicted priority. Evicting block ``pos`` of a chain makes
  the ``span`` blocks from it to the chain's end unreachable, so its cost is their
  prefill work, Σ ``B·(1 + q·B / attention_scale)`` over those blocks (linear FLOPs
  plus attention over the context before each); size = one block.
* ``mru`` — SGLang key ``−last_access_time`` (radix tree only).

The usage-based orderings (``lru``, ``fifo``, ``lfu``, ``slru``, ``mru``) are
defined once, in :data:`ORDERS`: the radix tree sorts its leaves by them, and
:class:`HeapPolicy` keys its heap by them; :class:`LRUPolicy`, :class:`FIFOPolicy`
and :class:`SLRUPolicy` are O(1) structures that pop in exactly that order (tests
compare them with a heap over the key). Expiry is not a policy: a TTL (``ttl_s``) is
an option of the cache that owns the policy; ``ttl`` is kept only as a deprecated
name for ``lru`` with a 300 s TTL (:func:`resolve_policy`).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Callable, Hashable, Protocol

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.errors import ConfigError

#: Context length (tokens) at which attention FLOPs per token equal the linear
#: (weight) FLOPs per token: ~2·params / (4·layers·d_model); Llama-3-8B ≈ 32k.
ATTENTION_SCALE_TOKENS = 32768
#: SGLang ``SLRUStrategy`` protected threshold (hits).
SLRU_PROTECTED_HITS = 2

#: Block-cache eviction policies (``belady``, the offline optimum, is a separate pass).
POLICIES = ("lru", "fifo", "lfu", "slru", "length", "gdsf")
#: TTL (seconds) the deprecated policy name ``ttl`` stands for when no TTL is given.
TTL_ALIAS_S = 300.0


def _lru(hits: int, last: float, born: int) -> tuple:
    return (last,)


def _fifo(hits: int, last: float, born: int) -> tuple:
    return (born,)


def _lfu(hits: int, last: float, born: int) -> tuple:
    return (hits, last)


def _slru(hits: int, last: float, born: int) -> tuple:
    return (hits >= SLRU_PROTECTED_HITS, last)


def _mru(hits: int, last: float, born: int) -> tuple:
    return (-last,)


#: The one definition of each usage-based eviction order: ``key(hits, last, born)``,
#: lowest first, from an entry's hit count, last use (logical s) and creation rank.
#: Callers append their own tie-break (radix: node creation, then id; heap: push order).
ORDERS: dict[str, Callable[[int, float, int], tuple]] = {
    "lru": _lru, "fifo": _fifo, "lfu": _lfu, "slru": _slru, "mru": _mru,
}


def resolve_policy(name: str, ttl_s: float | None) -> tuple[str, float | None]:
    """``(policy, ttl_s)`` with the deprecated policy name ``ttl`` resolved: it means
    ``lru`` with ``ttl_s`` (:data:`TTL_ALIAS_S` when None). Other names pass through."""
    if name == "ttl":
        return "lru", TTL_ALIAS_S if ttl_s is None else ttl_s
    return name, ttl_s


class EvictionPolicy(Protocol):
    """Ordering of evictable entries. ``add`` a new entry, ``touch`` it on a hit
    (it stays or becomes evictable), ``remove`` it when it leaves the cache,
    ``span``: blocks from this one to the end of the request's chain (GDSF),
    ``pop_victim`` removes and returns the next entry to evict that is not in
    ``pinned`` (blocks of requests in flight); ``KeyError`` when there is none."""

    name: str

    def add(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None: ...

    def touch(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None: ...

    def remove(self, key: Hashable) -> None: ...

    def pop_victim(self, pinned: frozenset | set = frozenset()) -> Hashable: ...

    def __contains__(self, key: object) -> bool: ...

    def __len__(self) -> int: ...


class LRUPolicy:
    """Least recently used first; insertion order doubles as recency."""

    name = "lru"
    refresh = True

    def __init__(self) -> None:
        self._od: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        self._od[key] = None
        self._od.move_to_end(key)

    def touch(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        if key in self._od:
            if self.refresh:
                self._od.move_to_end(key)
        else:
            self._od[key] = None

    def remove(self, key: Hashable) -> None:
        self._od.pop(key, None)

    def pop_victim(self, pinned: frozenset | set = frozenset()) -> Hashable:
        if not pinned:
            if not self._od:
                raise KeyError("empty")
            return self._od.popitem(last=False)[0]
        for key in self._od:
            if key not in pinned:
                del self._od[key]
                return key
        raise KeyError("all pinned")

    def __contains__(self, key: object) -> bool:
        return key in self._od

    def __len__(self) -> int:
        return len(self._od)


class FIFOPolicy(LRUPolicy):
    """First stored first evicted; hits do not refresh (SGLang ``fifo``)."""

    name = "fifo"
    refresh = False


class SLRUPolicy:
    """Segmented LRU: probation segment evicted first (LRU), then protected."""

    name = "slru"

    def __init__(self, threshold: int = SLRU_PROTECTED_HITS) -> None:
        self.threshold = threshold
        self._hits: dict[Hashable, int] = {}
        self._probation: OrderedDict[Hashable, None] = OrderedDict()
        self._protected: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        self._hits.setdefault(key, 0)
        self._place(key)

    def touch(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        self._hits[key] = self._hits.get(key, 0) + 1
        self._place(key)

    def _place(self, key: Hashable) -> None:
        self._probation.pop(key, None)
        self._protected.pop(key, None)
        seg = self._protected if self._hits[key] >= self.threshold else self._probation
        seg[key] = None

    def remove(self, key: Hashable) -> None:
        self._probation.pop(key, None)
        self._protected.pop(key, None)
        self._hits.pop(key, None)

    def pop_victim(self, pinned: frozenset | set = frozenset()) -> Hashable:
        for seg in (self._probation, self._protected):
            for key in seg:
                if key not in pinned:
                    del seg[key]
                    del self._hits[key]
                    return key
        raise KeyError("empty or all pinned")

    def __contains__(self, key: object) -> bool:
        return key in self._probation or key in self._protected

    def __len__(self) -> int:
        return len(self._probation) + len(self._protected)


class HeapPolicy:
    """Priority-keyed policy with lazy deletion (lowest key evicted first, ties by push order).

    ``kind``: any :data:`ORDERS` name (the block caches use it for ``lfu``; the others
    serve as the reference the O(1) policies are tested against), ``length`` or
    ``gdsf``; ``block_size`` feeds the GDSF cost.
    """

    def __init__(self, kind: str, block_size: int = DEFAULT_BLOCK_SIZE,
                 attention_scale: int = ATTENTION_SCALE_TOKENS) -> None:
        self.name = kind
        self.block_size = block_size
        self.attention_scale = attention_scale
        self.clock = 0.0  # GDSF inflation value L
        self._order = ORDERS.get(kind)
        self._seq = 0
        self._heap: list[tuple] = []
        self._live: dict[Hashable, tuple] = {}  # key -> current heap entry
        self._freq: dict[Hashable, int] = {}
        self._pos: dict[Hashable, tuple[int, int]] = {}  # key -> (pos, span)
        self._born: dict[Hashable, int] | None = {} if kind == "fifo" else None  # key -> first push

    def _key(self, key: Hashable, now: float) -> tuple:
        hits, (pos, span) = self._freq[key], self._pos[key]
        if self._order is not None:
            return self._order(hits, now, self._born.setdefault(key, self._seq) if self._born is not None else 0)
        if self.name == "length":
            return (hits, -pos, now)
        B = self.block_size
        cost = B * span + B * B / self.attention_scale * (span * pos + span * (span - 1) / 2)
        return (self.clock + (hits + 1) * cost, now)

    def _push(self, key: Hashable, now: float) -> None:
        self._seq += 1
        entry = (*self._key(key, now), self._seq, key)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)

    def add(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        self._freq.setdefault(key, 0)
        self._pos[key] = (pos, span)
        self._push(key, now)

    def touch(self, key: Hashable, now: float, pos: int = 0, span: int = 1) -> None:
        self._freq[key] = self._freq.get(key, -1) + 1
        self._pos[key] = (pos, span)
        self._push(key, now)

    def remove(self, key: Hashable) -> None:
        if self._live.pop(key, None) is not None:
            del self._freq[key], self._pos[key]
            if self._born is not None:
                del self._born[key]

    def pop_victim(self, pinned: frozenset | set = frozenset()) -> Hashable:
        held = []
        try:
            while self._heap:
                entry = heapq.heappop(self._heap)
                key = entry[-1]
                if self._live.get(key) is not entry:
                    continue
                if key in pinned:
                    held.append(entry)
                    continue
                del self._live[key]
                del self._freq[key], self._pos[key]
                if self._born is not None:
                    del self._born[key]
                if self.name == "gdsf":
                    self.clock = entry[0]
                return key
            raise KeyError("empty or all pinned")
        finally:
            for entry in held:
                heapq.heappush(self._heap, entry)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __len__(self) -> int:
        return len(self._live)


def make_policy(name: str, block_size: int = DEFAULT_BLOCK_SIZE) -> EvictionPolicy:
    """A fresh policy by name (one of :data:`POLICIES`, or the deprecated ``ttl``: LRU
    order); ``ConfigError`` otherwise."""
    if name in ("lru", "ttl"):
        return LRUPolicy()
    if name == "fifo":
        return FIFOPolicy()
    if name == "slru":
        return SLRUPolicy()
    if name in ("lfu", "length", "gdsf"):
        return HeapPolicy(name, block_size)
    raise ConfigError(f"unknown eviction policy {name!r}; choose one of {', '.join(POLICIES)} or belady")
