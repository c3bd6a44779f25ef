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
  request shares the most leading blocks with it *beyond the common head* (ties go to
  the most recent session); a request sharing nothing beyond the head with any session's
  latest request opens a new session ``<file stem>/s<n>`` (a new conversation: cold, never
  drift). The **common head** is what every conversation of a service starts with (a
  shared system prompt): the leading blocks held by more than half of the requests seen so
  far, up to the last of them after which requests branch into different next blocks. A
  block that only one conversation ever continued is not a head, so a single
  conversation stays one session. Measured on the Mooncake conversation trace (every
  request starts with block 0), the first 6,000 requests: 3,852 sessions and 3.29 M drift
  tokens, against 1 session and 19.5 M when block 0 alone joined them (a two-pass
  reference that knows the head from the whole file: 3,853 and 3.3 M; see
  ``tests/analyzer/cache/index/test_trace_sessions.py``).
* **Tail.** When only ``q``'s last block differs and that block is partial
  (``len(q.ids)·B > q.input_length``: the block was still filling up when ``q`` was
  sent), nothing a block cache could have kept was lost: ``r`` counts as extending ``q``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Sequence

from prefixcache.analyzer.model import BlockTrace
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.sequence import common_prefix_len

#: Trace formats whose records carry no session: lint infers sessions from hash chains. Server
#: request logs (vLLM, SGLang) hold many tenants' unrelated requests in one file.
SESSIONLESS_FORMATS = frozenset({"mooncake", "vllm-log", "sglang-log"})
#: How many of the most recent sessions sharing the first block beyond the head are compared (bounds the work).
CANDIDATES = 64
#: Leading tokens that can form the common head (a shared system prompt), and the bounds on how
#: many leading blocks that is: 16 blocks of Mooncake's 512 tokens, 128 of vLLM's 16.
HEAD_TOKENS, MIN_DEPTH, MAX_DEPTH = 8192, 16, 128
#: Every this many requests, leading blocks held by under 1/16 of the requests are forgotten
#: (they cannot be a head soon): the counts stay bounded on long logs.
PRUNE_EVERY = 4096


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


def _depth(block_size: int) -> int:
    """Leading blocks of ``block_size`` tokens that can form the common head."""
    return max(MIN_DEPTH, min(MAX_DEPTH, HEAD_TOKENS // max(block_size, 1)))


class TraceSessions:
    """Sessions of a sessionless trace, inferred from hash chains (see the module doc).

    :meth:`assign` names the session and index of each request in arrival order.
    ``block_size`` (tokens) sets how many leading blocks are looked at (:data:`HEAD_TOKENS`).
    Memory: one hash-id tuple per session, and for the first :attr:`depth` blocks of each
    session's latest request an index entry; counts of leading blocks are pruned every
    :data:`PRUNE_EVERY` requests."""

    def __init__(self, block_size: int | None = None) -> None:
        self.depth = _depth(block_size or 512)
        self._sized = block_size is not None
        self._latest: list[tuple[int, ...]] = []
        self._names: list[str] = []
        self._counts: list[int] = []
        self._seen = 0  # requests assigned so far
        #: (position, block) -> requests holding it / its first next block / True once it branched.
        self._holders: dict[tuple[int, int], int] = {}
        self._child: dict[tuple[int, int], int] = {}
        self._branches: set[tuple[int, int]] = set()
        #: Per position, block -> the sessions whose latest request holds it there, most recent last:
        #: the session number when it is one (most blocks beyond the head belong to one session),
        #: else an insertion-ordered dict used as a set (moving a session to the end is O(1)).
        #: A block no latest request holds any more is dropped.
        self._by_block: list[dict[int, int | dict[int, None]]] = [{} for _ in range(MAX_DEPTH)]

    def head(self, ids: Sequence[int]) -> int:
        """Blocks of ``ids`` that are the common head (see the module doc), from what was seen
        before this request: leading blocks each held by more than half of the requests, up
        to the last one that has branched into two different next blocks (0 when none)."""
        h = 0
        for p in range(min(len(ids), self.depth)):
            key = (p, ids[p])
            if 2 * self._holders.get(key, 0) <= self._seen:
                break
            if key in self._branches:
                h = p + 1
        return h

    def assign(self, ids: tuple[int, ...], stem: str, block_size: int | None = None) -> tuple[str, int]:
        """(session, index) of the next request, of hash chain ``ids`` (blocks of ``block_size``
        tokens: the first request's sets :attr:`depth` when the constructor was given none) and
        reader session ``stem`` (the file stem: a new session is ``<stem>/s<n>``); updates the
        session's latest request."""
        if not self._sized and block_size:
            self.depth, self._sized = _depth(block_size), True
        flat = _flat(ids)
        s = self._best(flat)
        if s is None:
            s = len(self._latest)
            self._latest.append(ids)
            self._names.append(f"{stem}/s{s + 1}")
            self._counts.append(0)
            self._index(s, (), flat)
        else:
            self._index(s, _flat(self._latest[s]), flat)
            self._latest[s] = ids
        self._learn(flat)
        index = self._counts[s]
        self._counts[s] += 1
        return self._names[s], index

    def _learn(self, ids: Sequence[int]) -> None:
        """Count the leading blocks of ``ids`` and note which of them branch."""
        self._seen += 1
        if self._seen % PRUNE_EVERY == 0:
            rare = [k for k, n in self._holders.items() if 16 * n < self._seen]
            for k in rare:
                del self._holders[k]
                self._child.pop(k, None)
                self._branches.discard(k)
        depth = min(len(ids), self.depth)
        for p in range(depth):
            key = (p, ids[p])
            self._holders[key] = self._holders.get(key, 0) + 1
            if p + 1 < len(ids):
                child = self._child.setdefault(key, ids[p + 1])
                if child != ids[p + 1]:
                    self._branches.add(key)

    def _index(self, s: int, old: Sequence[int], new: Sequence[int]) -> None:
        """Move session ``s`` in the block index from its old latest chain to the new one."""
        by = self._by_block
        n = len(new)
        for p in range(min(len(old), self.depth)):
            if p >= n or new[p] != old[p]:
                at, b = by[p], old[p]
                peers = at.get(b)
                if peers is None:
                    continue
                if type(peers) is int:
                    if peers == s:
                        del at[b]
                    continue
                peers.pop(s, None)
                if len(peers) == 1:
                    at[b] = next(iter(peers))
        for p in range(min(n, self.depth)):
            at, b = by[p], new[p]
            peers = at.get(b)
            if peers is None:
                at[b] = s
            elif type(peers) is int:
                if peers != s:
                    at[b] = {peers: None, s: None}  # most recent last
            else:
                peers.pop(s, None)
                peers[s] = None

    def _best(self, ids: Sequence[int]) -> int | None:
        if not ids:
            return None
        h = self.head(ids)
        if h >= len(ids):
            return None  # nothing beyond the common head: a new conversation
        at = min(h, self.depth - 1)
        peers = self._by_block[at].get(ids[at])
        if peers is None:
            return None
        best, most = None, h
        for s in (peers,) if type(peers) is int else islice(reversed(peers), CANDIDATES):
            k = common_prefix_len(ids, _flat(self._latest[s]))
            if k > most:
                best, most = s, k
        return best


@dataclass(frozen=True, slots=True)
class TraceDrift:
    """What the simulator's baseline and lint's PC002 need of a sessionless block trace, per request
    in arrival order (int64 arrays, tokens): ``lcp``, the leading tokens whose block ids some earlier
    request held (:func:`~prefixcache.analyzer.cache.simulate.simulator.baseline`); ``overlap``, the
    drift extent — the previous request's length, capped at this one's, when this request breaks the
    chain of the previous request of its inferred session (:class:`TraceSessions`,
    :func:`chain_break`), else 0; ``lost``, lint's PC002 loss — ``overlap`` minus the prefix shared
    with any earlier request (the chain index's match, :class:`~.chains.ChainIndex`), at least 0;
    ``distinct``, the distinct block ids."""

    lcp: object
    overlap: object
    lost: object
    distinct: int


def trace_drift(offsets, ids, tokens, block_size: int, stem: str) -> TraceDrift:
    """:class:`TraceDrift` of a sessionless block trace in arrival order: request ``i`` holds
    ``ids[offsets[i]:offsets[i+1]]`` (int64) and ``tokens[i]`` prompt tokens; blocks of ``block_size``
    tokens; ``stem`` names its sessions. One pass, the compiled one (``_kernels.trace_drift``) unless
    :func:`~.kernels.compiled` is False; both give what lint's drift pass
    (:meth:`~prefixcache.analyzer.lint.engine.Linter.feed`) and :func:`baseline` give for the same
    requests."""
    import numpy as np

    from prefixcache.analyzer.cache.index.kernels import i64, native

    n = len(tokens)
    lib = native()
    if lib is not None and hasattr(lib, "trace_drift"):
        out = np.zeros((3, n), dtype=np.int64)
        distinct = lib.trace_drift(i64(offsets), i64(ids), i64(tokens), int(block_size), out[0], out[1], out[2])
        return TraceDrift(out[0], out[1], out[2], int(distinct))
    return _trace_drift_py(offsets, ids, tokens, block_size, stem)


def _trace_drift_py(offsets, ids, tokens, block_size: int, stem: str) -> TraceDrift:
    """The pure twin of :func:`trace_drift`: the classes lint and the baseline use, one request at a time."""
    import numpy as np

    from prefixcache.analyzer.cache.index.chains import ChainIndex
    from prefixcache.analyzer.model import compact_ids

    n = len(tokens)
    lcp, overlap, lost = (np.zeros(n, dtype=np.int64) for _ in range(3))
    sessions, index, seen = TraceSessions(), ChainIndex(), set()
    last: dict[str, tuple] = {}
    off, toks, flat = offsets.tolist(), tokens.tolist(), ids.tolist()
    B = block_size
    for i in range(n):
        chain = compact_ids(flat[off[i]:off[i + 1]])
        t = toks[i]
        k = 0
        while k < len(chain) and chain[k] in seen:
            k += 1
        seen.update(chain)
        lcp[i] = min(t, k * B)
        name = sessions.assign(chain, stem, B)[0]
        shared = min(index.insert(chain, i)[0] * B, t)
        prev = last.get(name)
        last[name] = (chain, t)
        if prev is not None and chain_break(chain, prev[0], prev[1], B) is not None:
            overlap[i] = min(t, prev[1])
            lost[i] = max(0, overlap[i] - shared)
    return TraceDrift(lcp, overlap, lost, len(seen))
