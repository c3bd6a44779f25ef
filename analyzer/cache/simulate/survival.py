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
block's last token, :data:`~.figures.SEGMENT_GROUPS`; block traces have no spans: ``other``),
and the reuse gaps also per session. Distributions are :class:`~prefixcache.analyzer.stats.Distribution`
(seconds).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
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
    if not r.spans:
        return ["other"] * n_blocks
    ends = [e for _, _, e in r.spans]
    out = []
    for k in range(n_blocks):
        last = (k + 1) * block_size - 1
        i = bisect_right(ends, last)
        out.append(r.spans[i][0] if i < len(r.spans) and r.spans[i][1] <= last else "other")
    return out


def reuse_gaps(reqs: Sequence[SimRequest], block_size: int) -> list[tuple[str, str, float]]:
    """Every reuse of a block, in arrival order: ``(segment kind, session, gap seconds)``, the
    gap being the time since the same block hash was last in a request (module docstring)."""
    last: dict[int, float] = {}
    out = []
    for r in reqs:
        chain = r.chain(block_size)
        kinds = block_kinds(r, len(chain), block_size)
        for h, kind in zip(chain, kinds):
            t = last.get(h)
            if t is not None:
                out.append((kind, r.session, r.now - t))
            last[h] = r.now
    return out


def residency(reqs: Sequence[SimRequest], block_size: int, capacity_blocks: int | None, policy: str = "lru",
              ttl_s: float | None = None) -> tuple[list[tuple[str, float, float | None]], float]:
    """Every block stay in an LRU block cache of ``capacity_blocks`` (None = unbounded) with
    ``policy`` and idle ``ttl_s``: ``(segment kind, stored at, evicted at or None while still
    cached)`` seconds, in the order stored; and the time of the last request. A stay that ended
    by expiry ends at the block's last use + ``ttl_s``."""
    cache = BlockHashCache(block_size, capacity_blocks, policy if policy in POLICIES else "lru", ttl_s=ttl_s,
                           cap_last_token=False)
    open_: dict[int, int] = {}  # block → index of its open stay
    last: dict[int, float] = {}
    stays: list[list] = []
    end = reqs[-1].now if reqs else 0.0
    for r in reqs:
        chain = r.chain(block_size)
        kinds = block_kinds(r, len(chain), block_size)
        res = cache.insert_hashes(chain, r.now)
        left = Counter(res.evicted)
        for h in res.evicted:  # stays that began before this request
            i = open_.get(h)
            if i is None:
                continue
            used = last[h]
            if ttl_s is not None and r.now - used > ttl_s:  # expired before this request: at last use + TTL
                stays[i][2] = used + ttl_s
            elif h in res.inserted:  # cannot be: an inserted block had no stay open
                continue
            else:
                stays[i][2] = r.now
            del open_[h]
            left[h] -= 1
        kind_of = dict(zip(chain, kinds))
        for h in res.inserted:
            open_[h] = len(stays)
            stays.append([kind_of.get(h, "other"), r.now, None])
            if left[h] > 0:  # stored, then evicted for room by the same request
                stays[open_.pop(h)][2] = r.now
        for h in chain:
            last[h] = r.now
    return [(k, s, e) for k, s, e in stays], end


def _within(gaps: np.ndarray) -> list[TimePoint]:
    n = int(gaps.size)
    return [TimePoint(t, round(float((gaps <= t).sum()) / n, 6) if n else None, n) for t in T_POINTS]


def survival_curve(stays: Sequence[tuple[str, float, float | None]], end: float) -> list[TimePoint]:
    """``S(t)`` at each :data:`T_POINTS` time over ``stays`` (module docstring): among stays
    that began at least ``t`` before ``end``, the fraction not evicted within ``t`` seconds."""
    start = np.asarray([s for _, s, _ in stays], dtype=float)
    stop = np.asarray([np.inf if e is None else e for _, _, e in stays], dtype=float)
    out = []
    for t in T_POINTS:
        risk = start <= end - t
        n = int(risk.sum())
        alive = int((stop[risk] - start[risk] > t).sum())
        out.append(TimePoint(t, round(alive / n, 6) if n else None, n))
    return out


def _gap_row(kind: str, gaps: list[float]) -> GapRow:
    return GapRow(kind, Distribution.of(gaps), _within(np.asarray(gaps, dtype=float)))


def survival(reqs: Sequence[SimRequest], block_size: int, capacities: Sequence[tuple[str, int | None]],
             policy: str = "lru", ttl_s: float | None = None) -> Survival:
    """The :class:`Survival` figures of ``reqs`` (arrival order) in blocks of ``block_size``
    tokens, residency at each ``(label, capacity blocks or None)`` of ``capacities``."""
    events = reuse_gaps(reqs, block_size)
    kinds = [k for k in SEGMENT_GROUPS if any(e[0] == k for e in events)]
    gaps = [_gap_row("all", [g for _, _, g in events])]
    gaps += [_gap_row(k, [g for kk, _, g in events if kk == k]) for k in kinds]
    by_session: dict[str, list[float]] = {}
    for _, s, g in events:
        by_session.setdefault(s, []).append(g)
    top = sorted(by_session, key=lambda s: (-len(by_session[s]), s))[:MAX_SESSIONS]
    rows = []
    for label, cap in capacities:
        stays, end = residency(reqs, block_size, cap, policy, ttl_s)
        for kind in ("all", *[k for k in SEGMENT_GROUPS if any(s[0] == k for s in stays)]):
            mine = stays if kind == "all" else [s for s in stays if s[0] == kind]
            rows.append(ResidencyRow(label, cap, policy, ttl_s, kind, len(mine),
                                     Distribution.of(e - s for _, s, e in mine if e is not None),
                                     sum(e is None for _, _, e in mine), survival_curve(mine, end)))
    return Survival(block_size, list(T_POINTS), gaps, len(by_session), [_gap_row(s, by_session[s]) for s in top], rows)
