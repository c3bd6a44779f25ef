"""Reuse in time: how long after one use a prefix block is used again, and how long it stays cached.

Over the simulator's requests (arrival order, the logical clock ``now`` in seconds) and their
block chains (:meth:`~prefixcache.analyzer.cache.workload.SimRequest.chain`: a chained block
hash stands for the whole prefix up to and including that block, so a block's reuse is its
prefix's reuse; block traces use their logged hash ids):

* **reuse gap** — for every block of every request that an earlier request also had: the
  time since that block's previous use (``now − last use``, seconds). An idle TTL of ``t``
  refreshed on every hit keeps exactly the reuses whose gap is ≤ ``t`` (given room), so the
  fraction of reuses within ``t`` is the share of reusable prefix a TTL of ``t`` can serve.
* **residency** — at each simulated capacity, a block's stay in an LRU block cache
  (:class:`~prefixcache.analyzer.cache.index.block_hash.BlockHashCache`, the policy and TTL of
  the run): from the request that stored it to its eviction. An eviction is seen at the request
  whose step made it (the logical clock only moves at requests); a block that expired under the
  TTL left at its last use + TTL, which is what is counted.
* **survival** ``S(t)`` — of the blocks stored at least ``t`` seconds before the last request
  (the ones observed that long), the fraction still cached ``t`` seconds after being stored;
  every block is the same number of tokens, so it is also the fraction of stored prefix tokens.

Each figure is given over all blocks and per segment kind (the group of the span holding the
block's last token, :data:`~.figures.SEGMENT_GROUPS`, or ``tool_outputs`` when that token is in a
tool-result message; block traces have no spans: ``other``),
and the reuse gaps also per session. Distributions are :class:`~prefixcache.analyzer.stats.Distribution`
(seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.index.eviction import POLICIES
from prefixcache.analyzer.cache.simulate.figures import SEGMENT_GROUPS
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.stats import Distribution

#: The times (seconds) at which reuse-gap fractions and survival are read: 1 s … 1 day,
#: the provider retentions (5 min, 1 h, 24 h) among them.
T_POINTS: tuple[float, ...] = (1.0, 10.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0)
#: Sessions listed in the per-session reuse gaps (those with the most reuses first).
MAX_SESSIONS = 50


@dataclass(frozen=True, slots=True)
class TimePoint:
    """One point of a curve: at ``t_s`` seconds, ``fraction`` (0–1) of ``blocks`` blocks."""

    t_s: float
    fraction: float | None
    blocks: int


@dataclass(frozen=True, slots=True)
class GapRow:
    """Reuse gaps of one segment kind (``all``: every block) or one session (seconds): their
    distribution, and at each :data:`T_POINTS` time the fraction of reuses with a gap ≤ t."""

    kind: str
    gaps_s: Distribution
    within: list[TimePoint]


@dataclass(frozen=True, slots=True)
class ResidencyRow:
    """Residency at one capacity (blocks; null = unbounded) under ``policy`` and ``ttl_s``
    (seconds; null = none), for one segment kind: the stays of the blocks that were evicted
    (seconds), how many stored blocks were still cached at the end, and the survival curve."""

    capacity: str
    capacity_blocks: int | None
    policy: str
    ttl_s: float | None
    kind: str
    stored_blocks: int
    evicted_s: Distribution
    still_cached_blocks: int
    survival: list[TimePoint]


@dataclass(frozen=True, slots=True)
class Survival:
    """The reuse-in-time figures of one stream (``simulate --survival``): block size
    (tokens), the reuse gaps per segment kind and per session (``sessions_total``: how many
    sessions reused a block; the :data:`MAX_SESSIONS` with most reuses are listed), and the
    residency rows (every capacity × segment kind)."""

    block_size: int
    t_points_s: list[float]
    gaps: list[GapRow]
    sessions_total: int
    sessions: list[GapRow]
    residency: list[ResidencyRow]


def block_kinds(r: SimRequest, n_blocks: int, block_size: int) -> list[str]:
    """The segment kind of each of the first ``n_blocks`` full blocks of ``r``: the group of the
    span that holds the block's last token (``other`` outside every span, and for block traces)."""
    return [_KINDS[c] for c in _kind_codes(r, n_blocks, block_size)]


#: Segment kinds by code (the codes of :func:`_kind_codes`): the hit-attribution groups, and
#: ``tool_outputs`` (tool-result messages, which those groups count under history / newest turn).
_KINDS = (*SEGMENT_GROUPS, "tool_outputs")
_TOOL = _KINDS.index("tool_outputs")
_OTHER = _KINDS.index("other")


def _kind_codes(r: SimRequest, n_blocks: int, block_size: int) -> np.ndarray:
    if not r.spans or not n_blocks:
        return np.full(n_blocks, _OTHER, dtype=np.int8)
    starts = np.fromiter((s for _, s, _ in r.spans), dtype=np.int64)
    ends = np.fromiter((e for _, _, e in r.spans), dtype=np.int64)
    codes = np.fromiter((_KINDS.index(g) for g, _, _ in r.spans), dtype=np.int8)
    last = (np.arange(n_blocks, dtype=np.int64) + 1) * block_size - 1
    i = np.searchsorted(ends, last, side="right")
    inside = i < len(ends)
    i = np.minimum(i, len(ends) - 1)
    inside &= starts[i] <= last
    out = np.where(inside, codes[i], _OTHER).astype(np.int8)
    for a, b in r.tool_spans:  # a tool output's blocks, whatever its group
        out[(last >= a) & (last < b)] = _TOOL
    return out


def _gap_arrays(reqs: Sequence[SimRequest], block_size: int,
                chains: Sequence[Sequence[int]] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every reuse of a block as arrays in arrival order: (kind code, request index, gap seconds).
    The blocks of all chains are laid end to end and sorted by hash (stable, so by arrival within
    a hash): each occurrence after the first, in another request, is a reuse of the one before."""
    chains = chains if chains is not None else [r.chain(block_size) for r in reqs]
    lens = np.fromiter(map(len, chains), dtype=np.int64, count=len(chains))
    total = int(lens.sum()) if len(lens) else 0
    if total == 0:
        return np.zeros(0, np.int8), np.zeros(0, np.int64), np.zeros(0, float)
    ids = np.fromiter(chain_ids(chains), dtype=np.uint64, count=total)
    req = np.repeat(np.arange(len(reqs), dtype=np.int64), lens)
    now = np.repeat(np.fromiter((r.now for r in reqs), dtype=float, count=len(reqs)), lens)
    kinds = np.concatenate([_kind_codes(r, n, block_size) for r, n in zip(reqs, lens.tolist())])
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    same = sid[1:] == sid[:-1]
    prev, cur = order[:-1][same], order[1:][same]
    keep = req[prev] != req[cur]  # a block twice in one request is one use
    prev, cur = prev[keep], cur[keep]
    cur_sorted = np.argsort(cur, kind="stable")
    prev, cur = prev[cur_sorted], cur[cur_sorted]
    return kinds[cur], req[cur], now[cur] - now[prev]


def chain_ids(chains: Sequence[Sequence[int]]):
    """The block ids of ``chains`` end to end (unsigned 64-bit: chained hashes and trace ids)."""
    for c in chains:
        yield from c


def reuse_gaps(reqs: Sequence[SimRequest], block_size: int) -> list[tuple[str, str, float]]:
    """Every reuse of a block, in arrival order: ``(segment kind, session, gap seconds)``, the
    gap being the time since the same block hash was last in a request (module docstring)."""
    kinds, req, gaps = _gap_arrays(reqs, block_size)
    return [(_KINDS[k], reqs[i].session, float(g)) for k, i, g in zip(kinds.tolist(), req.tolist(), gaps.tolist())]


def _stays(reqs: Sequence[SimRequest], block_size: int, capacity_blocks: int | None, policy: str,
           ttl_s: float | None, chains: Sequence[Sequence[int]] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Block stays as arrays (kind code, stored at, evicted at — NaN while still cached) and the
    time of the last request: see :func:`residency`."""
    cache = BlockHashCache(block_size, capacity_blocks, policy if policy in POLICIES else "lru", ttl_s=ttl_s,
                           cap_last_token=False)
    open_: dict[int, int] = {}  # block → index of its open stay
    last: dict[int, float] = {}
    kinds: list[int] = []
    starts: list[float] = []
    stops: list[float] = []
    nan = float("nan")
    for n, r in enumerate(reqs):
        chain = chains[n] if chains is not None else r.chain(block_size)
        now = r.now
        res = cache.insert_hashes(chain, now)
        later = []  # evicted blocks with no stay open yet: stored by this request, then evicted for room
        for h in res.evicted:  # first the stays that began before this request
            i = open_.pop(h, None)
            if i is None:
                later.append(h)
            elif ttl_s is not None and now - last[h] > ttl_s:  # expired: at its last use + TTL
                stops[i] = last[h] + ttl_s
            else:
                stops[i] = now
        new = res.inserted
        if new:
            codes = _kind_codes(r, len(chain), block_size).tolist() if r.spans else None
            pos = {h: k for k, h in enumerate(chain)} if codes is not None else None
            n0 = len(starts)
            open_.update(zip(new, range(n0, n0 + len(new))))
            starts.extend([now] * len(new))
            stops.extend([nan] * len(new))
            kinds.extend([codes[pos[h]] for h in new] if codes is not None else [_OTHER] * len(new))
        for h in later:
            i = open_.pop(h, None)
            if i is not None:
                stops[i] = now
        if ttl_s is not None:
            for h in chain:
                last[h] = now
    return (np.asarray(kinds, dtype=np.int8), np.asarray(starts, dtype=float), np.asarray(stops, dtype=float),
            reqs[-1].now if reqs else 0.0)


def residency(reqs: Sequence[SimRequest], block_size: int, capacity_blocks: int | None, policy: str = "lru",
              ttl_s: float | None = None) -> tuple[list[tuple[str, float, float | None]], float]:
    """Every block stay in an LRU block cache of ``capacity_blocks`` (None = unbounded) with
    ``policy`` and idle ``ttl_s``: ``(segment kind, stored at, evicted at or None while still
    cached)`` seconds, in the order stored; and the time of the last request. A stay that ended
    by expiry ends at the block's last use + ``ttl_s``."""
    kinds, starts, stops, end = _stays(reqs, block_size, capacity_blocks, policy, ttl_s)
    return [(_KINDS[k], s, None if e != e else e) for k, s, e in zip(kinds.tolist(), starts.tolist(),
                                                                      stops.tolist())], end


def _within(gaps: np.ndarray) -> list[TimePoint]:
    n = int(gaps.size)
    return [TimePoint(t, round(float((gaps <= t).sum()) / n, 6) if n else None, n) for t in T_POINTS]


def survival_curve(stays: Sequence[tuple[str, float, float | None]], end: float) -> list[TimePoint]:
    """``S(t)`` at each :data:`T_POINTS` time over ``stays`` (module docstring): among stays
    that began at least ``t`` before ``end``, the fraction not evicted within ``t`` seconds."""
    start = np.asarray([s for _, s, _ in stays], dtype=float)
    stop = np.asarray([np.nan if e is None else e for _, _, e in stays], dtype=float)
    return _curve(start, stop, end)


def _curve(start: np.ndarray, stop: np.ndarray, end: float) -> list[TimePoint]:
    stay = np.where(np.isnan(stop), np.inf, stop - start)
    out = []
    for t in T_POINTS:
        risk = start <= end - t
        n = int(risk.sum())
        alive = int((stay[risk] > t).sum())
        out.append(TimePoint(t, round(alive / n, 6) if n else None, n))
    return out


def gap_row(kind: str, gaps: np.ndarray) -> GapRow:
    """The :class:`GapRow` of ``kind`` over reuse ``gaps`` (seconds)."""
    return GapRow(kind, Distribution.of(gaps.tolist()), _within(gaps))


def survival(reqs: Sequence[SimRequest], block_size: int, capacities: Sequence[tuple[str, int | None]],
             policy: str = "lru", ttl_s: float | None = None) -> Survival:
    """The :class:`Survival` figures of ``reqs`` (arrival order) in blocks of ``block_size``
    tokens, residency at each ``(label, capacity blocks or None)`` of ``capacities``."""
    chains = [r.chain(block_size) for r in reqs]  # each request's chain materialized once
    kinds, req, gaps = _gap_arrays(reqs, block_size, chains)
    present = np.flatnonzero(np.bincount(kinds, minlength=len(_KINDS))).tolist()
    rows = [gap_row("all", gaps)] + [gap_row(_KINDS[k], gaps[kinds == k]) for k in present]
    names = [r.session for r in reqs]
    by: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        by.setdefault(n, []).append(i)
    code = np.zeros(len(reqs), dtype=np.int64)
    order = list(by)
    for c, n in enumerate(order):
        code[by[n]] = c
    sess = code[req] if len(req) else np.zeros(0, np.int64)
    counts = np.bincount(sess, minlength=len(order)) if len(order) else np.zeros(0, np.int64)
    active = [c for c in range(len(order)) if counts[c]]
    top = sorted(active, key=lambda c: (-int(counts[c]), order[c]))[:MAX_SESSIONS]
    res_rows = []
    for label, cap in capacities:
        k, start, stop, end = _stays(reqs, block_size, cap, policy, ttl_s, chains)
        for kind in [-1, *np.flatnonzero(np.bincount(k, minlength=len(_KINDS))).tolist()]:
            m = slice(None) if kind == -1 else (k == kind)
            st, sp = start[m], stop[m]
            done = ~np.isnan(sp)
            res_rows.append(ResidencyRow(label, cap, policy, ttl_s, "all" if kind == -1 else _KINDS[kind], int(st.size),
                                         Distribution.of((sp[done] - st[done]).tolist()), int((~done).sum()),
                                         _curve(st, sp, end)))
    return Survival(block_size, list(T_POINTS), rows, len(active),
                    [gap_row(order[c], gaps[sess == c]) for c in top], res_rows)
