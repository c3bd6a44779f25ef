"""A compact prefix index over block-hash chains (lint on traces: Mooncake, Bailian, kv-cache-tester).

Lint asks one thing of the index for a trace request: the longest prefix of its hash
chain shared with ANY earlier request, and the most recent earlier request sharing that
many blocks (:class:`~prefixcache.analyzer.cache.index.radix.PrefixMatch`, exactly what
:class:`~prefixcache.analyzer.cache.index.radix.PrefixIndex` answers). :class:`ChainIndex`
answers it with the same radix tree (one node per run of blocks no two requests split),
laid out in flat arrays instead of one Python object per node:

* every node's edge is a slice of one array of all the ids inserted (4 bytes a new
  block, 8 once an id does not fit 32 bits); per node its start, length, parent and
  owner (24 bytes);
* children are found by their first id in ONE table for the whole tree, ``id → node``
  (:class:`IdTable`, two flat arrays):
  in a prefix-chained trace an id has one parent (equal id ⇒ equal prefix), so the
  id alone names the edge. The parent is checked on every lookup; an id met again
  under another parent (a trace that is not chained) goes to a second dict keyed by
  ``(parent, id)``, so the answers are exact for any input;
* owners are ints (the caller's request numbers).

About 60 bytes a request plus 4 a new block, against ~450 for a radix leaf object.
"""

from __future__ import annotations

from array import array
from typing import Sequence

from prefixcache.analyzer.sequence import common_prefix_len


#: Fibonacci hashing (Knuth, TAOCP 6.4): the top bits of ``key · ⌊2⁶⁴/φ⌋ mod 2⁶⁴`` pick the slot.
_GOLDEN, _M64 = 0x9E3779B97F4A7C15, (1 << 64) - 1


class IdTable:
    """A hash table from int ids (any 64-bit signed value) to node numbers (ints ≥ 0), in two
    flat arrays: open addressing, linear probing, at most half full, so 24–48 bytes an
    entry (a dict of ints takes about 100). No deletion: a key's value is overwritten."""

    __slots__ = ("_keys", "_vals", "_bits", "_used")

    def __init__(self, bits: int = 10) -> None:
        self._keys, self._vals = array("q", [0]) * (1 << bits), array("i", [-1]) * (1 << bits)
        self._bits, self._used = bits, 0

    def __len__(self) -> int:
        return self._used

    def _slot(self, key: int) -> int:
        mask, keys, vals = (1 << self._bits) - 1, self._keys, self._vals
        i = ((key * _GOLDEN) & _M64) >> (64 - self._bits)
        while vals[i] >= 0 and keys[i] != key:
            i = (i + 1) & mask
        return i

    def get(self, key: int) -> int | None:
        """The value of ``key``, None when absent."""
        v = self._vals[self._slot(key)]
        return None if v < 0 else v

    def __contains__(self, key: int) -> bool:
        return self._vals[self._slot(key)] >= 0

    def __setitem__(self, key: int, value: int) -> None:
        i = self._slot(key)
        if self._vals[i] < 0:
            self._keys[i] = key
            self._used += 1
        self._vals[i] = value
        if 2 * self._used > 1 << self._bits:
            self._grow()

    def _grow(self) -> None:
        keys, vals = self._keys, self._vals
        self._bits += 1
        self._keys, self._vals = array("q", [0]) * (1 << self._bits), array("i", [-1]) * (1 << self._bits)
        for k, v in zip(keys, vals):
            if v >= 0:
                i = self._slot(k)
                self._keys[i], self._vals[i] = k, v


class ChainIndex:
    """Longest shared prefix of id chains, with owners (see the module doc).

    :meth:`insert` returns ``(length, owner)`` as found *before* inserting ``ids`` under
    ``owner`` (an int ≥ 0): ``length`` leading ids shared with an earlier chain, and the
    owner of the most recent chain sharing that many (None when ``length`` is 0)."""

    __slots__ = ("_ids", "_start", "_len", "_parent", "_owner", "_first", "_other")

    def __init__(self) -> None:
        self._ids = array("I")  # widened to "q" when an id does not fit 32 bits unsigned
        self._start, self._len = array("q", [0]), array("I", [0])  # node 0: the root
        self._parent, self._owner = array("i", [-1]), array("q", [-1])
        self._first = IdTable()
        self._other: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        """Nodes, the root included."""
        return len(self._start)

    def _child(self, node: int, first: int) -> int | None:
        c = self._first.get(first)
        if c is not None and self._parent[c] == node:
            return c
        return self._other.get((node, first)) if self._other else None

    def _link(self, node: int, first: int, child: int) -> None:
        """Make ``child`` the child of ``node`` whose edge starts with ``first``."""
        if first not in self._first:
            self._first[first] = child
        else:  # the id already starts an edge under another parent: the trace is not chained here
            self._other[(node, first)] = child

    def _new(self, start: int, length: int, parent: int, owner: int) -> int:
        self._start.append(start)
        self._len.append(length)
        self._parent.append(parent)
        self._owner.append(owner)
        return len(self._start) - 1

    def _split(self, child: int, k: int) -> int:
        """Cut ``child``'s edge after ``k`` ids; returns the new upper node (the child's owner)."""
        parent, start = self._parent[child], self._start[child]
        upper = self._new(start, k, parent, self._owner[child])
        first = self._ids[start]
        if self._first.get(first) == child:
            self._first[first] = upper
        else:
            self._other[(parent, first)] = upper
        self._start[child] += k
        self._len[child] -= k
        self._parent[child] = upper
        self._link(upper, self._ids[start + k], child)
        return upper

    def _extend(self, tail: Sequence[int]) -> None:
        """Append ``tail`` to the id store (4 bytes an id; 8 once one does not fit)."""
        if isinstance(tail, array) and tail.typecode == self._ids.typecode:
            self._ids.extend(tail)
            return
        end = len(self._ids)
        try:
            self._ids.extend(list(tail))
        except OverflowError:  # extend stops at the first id that does not fit: drop what it added
            del self._ids[end:]
            self._ids = array("q", self._ids)
            self._ids.extend(list(tail))

    def insert(self, ids: Sequence[int], owner: int) -> tuple[int, int | None]:
        """Look ``ids`` up, then add it under ``owner``; returns ``(length, owner)`` found before."""
        n, node, off, path, used = len(ids), 0, 0, [], 0
        while off < n:
            child = self._child(node, ids[off])
            if child is None:
                break
            edge, start = self._len[child], self._start[child]
            k = common_prefix_len(ids, self._ids, off, start, min(edge, n - off))
            path.append(child)
            off, used = off + k, k
            if k < edge:
                break
            node = child
        found = (off, self._owner[path[-1]]) if path else (0, None)
        if path and used < self._len[path[-1]]:
            path[-1] = self._split(path[-1], used)
        for c in path:
            self._owner[c] = owner
        if off < n:
            parent = path[-1] if path else 0
            leaf = self._new(len(self._ids), n - off, parent, owner)
            self._extend(ids[off:])
            self._link(parent, ids[off], leaf)
        return found
