"""One-pass LRU hit-ratio curve over every capacity (stack distances, Mattson et al. 1970).

LRU has the inclusion property: a cache of C blocks always holds the C most
recently used distinct blocks. So a block is cached at the start of a request
iff its *recency rank* then (distinct blocks used since its last use) is < C. A
request's prefix hit runs while every leading block is cached, so block i of a
request hits iff ``m_i = max(rank_0..rank_i) < C`` — one number per block, after
which the hits at *any* capacity are a count (``searchsorted``) over the sorted
``m``. That gives a 100-point curve for the price of one replay.

Ranks are computed offline over columnar arrays: with the request blocks flattened in the
order they are freed (``S``; vLLM frees tail-first) and ``prev[t]`` the previous
position of the same block, the rank of a block last used at ``q`` seen at
request start ``L`` is ``#{t < L : prev[t] ≤ q} − q − 1`` (distinct blocks in
``(q, L)``), a 2-D dominance count (:func:`~..index.kernels.dominance_le`): a
Fenwick-tree sweep in the compiled core, O(n log n), or its pure twin, a numpy
merge-sort tree, O(n log² n); no Python loop per block either way.

Values equal :class:`~.block_hash.BlockHashCache` with policy ``lru`` at every
capacity (tests compare them), for sequential requests without TTL.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Iterable, Sequence

import numpy as np

from prefixcache.analyzer.cache.index.kernels import dominance_le
from prefixcache.analyzer.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ChainRequest:
    """One request for the sweep: its block chain, prompt tokens and block size.

    ``max_blocks``: the most leading blocks a hit may count (vLLM's
    ⌊(n−1)/B⌋; None = all). Blocks carry ``min(B, n − i·B)`` tokens each (a
    trace's last block may be partial). ``scratch``: uncached blocks the request holds
    while it runs (vLLM's partial last block, :func:`~..models.pool_blocks`): the cache
    keeps C − scratch blocks through that request.
    """

    hashes: Sequence[int]
    num_tokens: int
    block_size: int
    max_blocks: int | None = None
    scratch: int = 0


@dataclass(frozen=True, slots=True)
class ChainColumns:
    """The block chains of a request sequence already in columns (a columnar block trace,
    :mod:`~prefixcache.analyzer.ingest.readers.trace_columns`): what a list of
    :class:`ChainRequest` gives :func:`stack_profile` and :func:`~.bounds.min_plan`, with no
    object per request. ``offsets`` (n+1) into ``ids`` (int64 block ids); per request (int64):
    ``num_tokens`` (tokens the chain covers), ``block_size``, ``max_blocks`` (the hit cap in
    blocks: the chain's length where there is none) and ``scratch``."""

    offsets: np.ndarray
    ids: np.ndarray
    num_tokens: np.ndarray
    block_size: np.ndarray
    max_blocks: np.ndarray
    scratch: np.ndarray

    def __len__(self) -> int:
        return len(self.num_tokens)

    @property
    def lens(self) -> np.ndarray:
        """Blocks per request."""
        return np.diff(self.offsets)


@dataclass(frozen=True, slots=True)
class StackProfile:
    """Per-block LRU thresholds: block j hits in an LRU cache of C blocks iff ``m[j] < C``.

    Arrays are in request-major prompt order; ``req`` is each block's request
    index, ``tokens`` its token count, ``offsets[r]:offsets[r+1]`` request r's
    blocks; ``m`` is ``INF`` (:data:`NEVER`, the int64 maximum, above any
    capacity) for blocks no capacity can hit (cold or past the cap).
    """

    m: np.ndarray
    tokens: np.ndarray
    req: np.ndarray
    offsets: np.ndarray
    unique_blocks: int
    INF: int

    def hits(self, capacity_blocks: int | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(hit blocks, hit tokens) totals at each capacity (blocks)."""
        caps = np.atleast_1d(np.asarray(capacity_blocks, dtype=np.int64))
        order = np.argsort(self.m, kind="stable")
        ms = self.m[order]
        cum_tok = np.concatenate(([0], np.cumsum(self.tokens[order])))
        k = np.searchsorted(ms, caps, side="left")
        return k, cum_tok[k]

    def ideal(self) -> tuple[int, int]:
        """(hit blocks, hit tokens) of an unbounded cache."""
        ok = self.m < self.INF
        return int(ok.sum()), int(self.tokens[ok].sum())

    def per_request(self, capacity_blocks: int) -> tuple[np.ndarray, np.ndarray]:
        """(hit blocks, hit tokens) per request at one capacity."""
        ok = self.m < capacity_blocks
        n = len(self.offsets) - 1
        blocks = np.bincount(self.req[ok], minlength=n)
        toks = np.bincount(self.req[ok], weights=self.tokens[ok], minlength=n).astype(np.int64)
        return blocks, toks


@dataclass(frozen=True, slots=True)
class Columns:
    """The blocks of a request sequence as flat arrays, request-major in prompt order: ``lens``
    and ``offsets`` (blocks per request, n+1 offsets), ``req`` (request of each block), ``tokens``
    (its tokens: ``min(B, n − i·B)``), ``capped`` (within the request's ``max_blocks``), ``flat``
    (the ids, :func:`chain_values`) and ``spos`` (its slot in the recency order of ``free_order``)."""

    lens: np.ndarray
    total: int
    offsets: np.ndarray
    req: np.ndarray
    tokens: np.ndarray
    capped: np.ndarray
    flat: np.ndarray
    spos: np.ndarray


def columns(reqs: list[ChainRequest] | ChainColumns, free_order: str) -> Columns:
    """The :class:`Columns` of ``reqs`` (no Python step per block)."""
    nreq = len(reqs)
    if isinstance(reqs, ChainColumns):
        lens = reqs.lens
        total = len(reqs.ids)
        offsets = reqs.offsets
        req = np.repeat(np.arange(nreq, dtype=np.int64), lens)
        idx = np.arange(total, dtype=np.int64) - offsets[req]
        toks = np.clip(reqs.num_tokens[req] - idx * reqs.block_size[req], 0, reqs.block_size[req])
        spos = offsets[req] + lens[req] - 1 - idx if free_order == "tail-first" else np.arange(total, dtype=np.int64)
        return Columns(lens, total, offsets, req, toks, idx < reqs.max_blocks[req], reqs.ids, spos)
    lens = np.fromiter((len(r.hashes) for r in reqs), np.int64, nreq)
    total = int(lens.sum())
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    req = np.repeat(np.arange(nreq, dtype=np.int64), lens)
    idx = np.arange(total, dtype=np.int64) - offsets[req]
    bsz = np.fromiter((r.block_size for r in reqs), np.int64, nreq)[req]
    ntok = np.fromiter((r.num_tokens for r in reqs), np.int64, nreq)[req]
    maxb = np.fromiter((len(r.hashes) if r.max_blocks is None else r.max_blocks for r in reqs),
                       np.int64, nreq)[req]
    toks = np.clip(ntok - idx * bsz, 0, bsz)
    flat = chain_values(reqs, total)
    spos = offsets[req] + lens[req] - 1 - idx if free_order == "tail-first" else idx + offsets[req]
    return Columns(lens, total, offsets, req, toks, idx < maxb, flat, spos)


def stack_profile(requests: Iterable[ChainRequest], free_order: str = "tail-first") -> StackProfile:
    """Compute the LRU stack profile of a request sequence (see module docstring).

    ``free_order``: ``tail-first`` (vLLM frees a finished request's blocks in
    reverse, so block 0 ends up most recent) or ``head-first`` (plain LRU that
    touches blocks in prompt order). Duplicate hashes inside one request count
    once for recency (first occurrence), as in ``BlockHashCache``.
    """
    if free_order not in ("tail-first", "head-first"):
        raise ConfigError(f"free_order must be tail-first or head-first, got {free_order!r}")
    reqs = requests if isinstance(requests, (list, ChainColumns)) else list(requests)
    nreq = len(reqs)
    c = columns(reqs, free_order)
    total, offsets, req, toks, capped, flat, spos = c.total, c.offsets, c.req, c.tokens, c.capped, c.flat, c.spos
    S = np.empty(total, dtype=flat.dtype)
    S[spos] = flat
    prev, unique = _previous(S)
    starts, s_req = offsets[:-1], req
    if total and (prev >= starts[req]).any():  # a hash repeats inside a request
        S, s_req, starts, spos = _dedup(reqs, flat, offsets, free_order)
        prev, unique = _previous(S)
    scratch = reqs.scratch if isinstance(reqs, ChainColumns) else np.fromiter((r.scratch for r in reqs), np.int64, nreq)
    return _profile(prev, s_req, starts, spos, req, toks, capped, offsets, unique, scratch)


def chain_values(reqs: list[ChainRequest], total: int) -> np.ndarray:
    """All hashes as one array: uint64 when they fit, else dense ids."""
    try:
        return np.fromiter(chain.from_iterable(r.hashes for r in reqs), np.uint64, total)
    except (OverflowError, ValueError, TypeError):
        dense: dict = {}
        return np.fromiter((dense.setdefault(h, len(dense)) for r in reqs for h in r.hashes),
                           np.int64, total)


def _previous(S: np.ndarray) -> tuple[np.ndarray, int]:
    """Previous position of the same value (−1 if none), and the distinct count."""
    n = len(S)
    prev = np.full(n, -1, dtype=np.int64)
    if not n:
        return prev, 0
    order = np.argsort(S, kind="stable")
    same = S[order[1:]] == S[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    return prev, int(n - same.sum())


def _dedup(reqs, flat, offsets, free_order) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Recency sequence when hashes repeat inside a request: each distinct block
    of a request once (first occurrence). Returns (S, request of each S slot,
    S start of each request, S slot of every original block)."""
    dense = np.unique(flat, return_inverse=True)[1].astype(np.int64).tolist()
    S: list[int] = []
    s_req: list[int] = []
    starts: list[int] = []
    spos: list[int] = []
    for r in range(len(reqs)):
        vals = dense[int(offsets[r]):int(offsets[r + 1])]
        uniq = list(dict.fromkeys(vals))
        rec = uniq[::-1] if free_order == "tail-first" else uniq
        base = len(S)
        starts.append(base)
        where = {v: base + i for i, v in enumerate(rec)}
        S.extend(rec)
        s_req.extend([r] * len(rec))
        spos.extend(where[v] for v in vals)
    as_i = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return as_i(S), as_i(s_req), as_i(starts), as_i(spos)


def _through_scratch(rank, prev, s_req, starts, scratch, n) -> np.ndarray:
    """Thresholds under a cache that keeps C − 1 blocks through a request holding a scratch block
    (vLLM's partial block): a block last used at S position q survives to its reuse at capacity C
    iff its depth stays under C at every request and under C − 1 after each scratch request in
    between. Depth only grows until the reuse, so only the last scratch request s* before the reuse
    (and not before q's own request) matters: the threshold is max(rank, rank* + 1), rank* being the
    distinct blocks in S(q, end of s*). Capacity 1 with a scratch request keeps nothing (C − 1 = 0)."""
    nreq = len(starts)
    idx = np.arange(nreq, dtype=np.int64)
    last = np.maximum.accumulate(np.where(scratch > 0, idx, -1))  # last scratch request ≤ r
    before = np.concatenate(([-1], last[:-1]))                     # last scratch request < r
    warm = np.flatnonzero(prev >= 0)
    star = before[s_req[warm]]
    hit = star >= s_req[prev[warm]]
    sel, star = warm[hit], star[hit]
    if len(sel):
        ends = np.concatenate((starts[1:], [n]))[star]
        q = prev[sel]
        rank = rank.copy()
        rank[sel] = np.maximum(rank[sel], dominance_le(prev + 1, ends, q + 1) - q - 1 + 1)
    return rank


#: Threshold of a block no capacity can hit. It must exceed every capacity a caller
#: may ask for: a finite "total lookups + 1" made caches at least that large count
#: cold blocks as hits (hit ratio above the ideal).
NEVER = int(np.iinfo(np.int64).max)


def _profile(prev, s_req, starts, spos, req, toks, capped, offsets, unique, scratch) -> StackProfile:
    n = len(prev)
    L = starts[s_req] if n else starts[:0]
    warm = prev >= 0
    cold = len(req) + 1  # above any rank (ranks < distinct blocks ≤ lookups); keeps the keys below small
    rank = np.full(n, cold, dtype=np.int64)
    rank[warm] = dominance_le(prev + 1, L[warm], prev[warm] + 1) - prev[warm] - 1
    if n and scratch.any():
        rank = _through_scratch(rank, prev, s_req, starts, scratch, n)
    r = np.where(capped, rank[spos], cold) if len(req) else np.zeros(0, dtype=np.int64)
    big = np.int64(cold + 1)
    m = np.maximum.accumulate(req * big + r) - req * big if len(req) else r
    m[m >= cold] = NEVER  # a request's hit run ends at its first cold / capped block, at every capacity
    return StackProfile(m=m, tokens=toks, req=req, offsets=offsets, unique_blocks=unique, INF=NEVER)
