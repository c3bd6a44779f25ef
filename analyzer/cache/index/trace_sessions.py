"""Block-hash traces: sessions inferred from hash chains, and where a request stops
extending its predecessor. One implementation for lint (PC002,
:mod:`prefixcache.analyzer.lint.engine`) and simulate (the ``drift`` cause of a trace
request, :func:`prefixcache.analyzer.cache.simulate.simulator.baseline`).

Traces (Mooncake, Bailian, kv-cache-tester) carry no text, only prefix-chained block
ids: equal id at position ``k`` means equal tokens up to the end of block ``k``. So a
request ``r`` extends its predecessor ``q`` exactly when ``q``'s ids are a prefix of
``r``'s, and otherwise the first differing block ``k`` is the divergence, at token
``k·B`` (``B`` the trace's block size, tokens).

* **Sessions.** Readers that know sessions (Bailian chat chains, kv-cache-tester
  conversations and subagents) keep theirs. Mooncake records carry none, so lint
  and simulate infer them (:class:`TraceSessions`): a request continues the session whose latest
  request shares the most leading blocks with it (at least the first block; ties go to
  the most recent session); a request sharing no first block with any session's latest
  request opens a new session ``<file stem>/s<n>``.
* **Tail.** When only ``q``'s last block differs and that block is partial
  (``len(q.ids)·B > q.input_length``: the block was still filling up when ``q`` was
  sent), nothing a block cache could have kept was lost: ``r`` counts as extending ``q``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from prefixcache.analyzer.model import BlockTrace
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.sequence import common_prefix_len

#: Trace formats whose records carry no session: lint infers sessions from hash chains.
SESSIONLESS_FORMATS = frozenset({"mooncake"})
#: How many of the most recent sessions sharing a first block are compared (bounds the work).
CANDIDATES = 64


@dataclass(frozen=True, slots=True)
class TraceBreak:
    """Where trace request ``r`` stops extending its predecessor ``q``: the first
    differing ``block`` (0-based) and its first ``token`` (``block·B``); ``tail`` is True
    when only ``q``'s last block differs (a full block: the end of ``q``'s prompt, e.g.
    its generation prompt, was replaced)."""

    block: int
    token: int
    tail: bool


def trace_break(r: BlockTrace, q: BlockTrace) -> TraceBreak | None:
    """The divergence of ``r`` from ``q`` (None when ``r`` extends ``q`` at block
    resolution, including a changed partial last block of ``q``)."""
    return chain_break(r.hash_ids, q.hash_ids, q.input_length, q.block_size)


def chain_break(ids: Sequence[int], prev: Sequence[int], prev_tokens: int, block_size: int) -> TraceBreak | None:
    """:func:`trace_break` on bare chains: ``ids`` against the previous request's ``prev``
    (``prev_tokens`` prompt tokens, ``block_size`` tokens a block)."""
    k = common_prefix_len(ids, prev)
    if k >= len(prev):
        return None
    last = k == len(prev) - 1
    if last and len(prev) * block_size > prev_tokens:
        return None  # the previous request's partial last block: no block cache keeps it
    return TraceBreak(k, k * block_size, last)


def _flat(ids: Sequence[int]) -> Sequence[int]:
    """A :class:`~.compact.Shared` chain read flat (indexing it stays O(1)); others as they are."""
    return ids.ids() if isinstance(ids, Shared) else ids


class TraceSessions:
    """Sessions of a sessionless trace, inferred from hash chains (see the module doc).

    :meth:`assign` names the session and index of each request in arrival order and
    returns the session's previous request. Memory: one hash-id tuple per session."""

    def __init__(self) -> None:
        self._latest: list[tuple[int, ...]] = []
        self._names: list[str] = []
        self._counts: list[int] = []
        self._by_first: dict[int, list[int]] = {}

    def assign(self, ids: tuple[int, ...], stem: str) -> tuple[str, int]:
        """(session, index) of the next request, of hash chain ``ids`` and reader session
        ``stem`` (the file stem: a new session is ``<stem>/s<n>``); updates the session's
        latest request."""
        s = self._best(ids)
        if s is None:
            s = len(self._latest)
            self._latest.append(ids)
            self._names.append(f"{stem}/s{s + 1}")
            self._counts.append(0)
            if ids:
                self._by_first.setdefault(ids[0], []).append(s)
        else:
            self._latest[s] = ids
            peers = self._by_first[ids[0]]
            peers.remove(s)
            peers.append(s)  # most recent last
        index = self._counts[s]
        self._counts[s] += 1
        return self._names[s], index

    def _best(self, ids: tuple[int, ...]) -> int | None:
        if not ids:
            return None
        best, most = None, 0
        ids = _flat(ids)
        for s in reversed(self._by_first.get(ids[0], [])[-CANDIDATES:]):
            k = common_prefix_len(ids, _flat(self._latest[s]))
            if k > most:
                best, most = s, k
        return best
