"""The engine's prefix cache rebuilt from its KV events, and every request's cached tokens checked against it.

:func:`reconcile` walks the events of a replay (:mod:`prefixcache.replay.server.kvevents`)
in the engine's order and keeps the multiset of cached blocks: a ``BlockStored`` adds one copy
of each block, a ``BlockRemoved`` takes one away (vLLM's pool can hold two copies of one hash:
a request whose last full block is recomputed under the ⌊(n−1)/B⌋ cap stores it again), an
``AllBlocksCleared`` empties it. The engine's hashes are mapped to ours by their tokens
(``hash_blocks`` of the stored tokens, continuing the parent's chain), so a request's prompt,
hashed by us, can be looked up in the engine's own state.

Each request the replay sent carries a tag (the request body's ``session_id``) that vLLM puts
on the ``BlockStored`` events it causes — the report of the prefix it reused when it was
scheduled (``kv_cache_report_mode = "full"``) and the blocks it registered — so the stream
says *when* the engine scheduled it. Its **event prediction** is the resident prefix of its
block chain at that point (capped at ⌊(n−1)/B⌋ blocks, ``max_cache_hit_length = n − 1`` in
``KVCacheManager.get_computed_blocks``), computed from the registrations and removals
before it — not from the reuse report's length. A request is **accounted** when that equals
the engine's ``cached_tokens``. Where our own model's prediction (made in send order) differs,
:func:`explain` names the event that made the difference: a block removed before reuse, a
block a concurrent request registered first, a block not registered yet, or a block the engine
kept where the model evicted it.

:func:`engine_survival` measures the engine's real block residency (registration → removal,
engine clock) and reuse gaps, in :class:`~prefixcache.analyzer.cache.simulate.survival.Survival`'s format.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.cache.simulate.survival import (
    T_POINTS, GapRow, ResidencyRow, Survival, TimePoint, gap_row,
)
from prefixcache.analyzer.stats import Distribution
from prefixcache.replay.document import KVEventsReport
from prefixcache.replay.server.kvevents import CLEARED, REMOVED, STORED, KVEvent, KVEventSubscriber

TAG_PREFIX = "prefixcache"


def tag_of(pass_name: str, position: int) -> str:
    """The ``session_id`` a replayed request carries: ``prefixcache:PASS:POSITION``."""
    return f"{TAG_PREFIX}:{pass_name}:{position}"


@dataclass(frozen=True, slots=True)
class Sent:
    """A request as the ledger needs it: ``pass_name``, ``position``, our prompt ``ids``, its
    send time (``perf_counter`` seconds), the engine's ``cached`` tokens and our model's
    ``predicted`` tokens (None when not reported / not predicted)."""

    pass_name: str
    position: int
    ids: tuple[int, ...]
    t_send: float
    cached: int | None
    predicted: int | None


@dataclass(frozen=True, slots=True)
class EventCheck:
    """One request against the engine's events: ``event_cached`` (tokens resident at its
    scheduling point; None when no event marks that point), ``seq`` (the batch of that
    point), ``accounted`` (``event_cached`` = the engine's cached tokens) and ``fact`` (the
    named event behind a difference from our model's prediction; empty when there is none)."""

    pass_name: str
    position: int
    event_cached: int | None
    seq: int | None
    accounted: bool
    fact: str


@dataclass(slots=True)
class _Point:
    """A candidate scheduling point of one request: the resident prefix (blocks) just before
    the event, whether the event registered new blocks, the event, and the state of the first
    non-resident block then (its last event)."""

    prefix: int
    new: bool
    event: KVEvent
    missing_last: tuple[str, KVEvent] | None


class Ledger:
    """The engine's cached blocks as its events say (see the module docstring), in our hashes."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.ours: dict[int, int] = {}          # engine hash -> our chained hash
        self.copies: Counter[int] = Counter()   # our hash -> copies cached
        self.last: dict[int, tuple[str, KVEvent]] = {}  # our hash -> (type, event) of its last change
        self.unmapped = 0                       # stored blocks whose parent was never seen

    def map(self, e: KVEvent) -> list[int] | None:
        """Our hashes of a ``stored`` event's blocks (recorded for later removals); None when its
        parent chain is unknown (stored before the subscription)."""
        parent = None
        if e.parent is not None:
            parent = self.ours.get(e.parent)
            if parent is None:
                self.unmapped += len(e.hashes)
                return None
        bs = e.block_size or self.block_size
        ours = hash_blocks(e.tokens, bs, parent=parent)
        if len(ours) != len(e.hashes):
            self.unmapped += len(e.hashes)
            return None
        self.ours.update(zip(e.hashes, ours))
        return ours

    def prefix(self, chain: Sequence[int]) -> int:
        """Blocks of ``chain`` cached from block 0 on."""
        n = 0
        for h in chain:
            if self.copies[h] <= 0:
                break
            n += 1
        return n

    def is_report(self, e: KVEvent, ours: list[int] | None, can_hit: bool = True) -> bool:
        """A ``stored`` event that reports a reused prefix (blocks from 0 on, all cached) rather
        than registering blocks; ``can_hit`` False for a request whose hit cap is 0 blocks (it
        registers a copy of a cached block 0 and has nothing to report)."""
        return (e.type == STORED and ours is not None and e.parent is None and can_hit
                and all(self.copies[h] > 0 for h in ours))

    def apply(self, e: KVEvent, ours: list[int] | None, report: bool = False) -> None:
        """Take one event into the state (``ours``: its blocks in our hashes, from :meth:`map`;
        ``report``: a reuse report, which changes nothing)."""
        if e.type == STORED and ours is not None and not report:
            for h in ours:
                self.copies[h] += 1
                self.last[h] = (STORED, e)
        elif e.type == REMOVED:
            for eh in e.hashes:
                h = self.ours.get(eh)
                if h is not None and self.copies[h] > 0:
                    self.copies[h] -= 1
                    if self.copies[h] == 0:
                        self.last[h] = (REMOVED, e)
        elif e.type == CLEARED:
            for h in [h for h, c in self.copies.items() if c > 0]:
                self.last[h] = (CLEARED, e)
            self.copies.clear()


def _parse_tag(tag: str | None) -> tuple[str, int] | None:
    if not tag or not tag.startswith(TAG_PREFIX + ":"):
        return None
    _, name, pos = tag.rsplit(":", 2)
    return (name, int(pos)) if pos.isdigit() else None


def reconcile(sent: Sequence[Sent], events: Sequence[KVEvent], block_size: int) -> list[EventCheck]:
    """Every request of ``sent`` checked against ``events`` (module docstring), in ``sent`` order.

    A request's scheduling point is its last reuse report before its first registration of a
    new block (vLLM reports the reuse each time it tries to schedule a waiting request), else
    its last reuse report, else its first registration; a request with no full block to reuse
    (⌊(n−1)/B⌋ = 0) is predicted 0 without one."""
    ledger = Ledger(block_size)
    by_key = {(s.pass_name, s.position): s for s in sent}
    chains = {k: hash_blocks(s.ids, block_size) for k, s in by_key.items()}
    points: dict[tuple[str, int], list[_Point]] = {}
    stores_after: dict[int, list[KVEvent]] = {}  # our hash -> the stored events that registered it
    for e in events:
        ours = ledger.map(e) if e.type == STORED else None
        key = _parse_tag(e.tag) if e.type == STORED else None
        report = ledger.is_report(e, ours, key not in by_key or len(by_key[key].ids) > block_size)
        if key in by_key:
            chain = chains[key]
            p = ledger.prefix(chain)
            missing = ledger.last.get(chain[p]) if p < len(chain) else None
            points.setdefault(key, []).append(_Point(p, not report, e, missing))
        if ours is not None and not report:
            for h in ours:
                if ledger.copies[h] <= 0:
                    stores_after.setdefault(h, []).append(e)
        ledger.apply(e, ours, report)
    out = []
    for s in sent:
        key = (s.pass_name, s.position)
        cap = max(0, (len(s.ids) - 1) // block_size)
        point = _choose(points.get(key, []))
        if point is None:
            ev = 0 if cap == 0 else None
            seq = None
        else:
            ev, seq = min(point.prefix, cap) * block_size, point.event.seq
        accounted = ev is not None and s.cached is not None and ev == s.cached
        fact = explain(s, ev, point, chains[key], stores_after, by_key, block_size)
        out.append(EventCheck(s.pass_name, s.position, ev, seq, accounted, fact))
    return out


def _choose(points: list[_Point]) -> _Point | None:
    first_new = next((i for i, p in enumerate(points) if p.new), None)
    reports = [p for p in points[:first_new] if not p.new] if first_new is not None else [p for p in points if not p.new]
    if reports:
        return reports[-1]
    return points[first_new] if first_new is not None else None


def _who(tag: str | None) -> str:
    key = _parse_tag(tag)
    return f"request {key[0]} #{key[1]}" if key else f"a request outside this replay ({tag or 'untagged'})"


def explain(s: Sent, event_cached: int | None, point: _Point | None, chain: Sequence[int],
            stores: dict[int, list[KVEvent]], by_key: dict[tuple[str, int], Sent], block_size: int) -> str:
    """The named event behind ``s``'s difference from our model's prediction ('' when the
    engine's cached tokens equal the prediction). Unaccounted requests say so."""
    if s.cached is None or s.predicted is None or s.cached == s.predicted:
        return ""
    if event_cached is None:
        return "no KV event marks when the engine scheduled this request (events lost or not enabled)"
    if event_cached != s.cached:
        return f"not accounted: the KV events give {event_cached} cached tokens, the engine reported {s.cached}"
    t = point.event if point is not None else None
    if s.cached < s.predicted:
        b = s.cached // block_size
        last = point.missing_last if point is not None else None
        if last is not None and last[0] == REMOVED:
            ago = (t.ts - last[1].ts) if t is not None else 0.0
            return (f"block removed before reuse: block {b} of this prompt was evicted by the engine (BlockRemoved, "
                    f"batch {last[1].seq}, {ago:.3f} s before this request was scheduled in batch "
                    f"{t.seq if t else '?'}); the model still held it")
        # registrations from the scheduling point on (the request's own registration is the point itself)
        later = [e for e in stores.get(chain[b], ()) if t is None or (e.seq, e.index) >= (t.seq, t.index)] if b < len(chain) else []
        if later:
            e = later[0]
            mine = _parse_tag(e.tag) == (s.pass_name, s.position)
            return (f"not registered yet: block {b} was not cached when the engine scheduled this request (batch "
                    f"{t.seq if t else '?'}); {'it registered the block itself' if mine else _who(e.tag) + ' registered it'}"
                    f" (BlockStored, batch {e.seq}): the engine ran it before the request that registers the block in "
                    "our send order")
        return (f"not registered yet: block {b} was not cached when the engine scheduled this request (batch "
                f"{t.seq if t else '?'}) and no request registered it afterwards")
    b = s.predicted // block_size
    regs = [e for e in stores.get(chain[b], ()) if t is None or (e.seq, e.index) < (t.seq, t.index)] if b < len(chain) else []
    if not regs:
        return f"the engine held block {b} with no registration event seen (events lost before batch {t.seq if t else '?'})"
    e = regs[-1]
    other = by_key.get(_parse_tag(e.tag) or ("", -1))
    if other is not None and other.t_send >= s.t_send:
        return (f"a concurrent request registered first: block {b} was registered by {_who(e.tag)} (BlockStored, "
                f"batch {e.seq}), sent after this one but scheduled before it")
    return (f"kept by the engine: block {b} (registered by {_who(e.tag)}, BlockStored batch {e.seq}) was still "
            f"cached when this request was scheduled (batch {t.seq if t else '?'}); the model had evicted it")


def engine_survival(events: Sequence[KVEvent], block_size: int, capacity_blocks: int | None) -> Survival:
    """The engine's real reuse gaps and block residency from ``events`` (engine clock, seconds),
    in :class:`~prefixcache.analyzer.cache.simulate.survival.Survival`'s format (one ``all``
    row each; residency label ``engine``). A stay runs from the registration of a block copy
    to its ``BlockRemoved`` (copies of one hash leave first in, first out); a stay cut by
    ``AllBlocksCleared`` (a cache reset, not an eviction) or by the end of the events is
    observed until then and counts as surviving that long. A use is a registration or a
    reuse report; a reuse gap is the time since the block's previous use."""
    ledger = Ledger(block_size)
    open_: dict[int, deque[float]] = {}
    stays: list[tuple[float, float | None, float]] = []  # start, evicted at, observed until
    last_use: dict[int, float] = {}
    gaps: list[float] = []
    end = events[-1].ts if events else 0.0
    for e in events:
        ours = ledger.map(e) if e.type == STORED else None
        report = ledger.is_report(e, ours)
        if e.type == STORED and ours is not None:
            for h in ours:
                if h in last_use:
                    gaps.append(e.ts - last_use[h])
                last_use[h] = e.ts
                if not report:
                    open_.setdefault(h, deque()).append(e.ts)
        elif e.type == REMOVED:
            for eh in e.hashes:
                h = ledger.ours.get(eh)
                q = open_.get(h) if h is not None else None
                if q:
                    start = q.popleft()
                    stays.append((start, e.ts, e.ts))
        elif e.type == CLEARED:
            for q in open_.values():
                stays.extend((start, None, e.ts) for start in q)
            open_.clear()
        ledger.apply(e, ours, report)
    for q in open_.values():
        stays.extend((start, None, end) for start in q)
    evicted = [b - a for a, b, _ in stays if b is not None]
    row = ResidencyRow("engine", capacity_blocks, "engine", None, "all", len(stays), Distribution.of(evicted),
                       sum(b is None for _, b, _ in stays), _curve(stays))
    g = np.asarray(gaps, dtype=float)
    return Survival(block_size, list(T_POINTS), [gap_row("all", g)], 0, [], [row])


def _curve(stays: Sequence[tuple[float, float | None, float]]) -> list[TimePoint]:
    """S(t): of the stays observed at least ``t`` seconds (or evicted within them), the fraction
    not evicted within ``t``."""
    out = []
    for t in T_POINTS:
        risk = [(a, b) for a, b, seen in stays if (b is not None and b - a <= t) or seen - a >= t]
        alive = sum(b is None or b - a > t for a, b in risk)
        out.append(TimePoint(t, round(alive / len(risk), 6) if risk else None, len(risk)))
    return out


__all__ = ["EventCheck", "GapRow", "Ledger", "Sent", "engine_survival", "explain", "kv_report", "reconcile", "tag_of"]


def kv_report(endpoint: str, sub: KVEventSubscriber, rows: Sequence, ids: dict[tuple[str, int], tuple[int, ...]],
              block_size: int, capacity_blocks: int | None, file: str | None
              ) -> tuple[KVEventsReport, dict[tuple[str, int], str]]:
    """The :class:`~prefixcache.replay.document.KVEventsReport` of a run and the named event behind
    each request's difference (``{(pass, position): fact}``). ``rows``: the run's
    :class:`~prefixcache.analyzer.replay_rows.ServerRow` (successful ones of the cache passes are
    checked); ``ids``: our prompt token ids by ``(pass, position)``."""
    events = sub.events
    latest = {(r.pass_name, r.position): r for r in rows}
    sent = [Sent(r.pass_name, r.position, ids[(r.pass_name, r.position)], r.t_send, r.cached_tokens,
                 r.predicted_cached) for r in latest.values() if r.ok and r.pass_name != "cold"
            and (r.pass_name, r.position) in ids]
    checks = reconcile(sent, events, block_size)
    by_pass: dict[str, list[int]] = {}
    for c in checks:
        acc = by_pass.setdefault(c.pass_name, [0, 0])
        acc[0] += c.accounted
        acc[1] += 1
    types = Counter(e.type for e in events)
    ledger = Ledger(block_size)
    for e in events:
        ledger.apply(e, ledger.map(e) if e.type == STORED else None)
    report = KVEventsReport(endpoint=endpoint, batches=sub.batches, events=len(events), stored=types[STORED],
                            removed=types[REMOVED], cleared=types[CLEARED], missing_batches=sub.missing,
                            unmapped_blocks=ledger.unmapped, requests=len(checks),
                            accounted=sum(c.accounted for c in checks), by_pass=by_pass, file=file,
                            survival=engine_survival(events, block_size, capacity_blocks))
    return report, {(c.pass_name, c.position): c.fact for c in checks if c.fact}
