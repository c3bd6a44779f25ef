"""Cache figures per request and in total: hit tokens, avoided prefill, attribution.

Definitions (SGLang's token hit ratio, the Mooncake paper's block hit ratio —
arXiv 2407.00079 — and the providers' reported usage):

* token hit ratio H = Σ cached tokens / Σ prompt tokens (SGLang's definition,
  equal to the providers' ``cached_tokens / prompt_tokens``); block hit ratio =
  Σ hit blocks / Σ prompt blocks (Mooncake, Bailian); request hit rate = share
  of requests with any cached token; avoided prefill tokens = Σ cached tokens.
* ideal = an unbounded cache with the same rules (block size, caps, minimum
  length) and no expiry; fraction of ideal = H / H∞. Both are given in each unit:
  tokens (ideal tokens / prompt tokens) and blocks (ideal blocks / prompt blocks),
  so a block ratio is only ever compared with the block ideal.
* lost tokens (prompt − cached) by cause, a chain of nested "what could have
  been cached" levels, each loss the drop between two levels:

  ``prompt ≥ lcp ≥ granular ≥ ideal ≥ capacity-only ≥ cached``

  - ``cold``: new content no earlier request had (compulsory misses);
  - ``drift``: content the session's previous request also had at those
    positions, lost because something earlier in the prompt changed (a rule
    classifier may name why);
  - ``granularity``: prefix shorter than a block/unit, the last-token cap, or
    no breakpoint where the prefix ends;
  - ``below_minimum``: the prompt or prefix is under the provider's minimum;
  - ``capacity``: evicted for room (an unbounded cache with the same rules would
    have held it; the capacity-only level is the same capacity without expiry);
  - ``ttl``: the prefix expired (retention / TTL) before it was reused although the
    cache had room for it: what removing the TTL would win at this capacity. A block
    that capacity evicts anyway is ``capacity``, never ``ttl``.

  The causes add up to prompt − cached exactly.
* hits by segment: cached tokens inside system (incl. a hidden prefix), tools,
  history (messages up to the last assistant turn), newest turn (messages after
  it), other (template text, generation prompt).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from prefixcache.analyzer.cache.base import floor_blocks
from prefixcache.analyzer.cache.provider.cost import Prices, reported_cost_usd

CAUSES = ("cold", "drift", "granularity", "below_minimum", "ttl", "capacity")
SEGMENT_GROUPS = ("system", "tools", "history", "newest_turn", "other")


@dataclass(frozen=True, slots=True)
class Levels:
    """The nested "could have been cached" levels of one request (tokens)."""

    prompt: int
    lcp: int          # longest prefix shared with any earlier request
    drift_end: int    # end of the previous session request's overlap (≥ lcp when drift)
    granular: int     # lcp after block/unit rounding and caps
    ideal: int          # unbounded cache with the same rules (minimum length applied)
    capacity_only: int  # the simulated capacity without expiry
    cached: int         # the simulated cache


def lost_by_cause(lv: Levels) -> dict[str, int]:
    """Split ``prompt − cached`` over :data:`CAUSES` (see module docstring)."""
    return split_lost(lv.prompt, lv.lcp, lv.drift_end, lv.granular, lv.ideal, lv.capacity_only, lv.cached, min, max)


def split_lost(prompt, lcp, drift_end, granular, ideal, capacity_only, cached, lo=min, hi=max) -> dict:
    """The one split of ``prompt − cached`` over :data:`CAUSES` from the nested levels (tokens), for one
    request (ints, ``lo``/``hi`` = ``min``/``max``) or for arrays of requests (``np.minimum``/``np.maximum``)."""
    lvl = []
    top = prompt
    for v in (prompt, lcp, granular, ideal, capacity_only):
        top = lo(top, v)
        lvl.append(hi(top, cached))
    miss = lvl[0] - lvl[1]
    drift = lo(miss, hi(0, lo(drift_end, lvl[0]) - lvl[1]))
    return {"cold": miss - drift, "drift": drift, "granularity": lvl[1] - lvl[2], "below_minimum": lvl[2] - lvl[3],
            "ttl": lvl[4] - cached, "capacity": lvl[3] - lvl[4]}


def hits_by_segment(spans: Sequence[tuple[str, int, int]], cached: int) -> dict[str, int]:
    """Cached tokens ``[0, cached)`` split over segment groups; ``spans`` are
    ``(group, start, end)`` token spans. Uncovered cached tokens count as other."""
    out = {g: 0 for g in SEGMENT_GROUPS}
    covered = 0
    for group, start, end in spans:
        k = max(0, min(end, cached) - start)
        out[group] += k
        covered += k
    out["other"] += max(0, cached - covered)
    return out


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """Which request (``order`` in arrival order; ``session``, ``source`` file, ``record``) and
    its counts under one cache: tokens unless named blocks. The base of the simulator's
    :class:`RequestFigures` and of the ``--per-request`` row that reports them."""

    order: int
    session: str
    source: str
    record: int
    prompt_tokens: int
    cached_tokens: int
    ideal_tokens: int
    blocks_total: int
    blocks_hit: int


@dataclass(frozen=True, slots=True)
class RequestFigures(RequestCounts):
    """One request under one cache: all counts in tokens unless named blocks."""

    written_tokens: int = 0
    write_multiplier: float = 1.0
    shared_tokens: int = 0  # longest prefix shared with any earlier request (tokens)
    lost: Mapping[str, int] = field(default_factory=dict)
    segments: Mapping[str, int] = field(default_factory=dict)
    reported_prompt_tokens: int | None = None
    reported_cached_tokens: int | None = None
    drift_cause: str | None = None
    ideal_blocks: int = 0  # blocks of the ideal level, counted like blocks_hit


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums and ratios over requests (ratios are 0 when there is nothing to divide)."""

    requests: int
    prompt_tokens: int
    cached_tokens: int
    ideal_tokens: int
    blocks_total: int
    blocks_hit: int
    requests_hit: int
    written_tokens: int
    lost: Mapping[str, int]
    segments: Mapping[str, int]
    drift_by_cause: Mapping[str, int]
    ideal_blocks: int = 0

    @property
    def hit_ratio_tokens(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def hit_ratio_blocks(self) -> float:
        return self.blocks_hit / self.blocks_total if self.blocks_total else 0.0

    @property
    def ideal_hit_ratio(self) -> float:
        return self.ideal_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def fraction_of_ideal(self) -> float:
        return self.cached_tokens / self.ideal_tokens if self.ideal_tokens else 0.0

    @property
    def ideal_hit_ratio_blocks(self) -> float:
        return self.ideal_blocks / self.blocks_total if self.blocks_total else 0.0

    @property
    def fraction_of_ideal_blocks(self) -> float:
        return self.blocks_hit / self.ideal_blocks if self.ideal_blocks else 0.0

    @property
    def request_hit_rate(self) -> float:
        return self.requests_hit / self.requests if self.requests else 0.0

    @property
    def avoided_prefill_tokens(self) -> int:
        return self.cached_tokens


def totals(rows: Iterable[RequestFigures]) -> Totals:
    """Aggregate per-request figures."""
    n = p = c = i = bt = bh = rh = w = ib = 0
    lost = {k: 0 for k in CAUSES}
    seg = {g: 0 for g in SEGMENT_GROUPS}
    drift: dict[str, int] = {}
    for r in rows:
        n += 1
        p += r.prompt_tokens
        c += r.cached_tokens
        i += r.ideal_tokens
        bt += r.blocks_total
        bh += r.blocks_hit
        ib += r.ideal_blocks
        rh += r.cached_tokens > 0
        w += r.written_tokens
        for k, v in r.lost.items():
            lost[k] += v
        for k, v in r.segments.items():
            seg[k] += v
        if r.drift_cause and r.lost.get("drift"):
            drift[r.drift_cause] = drift.get(r.drift_cause, 0) + r.lost["drift"]
    return Totals(n, p, c, i, bt, bh, rh, w, lost, seg, dict(sorted(drift.items())), ib)


def array_totals(prompt, cached, ideal, blocks_total, blocks_hit, ideal_blocks, lost: Mapping[str, object],
                 drift_cause: Sequence[str | None], segments: Iterable[Mapping[str, int]] = ()) -> Totals:
    """:func:`totals` from per-request int64 arrays (tokens; blocks where named), ``lost`` the
    :func:`split_lost` arrays, ``drift_cause`` per request, ``segments`` the requests' non-empty
    :func:`hits_by_segment` dicts: the same Totals without an object per request."""
    seg = {g: 0 for g in SEGMENT_GROUPS}
    for one in segments:
        for k, v in one.items():
            seg[k] += v
    drift: dict[str, int] = {}
    d = lost["drift"]
    for i in np.flatnonzero(d > 0).tolist():
        if (code := drift_cause[i]):
            drift[code] = drift.get(code, 0) + int(d[i])
    return Totals(len(prompt), int(prompt.sum()), int(cached.sum()), int(ideal.sum()), int(blocks_total.sum()),
                  int(blocks_hit.sum()), int((cached > 0).sum()), 0, {k: int(lost[k].sum()) for k in CAUSES}, seg,
                  dict(sorted(drift.items())), int(ideal_blocks.sum()))


@dataclass(frozen=True, slots=True)
class ReportedUsage:
    """What the log's own provider usage says, summed over the calls that report a
    prompt size (tokens): no simulation involved. ``requests`` counts those calls."""

    requests: int
    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int

    @property
    def hit_ratio(self) -> float:
        """Reported cached / reported prompt tokens (0 when nothing was reported)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def cost_usd(self, prices: Prices, write_multiplier: float = 1.0) -> tuple[float, float]:
        """(cost the reported usage implies, cost with no cache) in USD
        (:func:`~prefixcache.analyzer.cache.provider.cost.reported_cost_usd`)."""
        return reported_cost_usd(self.prompt_tokens, self.cached_tokens, self.cache_write_tokens, prices,
                                 write_multiplier)


def reported_usage(usages: Iterable) -> ReportedUsage | None:
    """Sum :class:`~prefixcache.analyzer.model.Usage` records (None entries and
    calls without a reported prompt size are skipped). None when no call reports a
    prompt size, or when none reports a cached count: a log that says nothing about
    the cache (block traces log only prompt lengths; some agents log only prompt
    sizes) is not a report of 0 cached tokens. Otherwise a missing cached / write
    count of one call reads as 0."""
    n = p = c = w = 0
    cache_reported = False
    for u in usages:
        if u is None or u.prompt_tokens is None:
            continue
        n += 1
        p += u.prompt_tokens
        c += u.cached_tokens or 0
        w += u.cache_write_tokens or 0
        cache_reported = cache_reported or u.cached_tokens is not None
    return ReportedUsage(n, p, c, w) if n and cache_reported else None


def calibrated_cached(rows: Sequence[RequestFigures], block_size: int = 1, min_tokens: int = 0) -> list[int | None]:
    """Predicted cached tokens mapped into the provider's token count (None where
    the provider reported no prompt length).

    Our rendering/tokenizer may not be the provider's (approximate templates), so
    a prefix of ``p`` of our tokens is mapped piecewise-linearly through the
    anchors ``(our prompt length, reported prompt length)`` of the session's
    requests so far (and ``(0, 0)``), then rounded down to the provider's
    ``block_size`` (its storage unit). The prefix mapped is the full shared prefix when the cache served
    all of it, else the cached tokens.
    """
    anchors: dict[str, _Anchors] = {}
    out: list[int | None] = []
    for r in rows:
        pts = anchors.get(r.session)
        if pts is None:
            pts = anchors[r.session] = _Anchors()
        if not r.reported_prompt_tokens:
            out.append(None)
            continue
        pts.add(r.prompt_tokens, r.reported_prompt_tokens)
        if r.cached_tokens <= 0:
            out.append(0)
            continue
        full = r.lost.get("capacity", 0) + r.lost.get("ttl", 0) == 0
        raw = max(r.cached_tokens, r.shared_tokens) if full else r.cached_tokens
        mapped = floor_blocks(pts.interp(raw), block_size)
        mapped = min(mapped, r.reported_prompt_tokens)
        out.append(mapped if mapped >= min_tokens else 0)
    return out


class _Anchors:
    """One session's anchors ``(our length, reported length)`` and their monotone map
    (:func:`_monotone`), kept incrementally: a point beyond every earlier one (prompts
    grow) costs O(1); any other point rebuilds the map. :meth:`interp` is ``numpy.interp``
    on the map (same formula, so the same floats), by bisection."""

    __slots__ = ("points", "xs", "ys", "top")

    def __init__(self) -> None:
        self.points: set[tuple[int, int]] = {(0, 0)}
        self.xs, self.ys = [0], [0]
        self.top = 0  # largest x of any point, kept or not

    def add(self, x: int, y: int) -> None:
        if (x, y) in self.points:
            return
        self.points.add((x, y))
        if x > self.top:
            self.top = x
            if y >= self.ys[-1]:
                self.xs.append(x)
                self.ys.append(y)
        else:
            self.xs, self.ys = _monotone(list(self.points))

    def interp(self, x: int) -> int:
        xs, ys = self.xs, self.ys
        i = bisect_right(xs, x)
        if i == 0:
            return int(ys[0])
        if i == len(xs) or xs[i - 1] == x:
            return int(ys[i - 1])
        slope = (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1])
        return int(slope * (x - xs[i - 1]) + ys[i - 1])


def _monotone(pts: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Anchor points sorted by our length, keeping the map non-decreasing."""
    xs, ys = [], []
    for x, y in sorted(set(pts)):
        if xs and (x == xs[-1] or y < ys[-1]):
            continue
        xs.append(x)
        ys.append(y)
    return xs, ys
