"""Replay a request stream through a cache model and measure every request.

Requests (:class:`~.workload.SimRequest`, in arrival order with a logical clock) are
stepped through the model of ``--cache`` (:mod:`.models`). Besides the cache itself,
shadow copies with no capacity (and no expiry) give each request's ideal and
TTL-only levels; with the cache-independent :func:`baseline` (longest prefix shared
with any earlier request, drift extent) they form the chain of levels from which
:func:`~.figures.lost_by_cause` splits the lost tokens.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from prefixcache.analyzer.cache.simulate.figures import Levels, RequestFigures, hits_by_segment, lost_by_cause
from prefixcache.analyzer.cache.models import CacheModel, CacheSpec, Hit, make_model
from prefixcache.analyzer.cache.index.radix import RadixTree
from prefixcache.analyzer.cache.index.trace_sessions import TraceSessions, chain_break
from prefixcache.analyzer.cache.workload import SimRequest

__all__ = ["Baseline", "baseline", "iter_stream", "request_figures", "simulate_stream"]


@dataclass(frozen=True, slots=True)
class Baseline:
    """Cache-independent levels of each request (tokens): the prefix shared with any
    earlier request, the drift extent, and the distinct tokens of the stream.
    ``depths``: the ``(start, end]`` prompt positions of each edge of the tree of all
    prompts; ``trace_blocks``: distinct block ids of the block traces."""

    lcp: Sequence[int]
    drift_end: Sequence[int]
    unique_tokens: int
    depths: tuple[tuple[int, int], ...] = ()
    trace_blocks: int = 0

    def unique_blocks(self, block_size: int) -> int:
        """Distinct full blocks of ``block_size`` tokens over all prompts (no salt): a
        block is its whole prefix (the chained hash), so they are the distinct prefixes
        whose length is a multiple of ``block_size`` — counted on the tree, no hashing —
        plus the traces' distinct block ids."""
        return self.trace_blocks + sum(end // block_size - start // block_size for start, end in self.depths)


def baseline(reqs: Sequence[SimRequest], trace_overlaps: Sequence[int] | None = None) -> Baseline:
    """Longest prefix each request shares with any earlier one (the unbounded radix
    tree over tokens; for traces, leading previously seen blocks) and how far its
    session's previous request overlapped it (the drift extent, :class:`_TraceDrift`
    for traces). ``trace_overlaps``: the block-trace requests' drift extents in the order of
    ``reqs``, as lint's drift pass found them (``DriftCauses.trace_overlaps``, the same
    session inference and chain break), so the sessions are not inferred twice; ignored
    (inferred here) unless there is one per block-trace request."""
    tree = RadixTree(cap_last_token=False)
    seen: set[int] = set()
    prev_len: dict[str, int] = {}
    if trace_overlaps is not None and len(trace_overlaps) == sum(r.hashes is not None for r in reqs):
        given = iter(trace_overlaps)
        traces = None
    else:
        traces = _TraceDrift()
    lcp, drift = array("q"), array("q")  # 8 bytes a request, not an int object each
    for r in reqs:
        if r.hashes is not None:
            hashes = r.chain(r.block_size)  # the logged ids, flat
            k = 0
            while k < len(hashes) and hashes[k] in seen:
                k += 1
            seen.update(hashes)
            shared = min(r.num_tokens, k * r.block_size)
            overlap = traces.overlap(r) if traces is not None else next(given)
        else:
            shared = tree.share(r.tokens, None, r.now).length
            overlap = min(r.num_tokens, prev_len.get(r.session, 0))
            prev_len[r.session] = r.num_tokens
        lcp.append(shared)
        drift.append(max(shared, overlap))
    uniq = tree.size_tokens + len(seen) * max((r.block_size for r in reqs), default=0)
    return Baseline(lcp, drift, uniq, tuple(tree.depths()), len(seen))


class _TraceDrift:
    """The drift extent of block-trace requests, judged as lint's PC002 judges them: against
    the previous request of the session (inferred from hash chains for sessionless
    formats, :class:`~.trace_sessions.TraceSessions`). A request that does not extend its
    predecessor (:func:`~.trace_sessions.chain_break`) overlaps it up to the
    predecessor's length (tokens); one that extends it (a changed partial last block
    included: those tokens are shared, the block was only filling up) has no drift."""

    def __init__(self) -> None:
        self._sessions = TraceSessions()
        self._last: dict[str, SimRequest] = {}

    def overlap(self, r: SimRequest) -> int:
        hashes = r.chain(r.block_size) if r.hashes is not None else ()  # flat ids
        key = self._sessions.assign(r.hashes or (), r.session, r.block_size)[0] if r.infer_session else r.session
        q = self._last.get(key)
        self._last[key] = r
        if q is None or chain_break(hashes, q.chain(q.block_size) if q.hashes is not None else (), q.num_tokens,
                                    q.block_size) is None:
            return 0
        return min(r.num_tokens, q.num_tokens)


def simulate_stream(reqs: Sequence[SimRequest], spec: CacheSpec, capacity_blocks: int | None = None,
                    base: Baseline | None = None,
                    drift_causes: Mapping[int, str] | None = None) -> list[RequestFigures]:
    """Run ``reqs`` through the cache of ``spec`` with ``capacity_blocks`` (None =
    unbounded) and return one :class:`RequestFigures` per request, in time order.
    ``drift_causes`` (request order → rule code) names why a request drifted."""
    return list(iter_stream(reqs, spec, capacity_blocks, base, drift_causes))


def iter_stream(reqs: Sequence[SimRequest], spec: CacheSpec, capacity_blocks: int | None = None,
                base: Baseline | None = None,
                drift_causes: Mapping[int, str] | None = None) -> Iterator[RequestFigures]:
    """:func:`simulate_stream` one request at a time: each :class:`RequestFigures` is yielded
    as its request is stepped, so a caller that only sums them (:func:`~.figures.totals`)
    holds none."""
    block_size = spec.block_size_for(reqs)
    base = base or baseline(reqs)
    expires = spec.model_class().ttl_of(spec) is not None
    main = make_model(spec, block_size, capacity_blocks)
    ideal_m = make_model(spec, block_size, None, expire=False) if (capacity_blocks is not None or expires) else None
    # the same capacity without expiry: what expiry alone loses once capacity has taken its share
    cap_m = make_model(spec, block_size, capacity_blocks, expire=False) if (expires and capacity_blocks is not None) else None
    causes = drift_causes or {}
    for i, r in enumerate(reqs):
        hit = main.step(r)
        ideal = ideal_m.step(r).cached_tokens if ideal_m else hit.cached_tokens
        cap_only = cap_m.step(r).cached_tokens if cap_m else (ideal if capacity_blocks is None else hit.cached_tokens)
        yield _measure(main, r, base, i, hit, ideal, cap_only, causes.get(i))


def _measure(model: CacheModel, r: SimRequest, base: Baseline, i: int, hit: Hit, ideal: int, cap_only: int,
             drift_cause: str | None) -> RequestFigures:
    """The figures of request ``i`` from its levels (the granular one from ``model``)."""
    lcp = base.lcp[i]
    lv = Levels(r.num_tokens, lcp, base.drift_end[i], model.granular(r, lcp), ideal, cap_only, hit.cached_tokens)
    return request_figures(r, model.block_size, hit, ideal, lost_by_cause(lv), drift_cause, lcp)


def request_figures(r: SimRequest, block_size: int, hit: Hit, ideal: int, lost: dict[str, int],
                    drift_cause: str | None, shared: int = 0) -> RequestFigures:
    """One request's :class:`RequestFigures` (blocks counted in ``block_size`` tokens;
    a trace's partial last block counts as hit when any of it is)."""
    cached = hit.cached_tokens
    blocks_total = len(r.hashes) if r.hashes is not None else -(-r.num_tokens // block_size)
    trace = r.hashes is not None
    return RequestFigures(
        order=r.order, session=r.session, source=r.source, record=r.record,
        prompt_tokens=r.num_tokens, cached_tokens=cached, ideal_tokens=ideal,
        blocks_total=blocks_total,
        blocks_hit=-(-cached // block_size) if trace else cached // block_size,
        written_tokens=hit.written_tokens, write_multiplier=hit.write_multiplier, shared_tokens=shared, lost=lost,
        segments=hits_by_segment(r.spans, cached) if r.spans else {},
        reported_prompt_tokens=r.reported_prompt, reported_cached_tokens=r.reported_cached,
        drift_cause=drift_cause, ideal_blocks=-(-ideal // block_size) if trace else ideal // block_size)
