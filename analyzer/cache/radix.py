"""SGLang radix prefix cache: token-level radix tree, page size, leaf eviction.

Semantics (SGLang 0.5.23 ``srt/mem_cache/radix_cache.py``, ``evict_policy.py``;
see ``shared/reference/engines.md`` §2):

* Keys are token ids; a child is keyed by its first token, or by its first page
  (a tuple) when ``page_size > 1``. Matches and inserts are page-aligned
  (``len // page_size * page_size``); a partial last page is never inserted.
* A lookup is capped at ``input_len − 1`` tokens (``Req._compute_max_prefix_len``).
* A match ending inside a node splits it (``_split_node``); insert adds the
  unmatched remainder as a new leaf and bumps ``hit_count`` on reused nodes.
* Eviction frees whole **leaves** that are not locked (not on the path of a
  request in flight), lowest policy key first, pushing a parent once it becomes
  a childless leaf — until enough tokens are freed. Policy keys: ``lru``
  last access, ``lfu`` (hits, last access), ``fifo`` creation, ``slru`` (hits ≥ 2,
  last access), ``mru`` −last access.

Capacity is in tokens (SGLang sizes its KV pool in tokens). ``now`` is the
logical clock; ties break on node creation order, so runs are deterministic.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Hashable, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.sequence import common_prefix_len
from prefixcache.analyzer.cache.base import BlockHash, EvictResult, InsertResult, MatchResult

RADIX_POLICIES = ("lru", "lfu", "fifo", "slru", "mru")


class _Node:
    __slots__ = ("key", "children", "parent", "last", "created", "hits", "id")

    def __init__(self, key: tuple, parent: "_Node | None", now: float, nid: int) -> None:
        self.key = key
        self.children: dict = {}
        self.parent = parent
        self.last = now
        self.created = nid
        self.hits = 0
        self.id = nid


def _lcp(a: tuple, b: tuple, off: int, end: int) -> int:
    """Length of the common prefix of ``a`` and ``b[off:end]`` (chunked compares)."""
    n = min(len(a), end - off)
    k = 0
    while k + 64 <= n and a[k:k + 64] == b[off + k:off + k + 64]:
        k += 64
    while k < n and a[k] == b[off + k]:
        k += 1
    return k


class RadixCache:
    """A token radix tree with SGLang semantics (implements ``PrefixCache``).

    ``capacity_tokens`` None = unbounded. ``cap_last_token`` False gives the
    plain longest-common-prefix (used for the infinite "ideal" cache).
    ``block_size`` equals ``page_size``. ``InsertResult.evicted`` lists evicted
    node ids (as ``BlockHash``); ``EvictResult.freed_tokens`` the tokens.
    """

    def __init__(self, page_size: int = 1, capacity_tokens: int | None = None,
                 policy: str = "lru", *, cap_last_token: bool = True) -> None:
        if page_size <= 0:
            raise ConfigError(f"page size must be positive, got {page_size}")
        if policy not in RADIX_POLICIES:
            raise ConfigError(f"unknown radix eviction policy {policy!r}; choose one of {', '.join(RADIX_POLICIES)}")
        self.block_size = self.page_size = page_size
        self.capacity_tokens = capacity_tokens
        self.policy = policy
        self.cap_last_token = cap_last_token
        self._ids = 0
        self.root = _Node((), None, 0.0, 0)
        self.size_tokens = 0

    def _child_key(self, tokens: Sequence[int], off: int):
        return tokens[off] if self.page_size == 1 else tuple(tokens[off:off + self.page_size])

    def _walk(self, tokens: Sequence[int], limit: int):
        """Yield (node, matched tokens inside it) along the longest page-aligned match."""
        node, off = self.root, 0
        while off + self.page_size <= limit:
            child = node.children.get(self._child_key(tokens, off))
            if child is None:
                return
            k = _lcp(child.key, tokens, off, limit) // self.page_size * self.page_size
            if k == 0:
                return
            yield child, k
            if k < len(child.key):
                return
            node, off = child, off + k

    def _limit(self, n: int) -> int:
        m = n - 1 if self.cap_last_token else n
        return max(0, m) // self.page_size * self.page_size

    def match(self, tokens: Sequence[int], now: float) -> MatchResult:
        """Cached prefix length (page-aligned, ≤ n−1); read-only (no split, no refresh)."""
        total, ids = 0, []
        tokens = tuple(tokens)
        for node, k in self._walk(tokens, self._limit(len(tokens))):
            total += k
            ids.append(BlockHash(node.id))
        return MatchResult(total, tuple(ids))

    def longest_prefix(self, tokens: Sequence[int]) -> int:
        """Longest cached prefix of ``tokens`` with no cap (page-aligned)."""
        tokens = tuple(tokens)
        lim = len(tokens) // self.page_size * self.page_size
        return sum(k for _, k in self._walk(tokens, lim))

    def insert(self, tokens: Sequence[int], now: float) -> InsertResult:
        """Insert every full page of ``tokens``; refresh/bump the reused path; evict."""
        tokens = tuple(tokens)
        lim = len(tokens) // self.page_size * self.page_size
        node, off, path, new = self.root, 0, [], []
        while off < lim:
            child = node.children.get(self._child_key(tokens, off))
            if child is None:
                self._ids += 1
                leaf = _Node(tuple(tokens[off:lim]), node, now, self._ids)
                node.children[self._child_key(tokens, off)] = leaf
                self.size_tokens += lim - off
                path.append(leaf)
                new.append(BlockHash(leaf.id))
                break
            k = _lcp(child.key, tokens, off, lim) // self.page_size * self.page_size
            if k < len(child.key):
                child = self._split(child, k)
            child.last = now
            child.hits += 1
            path.append(child)
            node, off = child, off + k
        evicted = self._evict_tokens(self._over(), now, frozenset(id(n) for n in path))
        return InsertResult(tuple(new), evicted.evicted)

    def _split(self, child: _Node, k: int) -> _Node:
        """Split ``child`` after ``k`` tokens; returns the new upper node."""
        self._ids += 1
        upper = _Node(child.key[:k], child.parent, child.last, self._ids)
        upper.hits, upper.created = child.hits, child.created
        parent = child.parent
        parent.children[self._child_key(child.key, 0)] = upper
        child.key = child.key[k:]
        child.parent = upper
        upper.children[self._child_key(child.key, 0)] = child
        return upper

    def _over(self) -> int:
        if self.capacity_tokens is None:
            return 0
        return max(0, self.size_tokens - self.capacity_tokens)

    def _prio(self, n: _Node) -> tuple:
        p = self.policy
        if p == "lru":
            return (n.last, n.created)
        if p == "lfu":
            return (n.hits, n.last, n.created)
        if p == "fifo":
            return (n.created,)
        if p == "slru":
            return (n.hits >= 2, n.last, n.created)
        return (-n.last, n.created)  # mru

    def evict(self, num_tokens: int, now: float) -> EvictResult:
        """Free at least ``num_tokens`` tokens by deleting unlocked leaves."""
        return self._evict_tokens(num_tokens, now, frozenset())

    def _evict_tokens(self, num_tokens: int, now: float, locked: frozenset) -> EvictResult:
        if num_tokens <= 0:
            return EvictResult()
        heap = [(self._prio(n), n.id, n) for n in self._leaves() if id(n) not in locked]
        heapq.heapify(heap)
        freed, out = 0, []
        while freed < num_tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[self._child_key(leaf.key, 0)]
            freed += len(leaf.key)
            self.size_tokens -= len(leaf.key)
            out.append(BlockHash(leaf.id))
            if parent is not self.root and not parent.children and id(parent) not in locked:
                heapq.heappush(heap, (self._prio(parent), parent.id, parent))
        return EvictResult(tuple(out), freed)

    def _leaves(self):
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            if n.children:
                stack.extend(n.children.values())
            else:
                yield n


class _OwnerNode:
    """A radix-tree node: the edge into it is ``src[lo:hi]``; ``owner`` is the most
    recent request whose prompt covers the whole edge."""

    __slots__ = ("src", "lo", "hi", "children", "owner")

    def __init__(self, src: Sequence[int], lo: int, hi: int, owner: Hashable) -> None:
        self.src, self.lo, self.hi = src, lo, hi
        self.children: dict[int, _OwnerNode] = {}
        self.owner = owner

    def split(self, at: int) -> None:
        """Cut the edge after ``at`` tokens: self keeps the head, a new child the tail."""
        tail = _OwnerNode(self.src, self.lo + at, self.hi, self.owner)
        tail.children = self.children
        self.children = {self.src[self.lo + at]: tail}
        self.hi = self.lo + at


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """Result of a lookup: ``length`` leading tokens (tokens) are shared with the
    earlier request ``owner`` (the most recent one sharing that many; None when
    ``length`` is 0)."""

    length: int
    owner: Hashable | None


class PrefixIndex:
    """Radix tree over token-id sequences with the owner of every path.

    Memory holds a reference to each inserted sequence (edges are slices into them,
    never copies). A lookup or insert costs O(n) token comparisons, done as tuple
    slice comparisons in C plus a binary search at the one mismatching edge.
    """

    def __init__(self) -> None:
        self._root = _OwnerNode((), 0, 0, None)
        self.requests = 0
        self.tokens = 0

    def _walk(self, ids: Sequence[int]) -> tuple[list[_OwnerNode], int, int]:
        """Follow ``ids``: the nodes whose edge was entered, matched length, and how
        far into the last node's edge the match got."""
        node, i, n, path, used = self._root, 0, len(ids), [], 0
        while i < n:
            child = node.children.get(ids[i])
            if child is None:
                break
            span = min(child.hi - child.lo, n - i)
            used = common_prefix_len(ids, child.src, i, child.lo, span)
            path.append(child)
            i += used
            if used < child.hi - child.lo:
                break
            node = child
        return path, i, used

    def match(self, ids: Sequence[int]) -> PrefixMatch:
        """Longest prefix of ``ids`` shared with any inserted sequence (read-only)."""
        path, length, _ = self._walk(ids)
        return PrefixMatch(length, path[-1].owner if path and length else None)

    def insert(self, ids: Sequence[int], owner: Hashable) -> PrefixMatch:
        """Look ``ids`` up, then add it under ``owner``; returns the match found
        *before* insertion (so a request never matches itself)."""
        path, length, used = self._walk(ids)
        found = PrefixMatch(length, path[-1].owner if path and length else None)
        if path and used < path[-1].hi - path[-1].lo:
            path[-1].split(used)  # cut at the mismatch, or where ``ids`` ends
        for node in path:
            node.owner = owner
        if length < len(ids):
            parent = path[-1] if path else self._root
            parent.children[ids[length]] = _OwnerNode(ids, length, len(ids), owner)
        self.requests += 1
        self.tokens += len(ids)
        return found
