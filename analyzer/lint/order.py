"""Arrival order without holding every request: the one order of
:func:`~prefixcache.analyzer.sequence.arrival_order`, streamed.

:func:`arrival_stream` walks a re-iterable source (an :class:`~prefixcache.analyzer.ingest.Ingest`:
each pass reads the inputs afresh) and yields ``(position, item)`` in arrival order:

* While the items come in time order (each logged time ≥ the one before), or once an
  item without a time has been seen (then input order is the order), items are yielded
  as they are read: one pass, nothing held.
* When a time goes backwards before any missing time, yielding stops there; the rest
  of the pass only records times (8 bytes an item). If a missing time turns up later,
  input order holds after all: a second pass yields the items from where the first
  stopped. Otherwise the order is the stable sort by time: :data:`RESTART` is yielded
  (the consumer drops what it built) and a second pass yields every item in that order,
  holding only the items read before their turn.
"""

from __future__ import annotations

import math
from array import array
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

from prefixcache.analyzer.sequence import InputOrder

T = TypeVar("T")

#: The position yielded (with item None) when everything yielded so far must be discarded.
RESTART = -1


def arrival_stream(items: Iterable[T], time: Callable[[T], float | None]) -> Iterator[tuple[int, T | None]]:
    """``(input position, item)`` in arrival order (see the module docstring); ``items``
    must give the same items on every iteration. Yields ``(RESTART, None)`` at most once."""
    times = array("d")
    order, stopped = InputOrder(), None
    for pos, item in enumerate(items):
        t = time(item)
        times.append(math.nan if t is None else float(t))
        if not order.see(t) and stopped is None:
            stopped = pos
        if stopped is None:
            yield pos, item
    if stopped is None:
        return
    if order.missing:  # input order after all: read on from where the first pass stopped
        yield from ((pos, item) for pos, item in enumerate(items) if pos >= stopped)
        return
    yield RESTART, None
    yield from _sorted_pass(items, np.argsort(np.frombuffer(times, dtype=np.float64), kind="stable"))


def sorted_stream(items: Iterable[T], time: Callable[[T], float | None]) -> Iterator[tuple[int, T]]:
    """``(input position, item)`` in the stable order of the items' logged times (a missing time
    sorts last), in two passes over ``items`` (which must give the same items each time): one
    records the times (8 bytes an item), the other yields, holding only the items read before
    their turn. For a consumer that already knows the times go backwards (``simulate``'s drift
    pass): :func:`arrival_stream` without its in-order first pass."""
    times = array("d", (math.nan if (t := time(item)) is None else float(t) for item in items))
    return _sorted_pass(items, np.argsort(np.frombuffer(times, dtype=np.float64), kind="stable"))


def _sorted_pass(items: Iterable[T], order: np.ndarray) -> Iterator[tuple[int, T]]:
    """Items in ``order`` (input positions), holding those read before their turn."""
    pending: dict[int, T] = {}
    nxt = 0
    for pos, item in enumerate(items):
        pending[pos] = item
        while nxt < len(order) and int(order[nxt]) in pending:
            want = int(order[nxt])
            yield want, pending.pop(want)
            nxt += 1
