"""The reuse analyses ``simulate`` adds on request: reuse in time, the TTL what-if, the chunk ceiling.

Provider caches always add ``provider_calls`` (:mod:`.provider_calls`) when calls report
cached tokens. ``--survival`` (:mod:`.survival`), ``--ttl-whatif`` (:mod:`.ttl_whatif`) and ``--reuse
prefix,chunks`` (:mod:`.chunks`) each fill one part of :class:`Analyses`; the document is then
:class:`SimulateReportWithAnalyses` (``--per-request`` too:
:class:`SimulateReportWithRequestsAndAnalyses`): the ``simulate`` document plus ``analyses``,
the parts not asked for null. Without any of them the document is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.provider.rules import ProviderRules
from prefixcache.analyzer.cache.simulate.chunks import ChunkReuse, chunk_reuse
from prefixcache.analyzer.cache.simulate.provider_calls import ProviderCalls
from prefixcache.analyzer.cache.simulate.document import SimulateReport, SimulateReportWithRequests
from prefixcache.analyzer.cache.simulate.simulator import Baseline
from prefixcache.analyzer.cache.simulate.sizing import Sizing, sizing
from prefixcache.analyzer.cache.simulate.survival import Survival, survival
from prefixcache.analyzer.cache.simulate.ttl_whatif import TtlWhatIf, ttl_whatif
from prefixcache.analyzer.cache.workload import SimRequest

#: ``--reuse`` names: the prefix ceiling (always shown) and the position-independent chunk ceiling.
REUSE_KINDS = ("prefix", "chunks")


@dataclass(frozen=True, slots=True)
class Analyses:
    """The analyses asked for (null when not): ``survival`` (reuse gaps, residency, survival
    curves), ``ttl_whatif`` (every retention priced, with advice) and ``chunks`` (the
    chunk ceiling beside the prefix ceiling); ``provider_calls``: provider caches only, always
    present when calls report cached tokens (every call classified, :mod:`.provider_calls`);
    ``sizing``: the smallest self-hosted LRU cache reaching ``--sizing`` of the ideal (:mod:`.sizing`)."""

    survival: Survival | None
    ttl_whatif: TtlWhatIf | None
    chunks: ChunkReuse | None
    provider_calls: ProviderCalls | None = None
    sizing: Sizing | None = None


@dataclass(frozen=True, slots=True)
class SimulateReportWithAnalyses(SimulateReport):
    """The ``simulate --json`` document with ``--survival``, ``--ttl-whatif`` or ``--reuse
    prefix,chunks``: :class:`~.document.SimulateReport` plus :class:`Analyses`."""

    analyses: Analyses


@dataclass(frozen=True, slots=True)
class SimulateReportWithRequestsAndAnalyses(SimulateReportWithRequests):
    """:class:`SimulateReportWithAnalyses` with ``--per-request``'s rows."""

    analyses: Analyses


def run_analyses(reqs: Sequence[SimRequest], spec: CacheSpec, caps: Sequence[tuple[str, int | None]],
                 base: Baseline, rules: ProviderRules | None, *, survival_on: bool, ttl_on: bool, chunks_on: bool,
                 recompute: float, window: int | None, causes: Mapping[int, str] | None = None,
                 size_for: float | None = None, kv_bytes_per_token: int | None = None) -> Analyses:
    """The analyses asked for over ``reqs`` (arrival order) under ``spec`` (the first result
    row's policy and TTL) at ``caps`` (``(label, blocks or None)``, the run's capacities);
    ``rules``: the priced cache's rules (None for engines); ``size_for``: the sizing target
    (a fraction of the ideal; None: no sizing), ``kv_bytes_per_token`` its bytes."""
    bs = spec.block_size_for(reqs)
    ttl = spec.model_class().ttl_of(spec)
    return Analyses(
        survival(reqs, bs, caps, spec.policy, ttl) if survival_on else None,
        ttl_whatif(reqs, spec, caps[0], base, rules, causes) if ttl_on else None,
        chunk_reuse(reqs, base.lcp, recompute, window) if chunks_on else None,
        sizing=sizing(reqs, spec, size_for, kv_bytes_per_token) if size_for is not None else None)


def with_analyses(report: SimulateReport, analyses: Analyses) -> SimulateReport:
    """``report`` as the document that carries ``analyses``."""
    fields = {f: getattr(report, f) for f in report.__dataclass_fields__}
    cls = SimulateReportWithRequestsAndAnalyses if isinstance(report, SimulateReportWithRequests) else \
        SimulateReportWithAnalyses
    return cls(**fields, analyses=analyses)


__all__ = ["REUSE_KINDS", "Analyses", "SimulateReportWithAnalyses", "SimulateReportWithRequestsAndAnalyses",
           "run_analyses", "with_analyses"]
