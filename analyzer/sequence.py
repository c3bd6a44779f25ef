"""Sequence helpers of the shared kernel: the one longest-common-prefix (and suffix)
function, the one arrival order every command walks requests in, and the default
KV block size (:data:`DEFAULT_BLOCK_SIZE`) that trace readers and caches share.

Both work on any sliceable sequence (``str``, tuples or lists of token ids).
Comparisons are slice compares done in C, with a binary search only inside the
one chunk that holds the mismatch, so a call costs O(n) element compares at C speed.
"""

from __future__ import annotations

import math

from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

#: vLLM's default KV block size (tokens): ``CacheConfig.block_size`` = 16. The
#: default of every block cache, lint's block-aligned figure, replay, and the
#: block size of logs that do not state one (vLLM request logs). Kept here, below
#: ingest, so trace readers use the same constant; :mod:`.cache.base` re-exports it.
DEFAULT_BLOCK_SIZE = 16

#: Below this many elements the mismatch is found by a plain scan.
_SCAN = 32


def common_prefix_len(a: Sequence, b: Sequence, a0: int = 0, b0: int = 0, n: int | None = None) -> int:
    """Number of equal leading items of ``a[a0:a0+n]`` and ``b[b0:b0+n]``.

    ``n`` defaults to the shorter remaining length. Items must compare with
    ``==``; for ``str`` the unit is characters, for id tuples tokens.
    """
    if n is None:
        n = min(len(a) - a0, len(b) - b0)
    if n <= 0:
        return 0
    if a[a0 : a0 + n] == b[b0 : b0 + n]:
        return n
    lo, hi = 0, n  # invariant: the first lo items are equal, a mismatch lies before hi
    while hi - lo > _SCAN:
        mid = (lo + hi) // 2
        if a[a0 + lo : a0 + mid] == b[b0 + lo : b0 + mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and a[a0 + lo] == b[b0 + lo]:
        lo += 1
    return lo


def common_suffix_len(a: Sequence, b: Sequence, floor: int = 0) -> int:
    """Length of the longest common suffix of ``a[floor:]`` and ``b[floor:]``."""
    n = min(len(a), len(b)) - floor
    if n <= 0:
        return 0
    if a[len(a) - n :] == b[len(b) - n :]:
        return n
    lo, hi = 0, n  # the last lo items are equal, a suffix of hi items is not
    while hi - lo > _SCAN:
        mid = (lo + hi) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid
    while lo < hi and a[len(a) - lo - 1] == b[len(b) - lo - 1]:
        lo += 1
    return lo


def arrival_order(items: Iterable[T], time: Callable[[T], float | None]) -> list[tuple[float, T]]:
    """Items in arrival order with their logical clock ``now`` (seconds).

    When every item has a logged time, items are sorted by it (stable: equal
    times keep input order) and ``now`` is that time; when any time is missing,
    input order is kept and ``now`` is the position (0, 1, 2, ...). This is the
    one order ``simulate`` and ``replay`` walk requests in, so their figures
    agree: a logical clock, never the wall clock, so two runs print the same numbers.
    """
    staged = [(time(item), pos, item) for pos, item in enumerate(items)]
    if staged and all(t is not None for t, _, _ in staged):
        staged.sort(key=lambda x: (x[0], x[1]))
        return [(float(t), item) for t, _, item in staged]
    return [(float(i), item) for i, (_, _, item) in enumerate(staged)]


class InputOrder:
    """Whether :func:`arrival_order` of the times seen so far is still their input order.

    Feed each item's logged time (seconds, or None) with :meth:`see`; :attr:`holds` is
    True while it is: a time is missing (then input order is the order), or no time
    went below an earlier one (a stable sort would keep every item in place). Streams
    (lint's :func:`~prefixcache.analyzer.lint.order.arrival_stream`, simulate's request
    staging) use it to know whether what they consumed in input order was the arrival
    order, without holding the items."""

    __slots__ = ("missing", "backwards", "latest")

    def __init__(self) -> None:
        self.missing = False
        self.backwards = False
        self.latest = -math.inf

    def see(self, t: float | None) -> bool:
        """Record one more item's time; returns :attr:`holds` after it."""
        if t is None:
            self.missing = True
        elif t < self.latest:
            self.backwards = True
        else:
            self.latest = float(t)
        return self.holds

    @property
    def holds(self) -> bool:
        """True while the arrival order of the items seen is their input order."""
        return self.missing or not self.backwards
