"""Prefix-sharing compact sequences: how the simulator keeps every request's token ids and block chains.

A session's requests mostly repeat the previous prompt and append to it. :class:`Shared`
keeps a request's ids as (the earlier sequence it extends, how many leading ids of it
it keeps, a compact array of the rest), so the ids held for a whole log are about its
distinct ids, at 4 bytes each (``array('I')``; ``'q'`` / ``'Q'`` when an id needs 64 bits, a
tuple beyond that) instead of 8 bytes of tuple slot per id per request. Block chains
(:meth:`Shared.blocks`) share the same way: a request's chain reuses the blocks its
kept prefix covers and hashes only the rest.

Reading is by materializing (:meth:`Shared.ids`: the ids as one flat array, O(n));
the last few materialized sequences are memoized (first in, first out), so indexing in
a loop stays O(1).
A :class:`Shared` is a ``Sequence[int]`` and compares equal to any sequence of the same ids.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Iterator

import numpy as np

from prefixcache.analyzer.sequence import common_prefix_len

#: Array kinds tried in order for ids: unsigned 32-bit, signed 64-bit, unsigned 64-bit.
_KINDS = ("I", "q", "Q")
#: How many materialized sequences stay memoized (most recently read first out last).
_MEMO_SIZE = 8
_memo: OrderedDict[int, tuple["Shared", Sequence[int]]] = OrderedDict()
#: Longest chain of bases a sequence may have: past it the next one is stored flat, so reading
#: stays O(n) (a flat copy every this many requests of a session costs 1/this of a flat store).
MAX_DEPTH = 16
_recent: list = [(None, None)]  # the last (sequence, ids) read, one tuple (read atomically): the fast path of indexing loops


def compact(values: Sequence[int]) -> Sequence[int]:
    """``values`` in the narrowest array kind that holds them (a tuple when none does)."""
    if isinstance(values, array) and values.typecode in _KINDS:
        return values
    if isinstance(values, np.ndarray):
        values = values.tolist()
    for kind in _KINDS:
        try:
            return array(kind, values)
        except (OverflowError, TypeError):
            continue
    return tuple(values)


def _join(parts: list[Sequence[int]]) -> Sequence[int]:
    """Concatenate pieces (first to last) into one flat sequence of the widest kind among them."""
    kinds = {p.typecode if isinstance(p, array) else None for p in parts if len(p)}
    if not kinds:
        return array(_KINDS[0])
    if len(kinds) == 1 and None not in kinds:
        out = array(kinds.pop())
        for p in parts:
            out.extend(p)
        return out
    try:
        return compact([v for p in parts for v in p])
    except TypeError:
        return tuple(v for p in parts for v in p)


class Shared(Sequence):
    """``base[:keep] + tail``: an id sequence extending an earlier one (see the module docstring).

    ``base``: the :class:`Shared` it extends (None: ``keep`` is 0); ``keep`` ≤ ``len(base)``;
    ``tail``: the ids after them, compact. Build with :meth:`of`.
    """

    __slots__ = ("base", "keep", "tail", "depth", "_n", "_blocks")

    def __init__(self, base: "Shared | None", keep: int, tail: Sequence[int]) -> None:
        self.base = base if keep else None
        self.keep = keep if self.base is not None else 0
        self.tail = tail
        self.depth = self.base.depth + 1 if self.base is not None else 0
        self._n = self.keep + len(tail)
        self._blocks: dict | None = None

    @classmethod
    def of(cls, values: Sequence[int], base: "Shared | None" = None) -> "Shared":
        """``values`` kept as the ids they share with ``base`` (leading) plus a compact rest."""
        if isinstance(values, Shared):
            return values
        values = compact(values)
        k = 0
        if base is not None and len(base) and len(values) and base.depth < MAX_DEPTH:
            old = base.ids()
            if isinstance(old, array) != isinstance(values, array):  # slice compares need one type
                old, values = tuple(old), tuple(values)
            k = common_prefix_len(old, values)
        return cls(base, k, compact(values[k:]) if k else values)

    def __len__(self) -> int:
        return self._n

    def ids(self) -> Sequence[int]:
        """The ids as one flat array (or tuple), memoized for the last few sequences read."""
        got = _recent[0]
        if got[0] is self:
            return got[1]
        got = _memo.get(id(self))
        if got is not None and got[0] is self:
            _recent[0] = got
            return got[1]
        parts, node, upto = [], self, self._n
        while node is not None:
            if upto > node.keep:
                parts.append(node.tail[:upto - node.keep] if upto - node.keep < len(node.tail) else node.tail)
                upto = node.keep
            node = node.base
        flat = parts[0] if len(parts) == 1 else _join(parts[::-1])
        _memo[id(self)] = _recent[0] = (self, flat)
        while len(_memo) > _MEMO_SIZE:
            try:
                _memo.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break
        return flat

    def __getitem__(self, i):  # type: ignore[override]
        return self.ids()[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shared):
            if other is self:
                return True
            other = other.ids()
        if not isinstance(other, Sequence) or isinstance(other, str) or len(other) != self._n:
            return False
        mine = self.ids()
        if type(mine) is type(other) and (not isinstance(other, array) or other.typecode == mine.typecode):
            return mine == other
        return tuple(mine) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self.ids()))

    def __repr__(self) -> str:
        return f"Shared({tuple(self.ids())!r})"

    def blocks(self, block_size: int, key: object, hasher) -> "Shared":
        """This sequence's chain of full-block hashes under ``key`` (block size, namespace),
        kept: ``hasher(ids, parent)`` hashes ids continuing from ``parent`` (None: the
        chain's start). The blocks inside the kept prefix are the base's own; only the
        rest is hashed. Computed for the oldest base lacking it first (no recursion)."""
        todo, node = [], self
        while node is not None and (node._blocks is None or key not in node._blocks):
            todo.append(node)
            node = node.base
        for node in reversed(todo):
            keep_blocks = node.keep // block_size if node.base is not None else 0
            if keep_blocks:
                prev = node.base._blocks[key]  # type: ignore[union-attr]
                parent = int(prev.ids()[keep_blocks - 1])
                rest = node.ids()[keep_blocks * block_size:]
                chain = Shared(prev, keep_blocks, compact(hasher(rest, parent)))
            else:
                chain = Shared(None, 0, compact(hasher(node.ids(), None)))
            if node._blocks is None:
                node._blocks = {}
            node._blocks[key] = chain
        return self._blocks[key]  # type: ignore[index]


def int64_bytes(ids: Sequence[int]) -> memoryview:
    """``ids`` as little-endian-native int64 bytes (what block hashes are taken over);
    OverflowError for an id outside int64."""
    if isinstance(ids, Shared):
        ids = ids.ids()
    if isinstance(ids, array) and ids.typecode == "q":
        return memoryview(ids).cast("B")
    if isinstance(ids, array) and ids.typecode == "I":
        return memoryview(np.frombuffer(ids, dtype=np.uint32).astype(np.int64)).cast("B")
    return memoryview(array("q", ids)).cast("B")
