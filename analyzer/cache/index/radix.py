"""The one radix tree over token sequences: lint's prefix index, ``reuse``, the
simulator's ideal baseline and the SGLang cache model.

:class:`RadixTree` has SGLang's semantics (SGLang 0.5.23 ``srt/mem_cache/radix_cache.py``,
``evict_policy.py``):

* Keys are token ids; a child is keyed by its first token, or by its first block (a
  tuple) when ``block_size`` (SGLang's ``page_size``) is above 1. Matches and inserts
  are block-aligned; a partial last block is never inserted.
* :meth:`~RadixTree.match` is capped at ``n − 1`` tokens (``Req._compute_max_prefix_len``)
  unless ``cap_last_token`` is False; the cap is :func:`~.base.servable_tokens`.
* An insert ending inside a node, or diverging inside it, splits it (``_split_node``);
  the unmatched remainder becomes a new leaf; reused nodes get ``hit_count`` + 1 and
  their last access refreshed.
* With ``capacity_tokens``, eviction frees whole **leaves** not on the path of the
  request being inserted, lowest :data:`~.eviction.ORDERS` key first (``lru``,
  ``lfu``, ``fifo``, ``slru``, ``mru``; ties by node creation, then id), pushing a
  parent once it becomes a childless leaf, until enough tokens are freed
  (``RadixCache.evict``: it skips nodes with ``lock_ref > 0``).
* :meth:`~RadixTree.serve` is one request's life in SGLang's scheduler: ``match_prefix``
  (capped, splitting the node where the match ends, refreshing the matched path), the
  matched path locked (``inc_lock_ref``) while the uncached tokens are allocated —
  evicting unlocked leaves when they would not fit (``alloc`` failing →
  ``tree_cache.evict(num_tokens)``) — then ``cache_finished_req`` inserts the prompt and
  unlocks. A request larger than the whole pool (SGLang would refuse it) still runs;
  its tail is then trimmed back to capacity, nothing locked.
* Optional owner tracking: ``insert(..., owner=x)`` records ``x`` as the owner of
  every node on the inserted path, so a node's owner is the most recent request
  whose prompt covers its whole edge; :meth:`~RadixTree.longest` returns the longest
  stored prefix and its owner (what lint reports as ``shared_with``).

Memory: a new leaf's edge is a compact copy of the tokens it adds (an ``array('I')``,
4 bytes per token; ``'q'`` once an id does not fit 32 bits, tuples once one does not
fit 64), never a reference to the whole inserted sequence — or, for a
:class:`~.compact.Shared` prompt whose new part lies in its tail, that tail itself
(shared, no copy); a split shares its child's storage. So the tree holds each
distinct token once. Parent links are broken when the tree is freed, so its nodes
go with it (no wait for the cyclic garbage collector). A lookup or insert costs O(n)
token comparisons: array slice compares in C (:func:`~prefixcache.analyzer.sequence.common_prefix_len`)
with a binary search only on the one mismatching edge. ``now`` is the logical clock.
"""

from __future__ import annotations

import heapq
from array import array
from dataclasses import dataclass
from typing import Hashable, Iterator, Sequence

import numpy as np

from prefixcache.analyzer.cache.base import (
    BlockHash, EvictResult, InsertResult, MatchResult, floor_blocks, hit_cap_tokens,
)
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.cache.index.eviction import ORDERS
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.sequence import common_prefix_len

#: Eviction policies the radix tree supports (SGLang ``evict_policy.py``).
RADIX_POLICIES = tuple(ORDERS)


class _Node:
    """A tree node: the edge into it is ``src[lo:hi]``; usage figures for eviction;
    ``owner`` of the most recent insert that covered the whole edge."""

    __slots__ = ("src", "lo", "hi", "children", "parent", "owner", "last", "created", "hits", "id")

    def __init__(self, src: Sequence[int], lo: int, hi: int, parent: "_Node | None", now: float, nid: int,
                 owner: Hashable | None = None) -> None:
        self.src, self.lo, self.hi = src, lo, hi
        self.children: dict = {}
        self.parent = parent
        self.owner = owner
        self.last = now
        self.created = self.id = nid
        self.hits = 0

    @property
    def key(self) -> Sequence[int]:
        """The edge's tokens (a slice: a copy, for inspection only)."""
        return self.src[self.lo:self.hi]


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """A lookup with owners: ``length`` leading tokens are shared with the earlier
    insert ``owner`` (the most recent one sharing that many; None when ``length`` is 0
    or the covering insert gave no owner)."""

    length: int
    owner: Hashable | None


#: Storage kinds of a tree's edges, narrowest first (slice compares need one kind per tree).
_KINDS = ("I", "q", tuple)


def _as_kind(tokens: Sequence[int], kind) -> Sequence[int]:
    """``tokens`` in storage ``kind`` (a copy unless already of it); OverflowError if an id does not fit."""
    if kind is tuple:
        return tokens if isinstance(tokens, tuple) else tuple(tokens)
    if isinstance(tokens, Shared):
        tokens = tokens.ids()
    if isinstance(tokens, array) and tokens.typecode == kind:
        return tokens
    if isinstance(tokens, array) and tokens.typecode == "I" and kind == "q":  # widening: numpy is ~10× faster than element iteration
        return array(kind, np.frombuffer(tokens, dtype=tokens.typecode).astype(np.int64).tobytes())
    if hasattr(tokens, "tolist"):  # numpy: element iteration would be slow
        tokens = tokens.tolist()
    return array(kind, tokens)


class RadixTree:
    """A token radix tree (implements :class:`~.base.PrefixCache`); see the module docstring.

    ``block_size``: tokens per block (SGLang's page); ``capacity_tokens``: None = unbounded; ``policy``: one of
    :data:`RADIX_POLICIES`; ``cap_last_token`` False gives the plain longest common
    prefix in :meth:`match`. ``InsertResult.inserted`` / ``evicted`` list node ids (as
    ``BlockHash``); ``EvictResult.freed_tokens`` the tokens freed. ConfigError for a
    block size < 1 or an unknown policy.
    """

    def __init__(self, block_size: int = 1, capacity_tokens: int | None = None, policy: str = "lru", *,
                 cap_last_token: bool = True) -> None:
        if block_size < 1:
            raise ConfigError(f"page size must be positive, got {block_size}")
        if policy not in ORDERS:
            raise ConfigError(f"unknown radix eviction policy {policy!r}; choose one of {', '.join(RADIX_POLICIES)}")
        self.block_size = block_size
        self.capacity_tokens = capacity_tokens
        self.policy = policy
        self.cap_last_token = cap_last_token
        self._order = ORDERS[policy]
        self._kind = _KINDS[0]
        self._ids = 0
        self.root = _Node((), 0, 0, None, 0.0, 0)
        self.size_tokens = 0

    def _frozen(self, tokens: Sequence[int]) -> Sequence[int]:
        """``tokens`` in the tree's storage kind, widening the tree (every edge converted)
        when an id does not fit it."""
        while True:
            try:
                return _as_kind(tokens, self._kind)
            except (OverflowError, TypeError):
                if self._kind is tuple:
                    raise
                self._kind = _KINDS[_KINDS.index(self._kind) + 1]
                for node in self._nodes():
                    node.src = _as_kind(node.src, self._kind)

    def _nodes(self) -> Iterator[_Node]:
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            yield n

    def _key(self, src: Sequence[int], at: int):
        return src[at] if self.block_size == 1 else tuple(src[at:at + self.block_size])

    def _walk(self, tokens: Sequence[int], limit: int) -> tuple[list[_Node], int, int]:
        """Follow ``tokens[:limit]`` (``limit`` block-aligned): the nodes entered, the
        tokens matched, and how many of them lie inside the last node's edge."""
        B = self.block_size
        node, off, path, used = self.root, 0, [], 0
        children = node.children
        while off + B <= limit:
            child = children.get(tokens[off] if B == 1 else tuple(tokens[off:off + B]))
            if child is None:
                break
            edge = child.hi - child.lo
            k = common_prefix_len(tokens, child.src, off, child.lo, min(edge, limit - off))
            if B > 1:
                k -= k % B
            if k == 0:
                break
            path.append(child)
            off += k
            used = k
            if k < edge:
                break
            children = child.children
        return path, off, used

    def match(self, tokens: Sequence[int], now: float = 0.0) -> MatchResult:
        """Cached prefix (block-aligned, ≤ n−1 with the cap); read-only: no split, no refresh."""
        tokens = self._frozen(tokens)
        path, matched, _ = self._walk(tokens, hit_cap_tokens(len(tokens), self.block_size, self.cap_last_token))
        return MatchResult(matched, tuple(BlockHash(n.id) for n in path))

    def longest(self, tokens: Sequence[int]) -> PrefixMatch:
        """Longest stored prefix of ``tokens`` with no cap (block-aligned) and its owner."""
        tokens = self._frozen(tokens)
        path, matched, _ = self._walk(tokens, floor_blocks(len(tokens), self.block_size))
        return PrefixMatch(matched, path[-1].owner if path else None)

    def longest_prefix(self, tokens: Sequence[int]) -> int:
        """Length of :meth:`longest` (tokens)."""
        return self.longest(tokens).length

    def insert(self, tokens: Sequence[int], now: float = 0.0, owner: Hashable | None = None) -> InsertResult:
        """Insert every full block of ``tokens`` (under ``owner``, when given); refresh and
        bump the reused path; evict to capacity."""
        return self._insert(self._frozen(tokens), now, owner, tokens)[1]

    def share(self, tokens: Sequence[int], owner: Hashable | None, now: float = 0.0) -> PrefixMatch:
        """:meth:`longest` as it was *before* inserting ``tokens`` under ``owner`` (so a
        request never matches itself), then the insert: one walk for both."""
        return self._insert(self._frozen(tokens), now, owner, tokens)[0]

    def _insert(self, tokens: Sequence[int], now: float, owner: Hashable | None,
                given: Sequence[int] = ()) -> tuple[PrefixMatch, InsertResult]:
        lim = floor_blocks(len(tokens), self.block_size)
        path, matched, used = self._walk(tokens, lim)
        found = PrefixMatch(matched, path[-1].owner if path else None)
        if path and used < path[-1].hi - path[-1].lo:
            path[-1] = self._split(path[-1], used)  # cut at the mismatch, or where ``tokens`` ends
        for node in path:
            node.last = now
            node.hits += 1
            if owner is not None:
                node.owner = owner
        new: tuple[BlockHash, ...] = ()
        if matched < lim:
            parent = path[-1] if path else self.root
            self._ids += 1
            src, lo = self._edge(tokens, given, matched, lim)
            leaf = _Node(src, lo, lo + lim - matched, parent, now, self._ids, owner)
            parent.children[self._key(src, lo)] = leaf
            self.size_tokens += lim - matched
            path.append(leaf)
            new = (BlockHash(leaf.id),)
        over = self._over()
        evicted = self._evict_tokens(over, frozenset(id(n) for n in path)).evicted if over else ()
        return found, InsertResult(new, evicted)

    def serve(self, tokens: Sequence[int], now: float = 0.0) -> tuple[int, InsertResult]:
        """One request through SGLang's life cycle (module docstring): ``(cached tokens,
        the insert's effect)``; ``evicted`` lists every leaf freed, allocation first."""
        given, tokens = tokens, self._frozen(tokens)
        n = len(tokens)
        path, matched, used = self._walk(tokens, hit_cap_tokens(n, self.block_size, self.cap_last_token))
        if path and used < path[-1].hi - path[-1].lo:
            path[-1] = self._split(path[-1], used)  # match_prefix splits where the match ends
        for node in path:
            node.last = now
        freed: tuple[BlockHash, ...] = ()
        if self.capacity_tokens is not None:
            need = self.size_tokens + (n - matched) - self.capacity_tokens  # alloc(n − matched) must fit
            freed = self._evict_tokens(need, frozenset(id(x) for x in path)).evicted
        ins = self._insert(tokens, now, None, given)[1]
        trimmed = self._evict_tokens(self._over(), frozenset()).evicted  # the request alone overflowed
        return matched, InsertResult(ins.inserted, freed + ins.evicted + trimmed)

    def _edge(self, tokens: Sequence[int], given: Sequence[int], lo: int, hi: int) -> tuple[Sequence[int], int]:
        """Storage of a new leaf's edge ``tokens[lo:hi]`` and where it starts in it: the tail
        array of a :class:`~.compact.Shared` prompt when the edge lies in it (shared, no copy),
        else a copy of just those tokens."""
        tail = given.tail if isinstance(given, Shared) else None
        if isinstance(tail, array) and tail.typecode == self._kind and lo >= given.keep:  # type: ignore[union-attr]
            return tail, lo - given.keep  # type: ignore[union-attr]
        return tokens[lo:hi], 0

    def __del__(self) -> None:
        """Break the parent links (child ↔ parent cycles) so the nodes are freed with the
        tree, not at the next full garbage collection."""
        if getattr(self, "root", None) is not None:  # a tree whose __init__ raised has none
            for n in self._nodes():
                n.parent = None

    def _split(self, child: _Node, k: int) -> _Node:
        """Split ``child`` after ``k`` tokens; returns the new upper node (new id, the
        child's usage and owner); the child keeps its id and the tail of the edge."""
        self._ids += 1
        upper = _Node(child.src, child.lo, child.lo + k, child.parent, child.last, self._ids, child.owner)
        upper.hits, upper.created = child.hits, child.created
        child.parent.children[self._key(child.src, child.lo)] = upper
        child.lo += k
        child.parent = upper
        upper.children[self._key(child.src, child.lo)] = child
        return upper

    def _over(self) -> int:
        if self.capacity_tokens is None:
            return 0
        return max(0, self.size_tokens - self.capacity_tokens)

    def evict(self, num_tokens: int, now: float = 0.0) -> EvictResult:
        """Free at least ``num_tokens`` tokens (fewer if the tree holds less) by deleting leaves."""
        return self._evict_tokens(num_tokens, frozenset())

    def _evict_tokens(self, num_tokens: int, locked: frozenset) -> EvictResult:
        if num_tokens <= 0:
            return EvictResult()
        order = self._order
        heap = [(*order(n.hits, n.last, n.created), n.created, n.id, n) for n in self._leaves() if id(n) not in locked]
        heapq.heapify(heap)
        freed, out = 0, []
        while freed < num_tokens and heap:
            leaf = heapq.heappop(heap)[-1]
            parent = leaf.parent
            del parent.children[self._key(leaf.src, leaf.lo)]
            freed += leaf.hi - leaf.lo
            self.size_tokens -= leaf.hi - leaf.lo
            out.append(BlockHash(leaf.id))
            if parent is not self.root and not parent.children and id(parent) not in locked:
                heapq.heappush(heap, (*order(parent.hits, parent.last, parent.created), parent.created,
                                      parent.id, parent))
        return EvictResult(tuple(out), freed)

    def depths(self) -> Iterator[tuple[int, int]]:
        """``(start, end]``: the prompt positions (tokens from the root) each edge spans."""
        stack = [(n, 0) for n in self.root.children.values()]
        while stack:
            n, start = stack.pop()
            end = start + n.hi - n.lo
            yield start, end
            stack.extend((c, end) for c in n.children.values())

    def _leaves(self) -> Iterator[_Node]:
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            if n.children:
                stack.extend(n.children.values())
            else:
                yield n


class PrefixIndex:
    """Lint's view of the tree: token granularity, unbounded, owners on every path.

    :meth:`insert` returns the match found *before* inserting (so a request never
    matches itself); ``requests`` / ``tokens`` count what was inserted. Memory and
    cost are the tree's (edges are slices of the inserted sequences; O(n) per call).
    """

    __slots__ = ("tree", "requests", "tokens")

    def __init__(self) -> None:
        self.tree = RadixTree(cap_last_token=False)
        self.requests = 0
        self.tokens = 0

    def match(self, ids: Sequence[int]) -> PrefixMatch:
        """Longest prefix of ``ids`` shared with any inserted sequence, and its owner (read-only)."""
        return self.tree.longest(ids)

    def insert(self, ids: Sequence[int], owner: Hashable) -> PrefixMatch:
        """Look ``ids`` up, then add it under ``owner``; returns the match found before."""
        self.requests += 1
        self.tokens += len(ids)
        return self.tree.share(ids, owner)
