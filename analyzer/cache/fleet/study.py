"""A fleet study: :class:`FleetOptions` and the arms → :class:`~.fleet.document.FleetReport`.

Arms, all over the same requests (one hit-ratio denominator): the workload ceiling
(one unbounded shared cache, :func:`~.simulator.simulate_stream`), the pooled cache (one
replica with the fleet's whole memory and tiers, :meth:`~.fleet.Arm.pooled`), and
the fleet behind each ``--router``. The cache, eviction policy, block size, TTL and
per-replica capacity come from the :class:`~.study.SimulateOptions` (one policy and
one capacity); ``--tiers gpu=SIZE`` sets the capacity instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.capacity import Capacity, KVShape
from prefixcache.analyzer.cache.fleet.replicas import FLEET_CACHES, Arm, Served, fleet_lost, run_fleet
from prefixcache.analyzer.cache.fleet.document import CalibrationRow, FleetReport, RouterRow, TierRow
from prefixcache.analyzer.cache.simulate.figures import CAUSES
from prefixcache.analyzer.cache.models import CacheSpec, lru_stack_order
from prefixcache.analyzer.cache.simulate.document import Summary, capacity_warning, r6
from prefixcache.analyzer.cache.fleet.routing import parse_routers
from prefixcache.analyzer.cache.simulate.sweeps import distinct_blocks, sweep_block_cache
from prefixcache.analyzer.cache.simulate.simulator import baseline, simulate_stream
from prefixcache.analyzer.cache.simulate.arms import map_arms
from prefixcache.analyzer.cache.simulate.study import SimulateOptions
from prefixcache.analyzer.cache.fleet.tiers import TierSpec, parse_tiers
from prefixcache.analyzer.cache.index.trace_sessions import TraceSessions
from prefixcache.analyzer.cache.fleet.timing import DEFAULT_HARDWARE, Fit, Hardware, ReplicaClock, calibration_of, hardware
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.stats import Distribution
from prefixcache.analyzer.ingest import IngestSummary

#: ``lost_tokens_by_cause`` keys of a fleet row, in order.
FLEET_CAUSES = (*CAUSES, "routing", "tier_restore_slower")


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """The fleet: ``replicas`` ≥ 1, ``routers`` (``--router`` text), ``hardware`` preset,
    ``calibrate`` (a replay results JSONL path), ``tiers`` (``--tiers`` text), ``rate``
    (requests/s replacing the logged arrival times; > 0), ``seed`` (``random``).
    ConfigError names the first bad value."""

    replicas: int = 1
    routers: str = "round-robin"
    hardware: str = DEFAULT_HARDWARE
    calibrate: str | None = None
    tiers: str | None = None
    rate: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ConfigError(f"--replicas must be at least 1, got {self.replicas}")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"--rate must be positive, got {self.rate}")
        parse_routers(self.routers)
        hardware(self.hardware)
        if self.tiers:
            parse_tiers(self.tiers)


def _arrivals(reqs: Sequence[SimRequest], rate: float | None) -> list[float]:
    if rate:
        return [i / rate for i in range(len(reqs))]
    t0 = reqs[0].now if reqs else 0.0
    return [r.now - t0 for r in reqs]


def _imbalance(xs: Sequence[float]) -> float | None:
    mean = sum(xs) / len(xs) if xs else 0.0
    return round(max(xs) / mean, 6) if mean > 0 else None


def router_row(name: str, served: Sequence[Served], clocks: Sequence[ReplicaClock], ceiling, prompt: int,
               pooled: int) -> RouterRow:
    """One router's row from its served requests and the ceiling's per-request figures."""
    lost = {k: 0 for k in FLEET_CAUSES}
    for s, f in zip(served, ceiling):
        for k, v in fleet_lost(f.lost, f.cached_tokens, s).items():
            lost[k] += v
    cached = sum(s.cached for s in served)
    ceil = sum(f.cached_tokens for f in ceiling)
    ttft = Distribution.of(s.ttft_s for s in served)
    n = len(served) or 1
    per = [c.requests for c in clocks]
    return RouterRow(name, cached, sum(s.restored for s in served), r6(cached / prompt if prompt else 0.0),
                     ceil - pooled, pooled - cached, lost, ttft, *ttft.flat(), round(sum(s.wait_s for s in served) / n, 6),
                     round(sum(s.restore_s for s in served), 6), _imbalance([c.wait_s for c in clocks]),
                     _imbalance(per) or 0.0, per)


def _tiers(specs: Sequence[TierSpec], bs: int, uniq: int, bpt: int) -> list[int]:
    caps = [t.size.blocks(bs, uniq, bpt) for t in specs]
    empty = next((t.name for t, b in zip(specs, caps) if b == 0), None)
    if empty:
        raise ConfigError(f"--tiers {empty}: 0 blocks of {bs} tokens ({bpt:,} KV bytes per token)")
    return caps


def _spec(items: Sequence, options: SimulateOptions) -> CacheSpec:
    """The one cache spec of a fleet; ConfigError for what a fleet cannot run (a provider
    cache, several policies or capacities, belady, ``--in-flight``)."""
    if options.cache not in FLEET_CACHES:
        raise ConfigError(f"--replicas needs an engine cache ({', '.join(FLEET_CACHES)}), not --cache {options.cache}")
    runs = options.runs()
    if len(runs) != 1 or len(options.capacities) > 1 or runs[0][0] == "belady":
        raise ConfigError("--replicas takes one --policy (not belady) and one --capacity (per replica)")
    if options.in_flight != 1:
        raise ConfigError("--replicas models concurrency with its own clock: drop --in-flight")
    model = next((p.request.model for p in items if p.request.model), None)
    return replace(options.spec(model), policy=runs[0][0], ttl_s=runs[0][1])


def _arm(options: SimulateOptions, fleet: FleetOptions, hw: Hardware, bs: int, uniq: int,
         bpt: int, links: Mapping[str, tuple[float, float]] | None = None) -> tuple[Arm, tuple[TierSpec, ...],
                                                                                  Capacity | None]:
    """The fleet's arm (per-replica capacity from ``--tiers gpu=`` or ``--capacity``),
    its tiers (``links``: measured tier links, ``--calibrate``) and the capacity as given."""
    tiers = parse_tiers(fleet.tiers, links) if fleet.tiers else ()
    if tiers and options.capacities:
        raise ConfigError("--tiers gpu=SIZE is the replica capacity: drop --capacity")
    cap = tiers[0].size if tiers else (options.capacities[0] if options.capacities else None)
    cap_blocks = cap.blocks(bs, uniq, bpt) if cap else None
    if cap_blocks == 0:
        raise ConfigError(f"capacity {cap.text}: 0 blocks of {bs} tokens here; a cache needs at least one")
    lower = _tiers(tiers[1:], bs, uniq, bpt)
    return Arm(fleet.replicas, cap_blocks, hw, tuple(tiers[1:]), tuple(lower), bpt * bs), tiers, cap


def inferred_sessions(reqs: Sequence[SimRequest]) -> Sequence[SimRequest]:
    """``reqs`` (arrival order) with the requests of sessionless block traces (Mooncake:
    ``infer_session``) renamed to the sessions lint infers from their hash chains
    (:class:`~.trace_sessions.TraceSessions`), so that the ``session`` routers have sessions
    to stick to (else the whole trace is one session on one replica). The drift the
    simulator attributes is unchanged: it keys the same inferred sessions."""
    if not any(r.infer_session for r in reqs):
        return reqs
    sessions = TraceSessions()
    return [replace(r, session=sessions.assign(r.hashes or (), r.session, r.block_size)[0], infer_session=False)
            if r.infer_session else r for r in reqs]


def fleet_report(items: Sequence, reqs: Sequence[SimRequest], options: SimulateOptions, fleet: FleetOptions,
                 shape: KVShape | None, summary: IngestSummary, notes: Mapping[str | None, str],
                 causes: Mapping[int, str] | None = None, fit: Fit | None = None,
                 links: Mapping[str, tuple[float, float]] | None = None) -> FleetReport:
    """The fleet report of ``options`` × ``fleet`` over prepared ``items`` and their
    simulator requests ``reqs`` (arrival order). ``fit`` and ``links``: the calibration (prefill
    fit, measured tier links), when the caller already read ``fleet.calibrate``
    (:func:`~.timing.calibration_of`). ConfigError for a setting the fleet cannot
    run (:func:`_spec`, :func:`_arm`); InputError for an unreadable calibration file."""
    reqs = inferred_sessions(reqs)
    spec = _spec(items, options)
    bs = spec.block_size_for(reqs)
    base = baseline(reqs)
    uniq = distinct_blocks(reqs, spec, bs, base)
    if fit is None and fleet.calibrate:
        fit, links = calibration_of(fleet.calibrate)
    hw = fit.apply(hardware(fleet.hardware)) if fit else hardware(fleet.hardware)
    bpt = shape.bytes_per_token if shape else hw.kv_bytes_per_token
    arm, tiers, cap = _arm(options, fleet, hw, bs, uniq, bpt, links)
    arrivals, outputs = _arrivals(reqs, fleet.rate), _outputs(items, reqs)
    ceiling = _ceiling(reqs, spec, bs, base, causes or {})
    prompt, ceil = sum(r.num_tokens for r in reqs), sum(f.cached_tokens for f in ceiling)
    pooled = sum(s.cached for s in run_fleet(reqs, spec, bs, arm.pooled(), "round-robin", None, arrivals,
                                             outputs, fleet.seed)[0])
    shared = RouterShared(reqs, spec, bs, arm, arrivals, outputs, fleet.seed, ceiling, prompt, pooled)
    rows = map_arms(router_arm, shared, parse_routers(fleet.routers), options.executor)  # each router an arm
    rows = [_oracle(row, rows) if row.router == "oracle" else row for row in rows]
    return FleetReport(
        spec.cache, spec.policy, bs, uniq, fleet.replicas, cap.text if cap else "unbounded", arm.capacity_blocks,
        f"rate {fleet.rate:g}/s" if fleet.rate else "logged",
        replace(hw, kv_bytes_per_token=bpt),
        CalibrationRow(str(fleet.calibrate), fit.rows, fit.prefill_tok_s, fit.overhead_s, fit.mean_abs_error_s,
                       fit.mean_rel_error, fit.r2) if fit else None,
        [TierRow(t.name, t.size.text, b, t.bandwidth, t.latency_s)
         for t, b in zip(tiers, [arm.capacity_blocks, *arm.tier_blocks])],
        len(reqs), prompt, ceil, r6(ceil / prompt if prompt else 0.0), pooled, r6(pooled / prompt if prompt else 0.0),
        rows, {(k or "(no model name)"): v for k, v in notes.items()},
        [w for w in [capacity_warning(spec.cache, f"{cap.text} per replica", arm.capacity_blocks, bs, reqs)] if w]
        if cap and arm.capacity_blocks is not None else [],
        Summary(summary.files, summary.records, summary.requests, summary.sessions, len(summary.skipped)))


@dataclass(frozen=True, slots=True)
class RouterShared:
    """What every router of a fleet study reads (:func:`router_arm`): the requests (arrival order),
    the cache spec, block size (tokens), the fleet arm, arrival times (seconds) and output tokens per
    request, the seed of ``random``, the ceiling's per-request figures, the prompt tokens and the
    pooled cache's cached tokens."""

    reqs: Sequence[SimRequest]
    spec: CacheSpec
    block_size: int
    arm: Arm
    arrivals: Sequence[float]
    outputs: Sequence[int]
    seed: int
    ceiling: Sequence
    prompt: int
    pooled: int


def router_arm(sh: RouterShared, router: tuple[str, int | None]) -> RouterRow:
    """One ``--router`` (``(name, parameter)``) of a fleet study as its row: an arm of
    :func:`~..simulate.arms.map_arms` (``simulate --replicas --executor ray``)."""
    name, param = router
    served, clocks = run_fleet(sh.reqs, sh.spec, sh.block_size, sh.arm, name, param, sh.arrivals, sh.outputs, sh.seed)
    return router_row(name if param is None else f"{name}:{param}", served, clocks, sh.ceiling, sh.prompt, sh.pooled)


def _oracle(greedy: RouterRow, rows: Sequence[RouterRow]) -> RouterRow:
    """The ``oracle`` row: the best whole run (most cached tokens) among the greedy
    hindsight routing and every other router of the study, labelled
    ``oracle (ROUTER)`` when another router's run was the better one."""
    best = max((r for r in rows if r.router != "oracle"), key=lambda r: r.cached_tokens, default=greedy)
    if best.cached_tokens <= greedy.cached_tokens:
        return greedy
    return replace(best, router=f"oracle ({best.router})")


def _ceiling(reqs: Sequence[SimRequest], spec, bs: int, base, causes: Mapping[int, str]) -> list:
    """Per-request figures of one unbounded shared cache: for LRU block caches with no
    TTL the one-pass sweep at a capacity no stream can fill (every block of every
    request), else the replay (:func:`~.models.lru_stack_order`)."""
    if lru_stack_order(spec) is not None:
        room = sum(len(r.chain(bs)) for r in reqs) + 1
        rows = sweep_block_cache(reqs, spec, [room], base)[0]
        return [replace(f, drift_cause=causes.get(f.order)) for f in rows]
    return simulate_stream(reqs, spec, None, base, causes)


def _outputs(items: Sequence, reqs: Sequence[SimRequest]) -> list[int]:
    """Output tokens of each request (the log's usage; 0 when not logged)."""
    out: dict[tuple, int] = {}
    for p in items:
        r = p.request
        u = r.usage
        out[(r.provenance.source, r.provenance.record, r.session, r.index)] = (u.output_tokens or 0) if u else 0
    return [out.get((r.source, r.record, r.session, r.index), 0) for r in reqs]
