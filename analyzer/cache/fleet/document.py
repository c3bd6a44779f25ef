"""The ``simulate --replicas N --json`` document as library types.

Every type is a frozen dataclass whose fields are the JSON keys in output order, with
JSON-ready values (ratios rounded to 6 places, seconds to 6). Counts are tokens unless
named requests or blocks. One hit-ratio denominator across every arm: the prompt
tokens of all requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.cache.simulate.document import Summary
from prefixcache.analyzer.cache.fleet.timing import Hardware
from prefixcache.analyzer.stats import Distribution


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    """The fit of ``--calibrate``: TTFT = overhead + computed tokens / prefill tok/s over
    a replay run's rows, its mean absolute (seconds) and relative errors, and R²."""

    path: str
    rows: int
    prefill_tok_s: float
    overhead_s: float
    mean_abs_error_s: float
    mean_rel_error: float
    r2: float


@dataclass(frozen=True, slots=True)
class TierRow:
    """One KV tier of each replica: size as given, in blocks, link (bytes/s; null for the
    GPU) and restore latency (seconds)."""

    name: str
    size: str
    blocks: int | None
    bandwidth_bytes_per_s: float | None
    latency_s: float


@dataclass(frozen=True, slots=True)
class RouterRow:
    """One routing policy: tokens cached (restored from lower tiers included), the
    decomposition (``ceiling − capacity_loss − routing_loss = cached``: capacity loss =
    ceiling − a shared cache of the fleet's total size; routing loss = that − cached,
    negative when the partitioned fleet beats the pooled cache), lost tokens by cause
    (per request, :mod:`.fleet`), the TTFT distribution (``ttft``, seconds, 6 decimals:
    :class:`~prefixcache.analyzer.stats.Distribution`) and mean queue wait (seconds), load
    imbalance (max / mean over replicas of summed queue wait, null when nobody waited;
    and of requests), and the requests each replica served. ``ttft_p50_s`` /
    ``ttft_p95_s`` / ``ttft_p99_s`` are ``ttft.p50`` / ``p95`` / ``p99`` under their old
    flat names (0 without requests): deprecated, kept for one release."""

    router: str
    cached_tokens: int
    restored_tokens: int
    hit_ratio_tokens: float
    capacity_loss_tokens: int
    routing_loss_tokens: int
    lost_tokens_by_cause: dict[str, int]
    ttft: Distribution
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    mean_queue_s: float
    restore_s: float
    queue_imbalance: float | None
    request_imbalance: float
    requests_per_replica: list[int]


@dataclass(frozen=True, slots=True)
class FleetReport:
    """The ``simulate --replicas N --json`` document: the fleet (cache, eviction policy,
    replicas, per-replica capacity, arrivals, hardware, calibration, tiers), the
    workload ceiling (one unbounded shared cache) and the pooled cache (one cache of the
    fleet's total size, same tiers), one row per routing policy, and ``warnings``: a
    per-replica capacity that cannot hold one request (:func:`~.document.capacity_warning`)."""

    cache: str
    policy: str
    block_size: int
    unique_blocks: int
    replicas: int
    capacity: str
    capacity_blocks: int | None
    arrivals: str
    hardware: Hardware
    calibration: CalibrationRow | None
    tiers: list[TierRow]
    requests: int
    prompt_tokens: int
    ceiling_tokens: int
    ceiling_hit_ratio: float
    pooled_tokens: int
    pooled_hit_ratio: float
    results: list[RouterRow]
    tokenizers: dict[str, str]
    warnings: list[str]
    summary: Summary
