"""A ``simulate`` study: its options and the policy × capacity grid → :class:`~.document.SimulateReport`.

:class:`SimulateOptions` holds every choice of the command (validated on
construction, ConfigError for nonsense, before any work). :func:`simulate_report`
runs the prepared requests through the cache for each policy (with its TTL) and
capacity and builds the document. The first result row's per-request figures feed
the calls predicted vs reported, the cost and ``--per-request``. Drift causes (lint
rule codes) come from the caller: lint sits above the cache layer
(:func:`prefixcache.analyzer.api.simulate` composes them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.capacity import Capacity, KVShape
from prefixcache.analyzer.cache.index.eviction import POLICIES, resolve_policy
from prefixcache.analyzer.cache.simulate.figures import RequestFigures, reported_usage
from prefixcache.analyzer.cache.models import MODELS, CacheSpec, lru_stack_order, traits_for
from prefixcache.analyzer.cache.index.radix import RADIX_POLICIES
from prefixcache.analyzer.cache.simulate.document import (
    ResultRow, SimulateReport, SimulateReportWithRequests, Summary, agreement, call_rows, capacity_warnings,
    cost, reported_row, request_row, tenant_rows,
)
from prefixcache.analyzer.cache.simulate.shards import SampledCurve, shards_curve
from prefixcache.analyzer.cache.simulate.sweeps import chains, distinct_blocks
from prefixcache.analyzer.cache.simulate.arms import GridArm, GridShared, map_arms, run_grid_arm
from prefixcache.analyzer.cache.simulate.provider_calls import provider_calls
from prefixcache.analyzer.cache.simulate.bands import retention_of
from prefixcache.analyzer.cache.provider.prices import price_warning, provider_of
from prefixcache.analyzer.cache.simulate.chunks import DEFAULT_RECOMPUTE
from prefixcache.analyzer.cache.simulate.simulator import Baseline, baseline
from prefixcache.analyzer.cache.workload import SimRequest, item_facts
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import IngestSummary
from prefixcache.analyzer.ingest.tenancy import tenant_in
from prefixcache.analyzer.prepare.size_check import SizeRow

#: Every ``--policy`` name: block-cache policies, the offline optimum, the radix-only
#: ``mru`` and the deprecated ``ttl`` (lru with a TTL).
POLICY_NAMES = (*POLICIES, "belady", *(p for p in RADIX_POLICIES if p not in POLICIES), "ttl")


def _reuse_kinds() -> tuple[str, ...]:
    """:data:`~.analyses.REUSE_KINDS` (imported when a ``--reuse`` other than the default is named:
    the analyses are not imported by a run that asks for none)."""
    from prefixcache.analyzer.cache.simulate.analyses import REUSE_KINDS

    return REUSE_KINDS


@dataclass(frozen=True, slots=True)
class SimulateOptions:
    """What to simulate. ``cache``: a :data:`~.models.MODELS` name; ``policies``: run in
    order (``ttl`` is the deprecated alias of ``lru`` with ``ttl_s``, default 300 s);
    ``capacities``: parsed ``--capacity`` specs (empty = unbounded); ``block_size``
    (tokens, ≥ 1; None = the cache's default); ``ttl_s``: idle expiry (seconds, ≥ 0);
    ``kv_model`` / ``model_config`` / ``kv_dtype``: KV bytes per token for byte
    capacities; ``min_tokens`` and prices (≥ 0) override the provider's;
    ``in_flight`` ≥ 1; ``per_request`` adds every request's figures; ``input_format``,
    ``tokenizer``, ``template``: how logs are read and prepared; ``slots`` (≥ 1),
    ``slot_similarity`` (0–1) and ``cache_ram_mib`` (MiB; 0 off, −1 unbounded): the
    llama.cpp server's ``-np``, ``-sps`` and ``--cache-ram``; ``survival``, ``ttl_whatif`` and
    ``reuse`` (names of :data:`~.analyses.REUSE_KINDS`; ``chunks`` with ``recompute``, 0–1, and
    ``chunk_tokens``, a window ≥ 1 token or None) ask for the :mod:`.analyses`; ``sample``
    (a rate in (0, 1], with ``sample_salt`` for the id hash) replaces the exact LRU pass by a
    SHARDS curve (:mod:`.shards`; ``--cache vllm``/``blocks``, ``--policy lru``, finite
    capacities, no TTL); ``sizing`` (a fraction in (0, 1]) asks for the smallest self-hosted
    LRU cache reaching that share of the ideal (:mod:`.sizing`); ``executor``: where the independent
    arms (policy × capacity, fleet routers) run, ``local`` (here, serially) or ``ray`` /
    ``ray:ADDRESS`` (:mod:`.arms`; the same report). ConfigError names the first bad value."""

    cache: str = "vllm"
    policies: tuple[str, ...] = ("lru",)
    capacities: tuple[Capacity, ...] = ()
    block_size: int | None = None
    ttl_s: float | None = None
    kv_model: str | None = None
    model_config: str | None = None
    kv_dtype: str | None = None
    min_tokens: int | None = None
    price_input: float | None = None
    price_read: float | None = None
    price_write: float | None = None
    in_flight: int = 1
    per_request: bool = False
    input_format: str = "auto"
    tokenizer: str = "auto"
    template: str = "auto"
    slots: int = 1
    slot_similarity: float = 0.10
    cache_ram_mib: float = 8192.0
    survival: bool = False
    ttl_whatif: bool = False
    reuse: tuple[str, ...] = ("prefix",)
    recompute: float = DEFAULT_RECOMPUTE
    chunk_tokens: int | None = None
    sample: float | None = None
    sample_salt: int = 0
    sizing: float | None = None
    executor: str = "local"

    def __post_init__(self) -> None:
        if self.cache not in MODELS:
            raise ConfigError(f"unknown --cache {self.cache!r}; choose one of {', '.join(MODELS)}")
        usable = MODELS[self.cache].policies
        for p in self.policies or ("",):
            if p not in POLICY_NAMES:
                raise ConfigError(f"unknown --policy {p!r}; choose from {', '.join(POLICY_NAMES[:-1])}")
            if resolve_policy(p, None)[0] not in usable:
                raise ConfigError(f"--policy {p} does not apply to --cache {self.cache}; choose from {', '.join(usable)}")
        for flag, value, least in (("--block-size", self.block_size, 1), ("--in-flight", self.in_flight, 1),
                                   ("--ttl", self.ttl_s, 0), ("--min-tokens", self.min_tokens, 0),
                                   ("--price-input", self.price_input, 0), ("--price-read", self.price_read, 0),
                                   ("--price-write", self.price_write, 0)):
            if value is not None and not value >= least:
                raise ConfigError(f"{flag} must be at least {least}, got {value}")
        if self.slots < 1:
            raise ConfigError(f"--slots must be at least 1, got {self.slots}")
        if not 0 <= self.slot_similarity <= 1:
            raise ConfigError(f"--slot-similarity must be between 0 and 1, got {self.slot_similarity}")
        if self.cache_ram_mib < 0 and self.cache_ram_mib != -1:
            raise ConfigError(f"--cache-ram must be at least 0 MiB (or -1: no limit), got {self.cache_ram_mib:g}")
        bad = next((k for k in self.reuse if k != "prefix" and k not in _reuse_kinds()), None)
        if bad is not None:
            raise ConfigError(f"unknown --reuse {bad!r}; choose from {', '.join(_reuse_kinds())}")
        if not 0 <= self.recompute <= 1:
            raise ConfigError(f"--recompute must be between 0 and 1, got {self.recompute}")
        if self.chunk_tokens is not None and self.chunk_tokens < 1:
            raise ConfigError(f"--chunk-tokens must be at least 1, got {self.chunk_tokens}")
        if self.sizing is not None and not 0 < self.sizing <= 1:
            raise ConfigError(f"--sizing must be a fraction of the ideal in (0, 1] (0.9 = 90%), got {self.sizing:g}")
        if self.sample is not None:
            if not 0 < self.sample <= 1:
                raise ConfigError(f"--sample must be a rate in (0, 1] (0.01 = 1%), got {self.sample:g}")
            if not traits_for(self.cache).block_chain or tuple(self.policies) != ("lru",) or not self.capacities \
                    or self.ttl_s is not None or self.in_flight != 1 or self.analyses_asked:
                raise ConfigError("--sample gives an LRU curve: it needs --cache vllm or blocks, --policy lru, "
                                  "a finite --capacity, and no --ttl, --in-flight, --survival, --ttl-whatif or --reuse chunks")
        if self.executor != "local":  # (parse_executor imports the preparer: not for the default)
            from prefixcache.analyzer.prepare.parallel import parse_executor

            parse_executor(self.executor)
        in_bytes = next((c for c in self.capacities if c.unit == "bytes"), None)
        if in_bytes is not None and not (self.kv_model or self.model_config):
            raise ConfigError(f"capacity {in_bytes.text!r} is in bytes: pass --kv-model or --model-config")

    @property
    def analyses_asked(self) -> bool:
        """Whether any of the :mod:`.analyses` is asked for."""
        return self.survival or self.ttl_whatif or "chunks" in self.reuse or self.sizing is not None

    def runs(self) -> list[tuple[str, float | None]]:
        """``(policy, ttl_s)`` of each result group, the ``ttl`` alias resolved; a pair
        listed twice runs once."""
        return list(dict.fromkeys(resolve_policy(p, self.ttl_s) for p in self.policies))

    def spec(self, model: str | None) -> CacheSpec:
        """The cache spec (first policy's settings) for requests of ``model``."""
        overrides = {"min_tokens": self.min_tokens, "price_input": self.price_input,
                     "read_multiplier": self.price_read, "write_multiplier": self.price_write}
        engine = {"slots": self.slots, "slot_similarity": self.slot_similarity, "cache_ram_mib": self.cache_ram_mib}
        return CacheSpec(self.cache, "lru", self.block_size, self.ttl_s, model,
                         {k: v for k, v in overrides.items() if v is not None}, self.in_flight,
                         engine if traits_for(self.cache).slots else None)


def simulate_report(items: Sequence, reqs: Sequence[SimRequest], options: SimulateOptions, shape: KVShape | None,
                    summary: IngestSummary, notes: Mapping[str | None, str],
                    drift_causes: Mapping[int, str] | None = None, *,
                    trace_overlaps: Sequence[int] | None = None,
                    sizes: Mapping[tuple[str, int, int], SizeRow] | None = None) -> SimulateReport:
    """The report of ``options`` over prepared ``items`` (input order) and their
    simulator requests ``reqs`` (arrival order, :func:`~.workload.to_sim_requests`);
    ``notes``: tokenizer notes by model; ``drift_causes``: request order → rule code;
    ``trace_overlaps``: the block-trace requests' drift extents, when the caller's drift
    linter has them (:func:`~.simulator.baseline`); ``sizes``: the prompt-size check's row of each
    checked call (:attr:`~prefixcache.analyzer.prepare.size_check.SizeCheck.by_request`), which
    the provider-call note judges each call by."""
    facts = item_facts(items)  # one pass over the items (columns when kept as KeptItems)
    model = next((m for m in facts.models if m), None)
    spec = options.spec(model)
    block_size = spec.block_size_for(reqs)
    bpt = shape.bytes_per_token if shape else None
    if spec.engine_options is not None and bpt:
        spec = replace(spec, engine_options={**spec.engine_options, "kv_bytes_per_token": bpt})
    sampled, tenants = None, []
    # the requests' kept ``extra`` by name: only when one logs provider cache settings or names its
    # tenant (else every retention and tenant is None, and a dict a request is most of what a long
    # trace would hold)
    extra = {(p.request.provenance.source, p.request.provenance.record, p.request.index): p.request.extra
             for p in items} if facts.any_extra else {}
    if options.sample is not None and reqs:
        sampled, uniq = _sampled(reqs, spec, options, bpt, trace_overlaps)
        results, first, base, caps = [], None, None, []
    else:
        tenants = [tenant_in(extra.get((r.source, r.record, r.index))) for r in reqs] if extra else []
        results, first, uniq, base, caps = _grid(reqs, spec, options, bpt, drift_causes or {}, trace_overlaps,
                                                 any(t is not None for t in tenants)) if reqs else \
            ([], None, 0, None, [])
    rules = spec.provider_rules(model) if spec.traits.priced else None
    kept = [retention_of(extra.get((r.source, r.record, r.index))) for r in reqs] if extra else []
    calls = call_rows(first or [], block_size, rules.min_tokens if rules else 0, reqs, rules,
                      kept if any(kept) else None)
    usage = reported_usage(facts.usages)
    if rules is not None:  # the retention the first result row applied (--ttl, or the provider's)
        applied = results[0].ttl_s if results else spec.model_class().ttl_of(spec)
        rules = replace(rules, ttl_s=rules.ttl_s if applied is None else applied)
    fields = dict(
        cache=options.cache, block_size=block_size, unique_blocks=uniq, kv_bytes_per_token=bpt, results=results,
        calls=calls, agreement=agreement(calls, max(block_size, 64)), cost=cost(rules, first, usage, reqs, spec.rule_overrides) if rules else None,
        usage_only_requests=facts.usage_only, reported=reported_row(usage),
        tokenizers={(k or "(no model name)"): v for k, v in notes.items()},
        warnings=capacity_warnings(options.cache, results, reqs) + (
            provider_warnings(options.cache, facts.models) if spec.traits.priced else []) + (
            breakpoint_warnings(rules, reqs) if rules is not None else []),
        summary=Summary(summary.files, summary.records, summary.requests, summary.sessions, len(summary.skipped)),
        sampled=sampled, tenants=tenant_rows(first or [], tenants) if first else [])
    report = SimulateReportWithRequests(**fields, requests=[request_row(f) for f in first or []]) \
        if options.per_request else SimulateReport(**fields)
    from prefixcache.analyzer.cache.simulate.analyses import Analyses, run_analyses, with_analyses

    split = provider_calls(options.cache, calls, first or [], reqs, list(extra.values()) or [p.request.extra for p in items],
                           spec.rule_overrides, sizes) if rules is not None and calls else None
    if not options.analyses_asked:
        return report if split is None else with_analyses(report, Analyses(None, None, None, split))
    if not reqs:
        return with_analyses(report, Analyses(None, None, None, split))
    policy, ttl_s = options.runs()[0]
    found = run_analyses(reqs, replace(spec, policy=policy, ttl_s=ttl_s), caps, base,
                         spec.provider_rules(model) if spec.traits.priced else None, survival_on=options.survival,
                         ttl_on=options.ttl_whatif, chunks_on="chunks" in options.reuse, recompute=options.recompute,
                         window=options.chunk_tokens, causes=drift_causes, size_for=options.sizing,
                         kv_bytes_per_token=bpt)
    return with_analyses(report, replace(found, provider_calls=split))


def provider_warnings(cache: str, models: Sequence[str | None]) -> list[str]:
    """One line per logged model priced with a row not checked for it (:func:`~.provider.prices.price_warning`)
    and one per model of another provider than ``--cache`` (its calls are priced and ruled as ``cache``'s)."""
    out = []
    for model in dict.fromkeys(m for m in models if m):
        other = provider_of(model)
        if other is not None and other != cache:
            n = sum(m == model for m in models)
            out.append(f"--cache {cache} but {n} call(s) were made to {model!r}, a {other} model: their hits and "
                       f"prices follow {cache}'s rules and rows; pass --cache {other} for that provider's")
        elif line := price_warning(cache, model):
            out.append(line)
    return out


def breakpoint_warnings(rules, reqs: Sequence[SimRequest]) -> list[str]:
    """Anthropic rules (``rules.rule_set``): one line for the requests whose logged body sets no
    breakpoint (nothing is cached for them), one for those whose log cannot show breakpoints (an
    agent transcript: the agent's usual placement is assumed, :class:`~..workload.Marks`)."""
    if rules.rule_set != "anthropic-breakpoints" or not reqs:
        return []
    none = sum(r.mark_source == "none" for r in reqs)
    agent = sum(r.mark_source == "agent" for r in reqs)
    out = []
    if none:
        out.append(f"{none} of {len(reqs)} request(s) set no cache_control and no automatic caching (a top-level "
                   "cache_control): Anthropic writes and reads nothing for them (lint: PC603)")
    other = sum(r.mark_source == "other" for r in reqs)
    if other:
        out.append(f"{other} of {len(reqs)} request(s) went to another provider's model and carry no cache_control: "
                   "for this what-if, breakpoints are assumed at the end of the system prompt and tools and at the "
                   "end of the prompt")
    if agent:
        out.append(f"breakpoints not in the log for {agent} of {len(reqs)} request(s) (set by the agent, which logs "
                   "no request body): assumed at the end of the system prompt and tools and at the end of the "
                   "prompt, Claude Code's placement")
    return out


def _sampled(reqs: Sequence[SimRequest], spec: CacheSpec, options: SimulateOptions,
             bpt: int | None, overlaps: Sequence[int] | None = None) -> tuple[SampledCurve, int]:
    """The SHARDS LRU curve at every ``--capacity`` (:mod:`.shards`) and the distinct blocks behind ``N%``."""
    block_size = spec.block_size_for(reqs)
    base = baseline(reqs, overlaps)
    uniq = distinct_blocks(reqs, spec, block_size, base)
    caps = [(c.text, c.blocks(block_size, uniq, bpt)) for c in options.capacities]
    empty = next((text for text, b in caps if b == 0), None)
    if empty is not None:
        raise ConfigError(f"--capacity {empty}: 0 blocks of {block_size} tokens here ({uniq:,} distinct blocks)")
    order = lru_stack_order(spec) or "tail-first"
    whole = (sum(r.num_tokens for r in reqs),
             sum(len(r.hashes) if r.hashes is not None else -(-r.num_tokens // block_size) for r in reqs))
    return shards_curve(chains(reqs, spec, block_size), caps, options.sample, order, options.sample_salt,
                        whole), uniq


def _grid(reqs: Sequence[SimRequest], spec: CacheSpec, options: SimulateOptions, bpt: int | None,
          causes: Mapping[int, str], overlaps: Sequence[int] | None = None, rows_needed: bool = False
          ) -> tuple[list[ResultRow], list[RequestFigures] | None, int, Baseline, list[tuple[str, int | None]]]:
    """Every policy × capacity: (result rows, the first row's per-request figures, the
    distinct blocks — pages, units — behind ``N%`` capacities, the baseline, the capacities
    as ``(label, blocks or None)``). ``rows_needed``: keep the first row's per-request figures
    even where aggregates would do (the per-tenant table needs them)."""
    block_size = spec.block_size_for(reqs)
    base = baseline(reqs, overlaps)
    uniq = distinct_blocks(reqs, spec, block_size, base)
    caps = [(c.text, c.blocks(block_size, uniq, bpt)) for c in options.capacities] or [("unbounded", None)]
    empty = next((text for text, b in caps if b == 0), None)
    if empty is not None:
        raise ConfigError(f"--capacity {empty}: 0 blocks of {block_size} tokens here ({uniq:,} distinct blocks"
                          f"{f', {bpt:,} KV bytes per token' if bpt else ''}); a cache needs at least one")
    blocks = [b for _, b in caps]
    # the arms (arms.py): a swept policy at every capacity in one pass, any other one per capacity; the
    # per-request rows of the first arm that gives rows (a swept one only when they are shown)
    arms, taken, sweeps = [], False, False
    want = rows_needed or _rows_wanted(reqs, spec, options)
    for policy, ttl_s in options.runs():
        pspec = replace(spec, policy=policy, ttl_s=ttl_s)
        ttl_shown = pspec.model_class().ttl_of(pspec)
        swept = spec.traits.block_chain and None not in blocks and spec.in_flight <= 1
        if swept and (policy == "belady" or (policy == "lru" and lru_stack_order(pspec) is not None)):
            arms.append(GridArm(pspec, ttl_shown, None, want and not taken))
            taken, sweeps = taken or want, True
            continue
        if policy == "belady":
            raise ConfigError("--policy belady needs a finite --capacity, --cache vllm or blocks, no --in-flight")
        for i in range(len(caps)):
            arms.append(GridArm(pspec, ttl_shown, i, want and not taken))
            taken = taken or want
    ch = chains(reqs, spec, block_size) if sweeps else None  # one set of chains for every swept policy
    shared = GridShared(reqs, base, causes, ch, caps, block_size, bpt, spec.cache)
    results, first = [], None
    for rows, got in map_arms(run_grid_arm, shared, arms, options.executor):
        results.extend(rows)
        first = first or got
    return results, first, uniq, base, caps


def _rows_wanted(reqs: Sequence[SimRequest], spec: CacheSpec, options: SimulateOptions) -> bool:
    """Whether the first result's per-request figures are read after the grid: ``--per-request``,
    calls with a reported cached count (predicted vs reported), or a priced cache (cost and the
    provider-call split). Otherwise every result is only summed."""
    return options.per_request or spec.traits.priced or any(r.reported_cached is not None for r in reqs)


def columnar_trace(options: SimulateOptions) -> bool:
    """Whether ``options`` run on the columnar block-trace path (:func:`trace_report`) when the input
    is one Mooncake trace: ``--cache blocks``, LRU and/or Belady at finite capacities, no TTL, one
    request in flight, no sampling, no analyses, the local executor. Any other run takes the object
    path (:func:`simulate_report`); both give the same report. ``PREFIXCACHE_COLUMNAR=0`` in the
    environment turns the columnar path off (the tests compare the two)."""
    import os

    if os.environ.get("PREFIXCACHE_COLUMNAR", "").strip().lower() in ("0", "false", "no"):
        return False
    from prefixcache.analyzer.cache.models.vllm import BlocksModel  # its granular level of a trace request: the lcp

    return (MODELS.get(options.cache) is BlocksModel and bool(options.capacities) and options.ttl_s is None
            and all(p in ("lru", "belady") for p in options.policies) and options.in_flight == 1
            and options.sample is None and not options.analyses_asked and options.executor == "local")


def trace_report(trace, drift, causes: Sequence[str | None], options: SimulateOptions,
                 shape: KVShape | None, summary: IngestSummary) -> SimulateReport:
    """:func:`simulate_report` of a columnar block trace under :func:`columnar_trace` options.

    ``trace``: :class:`~prefixcache.analyzer.ingest.readers.trace_columns.TraceColumns` in arrival
    order; ``drift``: its :class:`~.index.trace_sessions.TraceDrift`; ``causes``: lint's rule
    code of each one's drift (None: no drift named). No object per request unless ``--per-request``
    (then one :class:`~.document.RequestRow` each). ConfigError as :func:`simulate_report`."""
    import numpy as np

    from prefixcache.analyzer.cache.simulate.document import RequestRow, offline_bound, totals_row
    from prefixcache.analyzer.cache.simulate.stack_profile import ChainColumns
    from prefixcache.analyzer.cache.simulate.sweeps import trace_swept

    spec = options.spec(None)
    block_size = trace.block_size
    if spec.block_size and spec.block_size != block_size:
        raise ConfigError(f"block traces fix the block size ({block_size}); drop --block-size {spec.block_size}")
    bpt = shape.bytes_per_token if shape else None
    uniq = drift.distinct
    caps = [(c.text, c.blocks(block_size, uniq, bpt)) for c in options.capacities]
    empty = next((text for text, b in caps if b == 0), None)
    if empty is not None:
        raise ConfigError(f"--capacity {empty}: 0 blocks of {block_size} tokens here ({uniq:,} distinct blocks"
                          f"{f', {bpt:,} KV bytes per token' if bpt else ''}); a cache needs at least one")
    blocks = [b for _, b in caps]
    offsets, ids, prompt = trace.offsets, trace.ids, trace.tokens
    lens = np.diff(offsets)
    n = len(prompt)
    bsz = np.full(n, block_size, dtype=np.int64)
    ch = ChainColumns(offsets, ids, np.minimum(prompt, lens * block_size), bsz, lens, np.zeros(n, dtype=np.int64))
    lcp, drift_end = drift.lcp, np.maximum(drift.lcp, drift.overlap)
    results, first = [], None
    for policy, ttl_s in options.runs():
        pspec = replace(spec, policy=policy, ttl_s=ttl_s)
        ttl_shown = pspec.model_class().ttl_of(pspec)
        tots, got = trace_swept(ch, prompt, pspec, blocks, lcp, drift_end, causes,
                                rows=options.per_request and first is None)
        first = first or got
        for (text, b), (t, run) in zip(caps, tots):
            bound = None if run is None else offline_bound(t.prompt_tokens, t.blocks_total, run[1], run[2], run[0])
            results.append(totals_row(options.cache, policy, ttl_shown, text, b, block_size, bpt, t, bound))
    fields = dict(
        cache=options.cache, block_size=block_size, unique_blocks=uniq, kv_bytes_per_token=bpt, results=results,
        calls=[], agreement=None, cost=None, usage_only_requests=0, reported=None, tokenizers={},
        warnings=capacity_warnings(options.cache, results, (), trace_blocks=lens),
        summary=Summary(summary.files, summary.records, summary.requests, summary.sessions, len(summary.skipped)),
        sampled=None, tenants=[])
    if not options.per_request:
        return SimulateReport(**fields)
    cached, ideal, lost = first
    hit_blocks = -(-cached // block_size)
    names = list(lost)
    lost_rows = zip(*(lost[k].tolist() for k in names))
    session, source = trace.session, trace.source
    rows = [RequestRow(i, session, source, line, p, c, d, nb, hb, 0, dict(zip(names, lr)), {}, cause, None)
            for i, (line, p, c, d, nb, hb, lr, cause) in enumerate(zip(
                trace.lines.tolist(), prompt.tolist(), cached.tolist(), ideal.tolist(), lens.tolist(),
                hit_blocks.tolist(), lost_rows, causes))]
    return SimulateReportWithRequests(**fields, requests=rows)
