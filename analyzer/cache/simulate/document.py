"""The ``simulate`` document as library types: ``orjson.dumps(report)`` is ``--json``.

Every type is a frozen dataclass whose fields are the JSON keys in output order, with
JSON-ready values (ratios rounded to 6 places, errors to 1, costs to 6 USD places).
Counts are tokens unless named blocks, bytes, calls or requests. The builders here
turn :mod:`.figures` into rows; :mod:`.study` assembles the whole report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median_low
from typing import Sequence

from prefixcache.analyzer.cache.base import floor_blocks
from prefixcache.analyzer.cache.simulate.figures import (
    ReportedUsage, RequestCounts, RequestFigures, Totals, calibrated_cached, reported_usage, totals,
)
from prefixcache.analyzer.cache.models import traits_for
from prefixcache.analyzer.cache.provider.cost import Prices, cost_usd
from prefixcache.analyzer.cache.provider.rules import ProviderRules, rules_for
from prefixcache.analyzer.cache.simulate.bands import Band, bands
from prefixcache.analyzer.cache.simulate.shards import SampledCurve
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.model import Usage


@dataclass(frozen=True, slots=True)
class OfflineBound:
    """Belady MIN at one capacity, both variants in both units (:mod:`.bounds`):
    ``pinned`` keeps the request in flight (what an engine can do), ``unpinned`` lets
    every block compete. ``bound`` names the variant with more cached tokens, whose
    per-request figures the row carries; ``bound_hit_ratio_*`` are the larger of the two
    in each unit (the offline bound an online policy is compared with)."""

    pinned_hit_ratio_tokens: float
    pinned_hit_ratio_blocks: float
    unpinned_hit_ratio_tokens: float
    unpinned_hit_ratio_blocks: float
    bound: str
    bound_hit_ratio_tokens: float
    bound_hit_ratio_blocks: float


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One policy × capacity: hit ratios, ideal, avoided prefill, lost tokens by cause.
    ``ttl_s``: idle expiry the cache applied (seconds; null: none). Every ratio comes in
    both units with its own ideal: ``*_tokens`` are token-weighted (cached / prompt
    tokens), ``*_blocks`` block-weighted (hit / prompt blocks); ``ideal_hit_ratio`` and
    ``fraction_of_ideal`` are the token ones under their old names (deprecated).
    ``offline_bound``: the Belady rows' two variants (null for other policies)."""

    cache: str
    policy: str
    ttl_s: float | None
    capacity: str
    capacity_blocks: int | None
    block_size: int
    capacity_tokens: int | None
    capacity_bytes: int | None
    requests: int
    prompt_tokens: int
    cached_tokens: int
    hit_ratio_tokens: float
    hit_ratio_blocks: float
    request_hit_rate: float
    ideal_hit_ratio: float
    fraction_of_ideal: float
    ideal_hit_ratio_tokens: float
    ideal_hit_ratio_blocks: float
    fraction_of_ideal_tokens: float
    fraction_of_ideal_blocks: float
    avoided_prefill_tokens: int
    written_tokens: int
    lost_tokens_by_cause: dict[str, int]
    hits_by_segment: dict[str, int]
    drift_by_rule: dict[str, int]
    offline_bound: OfflineBound | None = None


@dataclass(frozen=True, slots=True)
class CallRow:
    """One logged call with the provider's reported cached tokens, next to ours: predicted
    (our tokens), calibrated (mapped into the provider's count), and the provider rule's
    band ``[lagged, expected]`` (``rule``: one of :data:`~.bands.RULES` — ``in-thread``,
    ``simulated``, or a first call reading only a hidden prefix whose size an earlier call measured,
    ``hidden-prefix-measured``, or did not, ``hidden-prefix-unsized``: band 0 to our size; ``usage-confirmed``
    and ``in-thread-idle``, whose band is 0 to expected, :mod:`.bands`);
    next to the provider's own verdict when the log has one (``provider_verdict``: Anthropic
    ``diagnostics`` / OpenAI ``prompt_cache_diagnostics`` reason, ``provider_missed_tokens``
    its estimate), our cause: ``drift_cause`` (lint rule code) and ``shared_tokens`` (the
    token offset where the prompt leaves everything sent before it, our tokens)."""

    session: str
    source: str
    record: int
    prompt_tokens: int
    reported_prompt_tokens: int | None
    predicted_cached_tokens: int
    calibrated_cached_tokens: int
    reported_cached_tokens: int
    warm_before_log: bool
    rule: str
    lagged_cached_tokens: int
    expected_cached_tokens: int
    inside_band: bool
    shared_tokens: int
    drift_cause: str | None
    provider_verdict: str | None
    provider_missed_tokens: int | None


@dataclass(frozen=True, slots=True)
class Agreement:
    """Predicted vs reported cached tokens over the calls (within ``tolerance_tokens``).
    ``*_exact``: equal to the reported count; ``expected_*``: the provider rule's
    expected count (:mod:`.bands`); ``inside_band``: calls whose reported count
    lies in ``[lagged, expected]``; ``in_thread_calls``: calls the in-thread rule applied to."""

    calls: int
    tolerance_tokens: int
    within_tolerance: int
    agreement: float
    calibrated_within_tolerance: int
    calibrated_agreement: float
    mean_abs_error_tokens: float
    calibrated_mean_abs_error_tokens: float
    warm_before_log: int
    reported_cached_tokens: int
    predicted_cached_tokens: int
    exact: int
    calibrated_exact: int
    expected_exact: int
    expected_within_tolerance: int
    inside_band: int
    in_thread_calls: int
    in_thread_exact: int


@dataclass(frozen=True, slots=True)
class ModelCost:
    """One logged model's calls priced by that model's own row (:mod:`..provider.prices`):
    ``requests``; the row's input price (USD/MTok), read / write multipliers, source and
    date; the cost of our predicted hits and of the reported usage (USD; None as in :class:`Cost`)."""

    model: str
    requests: int
    price_input_per_mtok: float
    read_multiplier: float
    write_multiplier: float
    price_source: str
    price_date: str
    usd_with_cache: float | None
    usd_without_cache: float | None
    reported_usd_with_cache: float | None
    reported_usd_without_cache: float | None


@dataclass(frozen=True, slots=True)
class Cost:
    """Provider caches: input cost (USD) of our predicted hits (first result row) and the
    cost the log's reported usage implies, with the prices and rules used (``ttl_s``: the
    retention the first result row applied, seconds: ``--ttl`` or the provider's;
    ``rule_set``: the provider rule set chosen by model name; ``price_source`` /
    ``price_date``: the price table row, :mod:`.prices`; ``send_times_missing``: breakpoint
    caches only, the requests whose send time is not logged — for them every earlier write
    counts as landed, so a thread's first call may be predicted warm; null otherwise).
    Every call is priced by its own model's row: ``by_model`` has one entry per logged model
    (first seen first) and the ``usd_*`` totals are their sums; the price fields above them
    are the first model's."""

    usd_with_cache: float | None
    usd_without_cache: float | None
    reported_usd_with_cache: float | None
    reported_usd_without_cache: float | None
    price_input_per_mtok: float
    read_multiplier: float
    write_multiplier: float
    min_tokens: int
    ttl_s: float
    rule_set: str
    price_source: str
    price_date: str
    send_times_missing: int | None
    by_model: list[ModelCost]


@dataclass(frozen=True, slots=True)
class Reported:
    """What the log's own provider usage says (no simulation), over the calls reporting a
    prompt size; absent (null) when no call reports cached tokens (block traces)."""

    calls: int
    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    hit_ratio: float


@dataclass(frozen=True, slots=True)
class Summary:
    """Ingest counts: files, records, requests, sessions, skipped records."""

    files: int
    records: int
    requests: int
    sessions: int
    skipped: int


@dataclass(frozen=True, slots=True)
class RequestRow(RequestCounts):
    """One request under the first result row's cache (``--per-request``)."""

    written_tokens: int
    lost_tokens_by_cause: dict[str, int]
    hits_by_segment: dict[str, int]
    drift_cause: str | None
    reported_cached_tokens: int | None


@dataclass(frozen=True, slots=True)
class TenantRow:
    """One tenant's requests under the first result row's cache (tokens): the tenant the log
    names (:mod:`prefixcache.analyzer.ingest.tenancy`; None: requests that name none), its
    requests, prompt and simulated cached tokens and their ratio (``hit_ratio``, None without
    prompt tokens), and the log's own reported prompt / cached tokens over its requests that
    report both (``reported_hit_ratio`` None when none does)."""

    tenant: str | None
    requests: int
    prompt_tokens: int
    cached_tokens: int
    hit_ratio: float | None
    reported_prompt_tokens: int
    reported_cached_tokens: int
    reported_hit_ratio: float | None


@dataclass(frozen=True, slots=True)
class SimulateReport:
    """The ``simulate --json`` document: one cache, every policy × capacity, the calls
    predicted vs reported, the provider cost, the log's reported usage; ``warnings``: one
    line per capacity too small for the requests to mean what an engine would do
    (:func:`capacity_warnings`); ``sampled``: the SHARDS LRU curve of ``--sample`` (then
    ``results`` is empty), else None; ``tenants``: the first result row per tenant
    (:func:`tenant_rows`; empty when the log names no tenant)."""

    cache: str
    block_size: int
    unique_blocks: int
    kv_bytes_per_token: int | None
    results: list[ResultRow]
    calls: list[CallRow]
    agreement: Agreement | None
    cost: Cost | None
    usage_only_requests: int
    reported: Reported | None
    tokenizers: dict[str, str]
    warnings: list[str]
    summary: Summary
    sampled: SampledCurve | None
    tenants: list[TenantRow]


@dataclass(frozen=True, slots=True)
class SimulateReportWithRequests(SimulateReport):
    """The ``simulate --json --per-request`` document: :class:`SimulateReport` plus every
    request's figures under the first result row."""

    requests: list[RequestRow]


def tenant_rows(rows: Sequence[RequestFigures], tenants: Sequence[str | None]) -> list[TenantRow]:
    """Per tenant (``tenants[i]`` is the tenant of ``rows[i]``), most requests first; empty when
    no request names a tenant."""
    if not any(t is not None for t in tenants):
        return []
    sums: dict[str | None, list[int]] = {}
    for f, t in zip(rows, tenants):
        s = sums.setdefault(t, [0, 0, 0, 0, 0])
        s[0] += 1
        s[1] += f.prompt_tokens
        s[2] += f.cached_tokens
        if f.reported_prompt_tokens is not None and f.reported_cached_tokens is not None:
            s[3] += f.reported_prompt_tokens
            s[4] += f.reported_cached_tokens
    order = sorted(sums.items(), key=lambda kv: (-kv[1][0], str(kv[0])))
    return [TenantRow(t, n, p, c, r6(c / p) if p else None, rp, rc, r6(rc / rp) if rp else None)
            for t, (n, p, c, rp, rc) in order]


def r6(x: float | None) -> float | None:
    """Round to 6 places (None stays None)."""
    return None if x is None else round(x, 6)


def result_row(cache: str, policy: str, ttl_s: float | None, capacity: str, capacity_blocks: int | None,
               block_size: int, bytes_per_token: int | None, rows: Sequence[RequestFigures],
               bound: OfflineBound | None = None) -> ResultRow:
    """The totals of one policy × capacity run (``capacity`` as given; blocks, tokens and
    bytes derived from ``capacity_blocks``; ``bound``: the Belady variants)."""
    return totals_row(cache, policy, ttl_s, capacity, capacity_blocks, block_size, bytes_per_token, totals(rows), bound)


def totals_row(cache: str, policy: str, ttl_s: float | None, capacity: str, capacity_blocks: int | None,
               block_size: int, bytes_per_token: int | None, t: Totals, bound: OfflineBound | None = None) -> ResultRow:
    """:func:`result_row` from the run's :class:`~.figures.Totals` (the aggregate path: no rows)."""
    cap_tokens = None if capacity_blocks is None else capacity_blocks * block_size
    return ResultRow(
        cache, policy, ttl_s, capacity, capacity_blocks, block_size, cap_tokens,
        None if cap_tokens is None or not bytes_per_token else cap_tokens * bytes_per_token,
        t.requests, t.prompt_tokens, t.cached_tokens, r6(t.hit_ratio_tokens), r6(t.hit_ratio_blocks),
        r6(t.request_hit_rate), r6(t.ideal_hit_ratio), r6(t.fraction_of_ideal), r6(t.ideal_hit_ratio),
        r6(t.ideal_hit_ratio_blocks), r6(t.fraction_of_ideal), r6(t.fraction_of_ideal_blocks), t.avoided_prefill_tokens,
        t.written_tokens, dict(t.lost), dict(t.segments), dict(t.drift_by_cause), bound)


def offline_bound(prompt_tokens: int, blocks_total: int, cached_tokens: tuple[int, int],
                  hit_blocks: tuple[int, int], bound: str) -> OfflineBound:
    """Both Belady variants' totals ``(pinned, unpinned)`` as an :class:`OfflineBound` (ratios
    over ``prompt_tokens`` and ``blocks_total``; ``bound``: the variant the row carries)."""
    tok = [c / prompt_tokens if prompt_tokens else 0.0 for c in cached_tokens]
    blk = [b / blocks_total if blocks_total else 0.0 for b in hit_blocks]
    return OfflineBound(r6(tok[0]), r6(blk[0]), r6(tok[1]), r6(blk[1]), bound, r6(max(tok)), r6(max(blk)))


def call_rows(rows: Sequence[RequestFigures], block_size: int, min_tokens: int,
              reqs: Sequence[SimRequest] = (), rules: ProviderRules | None = None,
              retention: Sequence[float | None] | None = None) -> list[CallRow]:
    """Calls with a reported cached count: predicted, calibrated (mapped into the
    provider's token count, :func:`~.figures.calibrated_cached`), the provider rule's
    band (:func:`~.bands.bands`, from ``reqs`` — the simulated requests, in
    the order of ``rows`` — under ``rules``; without rules the band is the calibrated
    count; ``retention``: each request's logged retention, seconds, :func:`~.bands.bands`) and reported."""
    if all(f.reported_cached_tokens is None for f in rows):
        return []  # nothing to compare (block traces): skip the calibration
    cals = [f.cached_tokens if c is None else c for f, c in zip(rows, calibrated_cached(rows, block_size, min_tokens))]
    got = bands(reqs, cals, rules, [f.cached_tokens for f in rows], retention) if rules is not None and len(reqs) == len(rows) else \
        [Band(c, c, "simulated") for c in cals]
    verdicts = [r.provider_verdict for r in reqs] if len(reqs) == len(rows) else [None] * len(rows)
    out = []
    for f, cal, b, v in zip(rows, cals, got, verdicts):
        if f.reported_cached_tokens is None:
            continue
        rep = f.reported_cached_tokens
        out.append(CallRow(f.session, f.source, f.record, f.prompt_tokens, f.reported_prompt_tokens,
                           f.cached_tokens, cal, rep, f.shared_tokens == 0 and rep > 0,
                           b.rule, b.lagged, b.expected, (0 if b.rule == "in-thread-idle" else b.lagged) <= rep <= b.expected,
                           f.shared_tokens,
                           f.drift_cause, v[0] if v else None, v[1] if v else None))
    return out


def agreement(calls: Sequence[CallRow], tolerance: int) -> Agreement | None:
    """How often predicted (and calibrated) cached tokens are within ``tolerance`` of the
    reported ones, and the mean absolute errors; None without calls."""
    if not calls:
        return None
    n = len(calls)
    pred = [abs(c.predicted_cached_tokens - c.reported_cached_tokens) for c in calls]
    cal = [abs(c.calibrated_cached_tokens - c.reported_cached_tokens) for c in calls]
    exp = [abs(c.expected_cached_tokens - c.reported_cached_tokens) for c in calls]
    within, cal_within = sum(e <= tolerance for e in pred), sum(e <= tolerance for e in cal)
    thread = [e for c, e in zip(calls, exp) if c.rule == "in-thread"]
    return Agreement(n, tolerance, within, round(within / n, 4), cal_within, round(cal_within / n, 4),
                     round(sum(pred) / n, 1), round(sum(cal) / n, 1), sum(c.warm_before_log for c in calls),
                     sum(c.reported_cached_tokens for c in calls), sum(c.predicted_cached_tokens for c in calls),
                     pred.count(0), cal.count(0), exp.count(0), sum(e <= tolerance for e in exp),
                     sum(c.inside_band for c in calls), len(thread), thread.count(0))


def cost(rules: ProviderRules, rows: Sequence[RequestFigures] | None, reported: ReportedUsage | None,
         reqs: Sequence[SimRequest] = (), overrides: dict | None = None) -> Cost:
    """Input cost of the predicted hits (None when nothing was simulated) and of the
    reported usage (None when the log reports none), each call at its own model's prices
    (``rules``: the first model's; ``overrides``: the ``--price-*`` options). With one model
    (or none) in ``reqs`` every call is priced by ``rules`` and ``reported`` is used as given;
    with several, each model's reported usage is summed from its requests' reported counts.
    With the count of ``reqs`` without a logged send time (breakpoint caches)."""
    seen = list(dict.fromkeys(r.model for r in reqs))
    models = seen if len(seen) > 1 and (not rows or len(rows) == len(reqs)) else [None]
    label = seen[0] if len(seen) == 1 and seen[0] else "(no model name)"
    by_model = []
    for m in models:
        mrules = replace(rules_for(rules.name, m, **(overrides or {})), ttl_s=rules.ttl_s) if m is not None else rules
        pick = [i for i, r in enumerate(reqs) if r.model == m] if m is not None else None
        mrows = rows if pick is None or not rows else [rows[i] for i in pick if i < len(rows)]
        mused = reported if pick is None else reported_usage(
            Usage(reqs[i].reported_prompt, reqs[i].reported_cached, reqs[i].reported_write) for i in pick)
        prices = Prices(mrules.price_input, mrules.read_multiplier)
        with_c, without = cost_usd(mrows, prices) if mrows else (None, None)
        rep_c, rep_without = mused.cost_usd(prices, mrules.write_multiplier) if mused else (None, None)
        by_model.append(ModelCost(label if pick is None else m or "(no model name)", len(pick) if pick is not None else len(reqs),
                                  mrules.price_input, mrules.read_multiplier, mrules.write_multiplier,
                                  mrules.price_source, mrules.price_date, r6(with_c), r6(without), r6(rep_c),
                                  r6(rep_without)))
    def total(name: str) -> float | None:
        got = [getattr(b, name) for b in by_model if getattr(b, name) is not None]
        return r6(sum(got)) if got else None
    return Cost(total("usd_with_cache"), total("usd_without_cache"), total("reported_usd_with_cache"),
                total("reported_usd_without_cache"), rules.price_input, rules.read_multiplier,
                rules.write_multiplier, rules.min_tokens, rules.ttl_s, rules.rule_set, rules.price_source,
                rules.price_date, sum(r.sent is None for r in reqs) if rules.max_breakpoints else None, by_model)


def reported_row(usage: ReportedUsage | None) -> Reported | None:
    """The reported-usage block (None when no call reports a prompt size and a cached
    count, see :func:`~.figures.reported_usage`)."""
    if usage is None:
        return None
    return Reported(usage.requests, usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens,
                    r6(usage.hit_ratio))


def request_row(f: RequestFigures) -> RequestRow:
    """One request's figures as a ``--per-request`` row."""
    return RequestRow(f.order, f.session, f.source, f.record, f.prompt_tokens, f.cached_tokens, f.ideal_tokens,
                      f.blocks_total, f.blocks_hit, f.written_tokens, dict(f.lost), dict(f.segments), f.drift_cause,
                      f.reported_cached_tokens)


def capacity_warnings(cache: str, results: Sequence[ResultRow], reqs: Sequence[SimRequest],
                      trace_blocks: Sequence[int] | None = None) -> list[str]:
    """One line per capacity (first row of each) that cannot hold one request of ``reqs``
    (:func:`capacity_warning`); unbounded rows give none. ``trace_blocks``: instead of ``reqs``,
    the blocks of each request of a columnar block trace (``vllm`` / ``blocks`` pools only)."""
    out, seen = [], set()
    for row in results:
        if row.capacity_blocks is None or row.capacity in seen:
            continue
        seen.add(row.capacity)
        if trace_blocks is not None:
            line = _trace_capacity_warning(cache, row.capacity, row.capacity_blocks, row.block_size, trace_blocks)
        else:
            line = capacity_warning(cache, row.capacity, row.capacity_blocks, row.block_size, reqs)
        if line:
            out.append(line)
    return out


def _trace_capacity_warning(cache: str, text: str, pool: int, bs: int, sizes) -> str | None:
    """:func:`capacity_warning` of block-trace requests of ``sizes`` blocks each (an int64 array)."""
    if traits_for(cache).pool != "blocks" or not len(sizes):
        return None
    over = int((sizes > pool).sum())
    unit = f"{'block' if pool == 1 else 'blocks'} of {bs} tokens"
    return _capacity_line(False, text, pool, unit, over, sizes.tolist()) if over else None


def capacity_warning(cache: str, text: str, pool_blocks: int, block_size: int,
                     reqs: Sequence[SimRequest]) -> str | None:
    """The warning for ``--capacity text`` (a pool of ``pool_blocks`` blocks of
    ``block_size`` tokens, per replica in a fleet) when it cannot hold one request of
    ``reqs``, else None.

    ``sglang``: pool tokens below a prompt's full pages. SGLang frees whole leaves and a
    prompt inserted into an empty tree is one leaf, so a pool smaller than every prompt
    holds nothing between requests (hit 0; ``RadixCache.evict``). ``vllm`` / ``blocks``:
    pool blocks below a request's blocks (``⌈prompt/block⌉``, a trace's hash ids): an
    engine cannot schedule a request larger than its pool; the model runs it and keeps
    what fits. Other caches (providers, llamacpp: no pool, :attr:`~.models.Traits.pool`): None."""
    pool_kind = traits_for(cache).pool
    if pool_kind is None or not reqs:
        return None
    bs = block_size
    if pool_kind == "leaves":
        sizes, pool = [floor_blocks(r.num_tokens, bs) for r in reqs], pool_blocks * bs
        unit = "token" if pool == 1 else "tokens"
    else:
        sizes = [len(r.hashes) if r.hashes is not None else -(-r.num_tokens // bs) for r in reqs]
        pool = pool_blocks
        unit = f"{'block' if pool == 1 else 'blocks'} of {bs} tokens"
    over = sum(n > pool for n in sizes)
    return _capacity_line(pool_kind == "leaves", text, pool, unit, over, sizes) if over else None


def _capacity_line(leaves: bool, text: str, pool: int, unit: str, over: int, sizes: Sequence[int]) -> str:
    """The warning for ``--capacity text`` (``pool`` in ``unit``), ``over`` of ``sizes`` larger;
    ``leaves``: the pool frees whole radix leaves (SGLang)."""
    med, top, n = median_low(sizes), max(sizes), len(sizes)
    head = f"--capacity {text}: {pool:,} {unit}; "
    if leaves and over == n:
        return (head + f"every prompt is longer (smallest {min(sizes):,}, median {med:,} tokens): SGLang evicts whole "
                "leaves and a prompt inserted into an empty tree is one leaf, so this cache holds nothing between "
                "requests and hits 0%")
    if leaves:
        return (head + f"{over} of {n} prompts {'is' if over == 1 else 'are'} longer (median {med:,}, largest "
                f"{top:,} tokens): SGLang evicts whole leaves, so what of a longer prompt does not fit is dropped "
                "whole right after it runs: expect far fewer hits than a block cache of the same size")
    return (head + f"{over} of {n} requests {'is' if over == 1 else 'are'} larger (median {med:,}, largest {top:,} "
            "blocks): an engine cannot schedule a request larger than its pool; the model runs it anyway and keeps "
            "only the blocks that fit, so these rows are not an engine's figures")
