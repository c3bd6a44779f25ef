"""TTL what-if: the same replay of the log under every retention a provider sells, or engine idle TTLs.

``simulate --ttl-whatif`` re-runs the first result row's cache (its policy and first capacity)
with only the idle expiry changed, and prices each run:

* **provider caches** (:attr:`~.models.Traits.priced`): each retention of
  :data:`~prefixcache.analyzer.cache.provider.rules.RETENTIONS` (Anthropic 5 min / 1 h, OpenAI
  in-memory / extended 24 h, DeepSeek 24 h / 1 h), its write price included (Anthropic's 1 h
  writes bill 2×). The first retention is the one ``simulate`` applies, so its row is the
  result row and the ``cost`` block of the same document, figure for figure.
* **engine caches**: the run's own ``--ttl`` (none unless given), then each of :data:`ENGINE_TTLS`;
  hit tokens only (an engine bills nothing).

Each non-default retention gets one line of advice against the default, all USD at the rules'
input price:

* ``W`` (more in writes) = Σ written tokens × (its write multiplier − the default's) — the
  premium of the longer retention on what it writes;
* ``S`` (saved in reads) = default cost − (its cost − ``W``) — what its extra hits save at the
  default write price (a re-write or a recompute replaced by a read);
* ``net`` = ``S − W`` = default cost − its cost (positive: the retention pays for itself);
* "turns N misses (T tokens) into hits": the requests that read more under it, and the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.provider.cost import billed_tokens
from prefixcache.analyzer.cache.provider.rules import RETENTIONS, ProviderRules
from prefixcache.analyzer.cache.simulate.figures import RequestFigures, totals
from prefixcache.analyzer.cache.simulate.simulator import Baseline, simulate_stream
from prefixcache.analyzer.cache.workload import SimRequest

#: Engine idle TTLs compared after the run's own (seconds).
ENGINE_TTLS: tuple[float, ...] = (60.0, 300.0, 600.0, 1800.0, 3600.0, 86400.0)


@dataclass(frozen=True, slots=True)
class TtlRow:
    """One retention: ``label``, the idle TTL applied (seconds; null = none), the write price
    multiplier it bills (null = the rules' or the marks' own), hits (tokens, requests), tokens
    written and lost to ``ttl``, and its input cost in USD split into cached reads, cache
    writes and uncached input (all null for engine caches)."""

    label: str
    ttl_s: float | None
    write_multiplier: float | None
    cached_tokens: int
    hit_ratio_tokens: float
    requests_hit: int
    written_tokens: int
    lost_ttl_tokens: int
    usd_reads: float | None
    usd_writes: float | None
    usd_uncached: float | None
    usd_total: float | None


@dataclass(frozen=True, slots=True)
class TtlAdvice:
    """A retention against the default (module docstring): requests that read more under it
    (``misses_turned_hits``) and the tokens, ``extra_write_usd`` (W), ``saved_read_usd`` (S),
    ``net_usd`` (S − W; positive = it pays), and the one-line ``advice``."""

    label: str
    versus: str
    misses_turned_hits: int
    tokens_turned_hits: int
    extra_write_usd: float
    saved_read_usd: float
    net_usd: float
    advice: str


@dataclass(frozen=True, slots=True)
class TtlWhatIf:
    """The TTL what-if of one cache at one capacity (``capacity`` as given): one row per
    retention, the default first, and the advice of every other one (providers only)."""

    cache: str
    capacity: str
    rows: list[TtlRow]
    advice: list[TtlAdvice]


def _usd(x: float) -> float:
    return round(x, 6)


def _row(label: str, ttl_s: float | None, w: float | None, rows: Sequence[RequestFigures],
         rules: ProviderRules | None) -> TtlRow:
    t = totals(rows)
    costs: list[float | None] = [None] * 4
    if rules is not None:
        scale = rules.price_input / 1e6
        reads = sum(f.cached_tokens for f in rows) * rules.read_multiplier * scale
        writes = sum(f.written_tokens * (f.write_multiplier if w is None else w) for f in rows) * scale
        total = sum(billed_tokens(f.prompt_tokens, f.cached_tokens, f.written_tokens, rules.read_multiplier,
                                  f.write_multiplier if w is None else w) for f in rows) * scale
        costs = [_usd(reads), _usd(writes), _usd(total - reads - writes), _usd(total)]
    return TtlRow(label, ttl_s, w, t.cached_tokens, round(t.hit_ratio_tokens, 6), t.requests_hit, t.written_tokens,
                  t.lost.get("ttl", 0), *costs)


def advice(label: str, versus: str, default: Sequence[RequestFigures], other: Sequence[RequestFigures],
           w: float | None, rules: ProviderRules) -> TtlAdvice:
    """The advice of retention ``label`` (its per-request figures ``other``, write multiplier
    ``w``; None = the rows' own) against ``versus`` (figures ``default``, the rows' own write
    multipliers), USD at ``rules``' prices (module docstring)."""
    scale = rules.price_input / 1e6

    def cost(rows: Sequence[RequestFigures], mult: float | None) -> float:
        return sum(billed_tokens(f.prompt_tokens, f.cached_tokens, f.written_tokens, rules.read_multiplier,
                                 f.write_multiplier if mult is None else mult) for f in rows) * scale

    extra = sum(f.written_tokens * ((f.write_multiplier if w is None else w) - f.write_multiplier)
                for f in other) * scale
    net = round(cost(default, None) - cost(other, w), 9) + 0.0
    extra = round(extra, 9) + 0.0
    saved = round(net + extra, 9) + 0.0  # + 0.0: no "-0.0000"
    gained = [(o.cached_tokens - d.cached_tokens) for d, o in zip(default, other) if o.cached_tokens > d.cached_tokens]
    n, tok = len(gained), sum(gained)
    more = f"${extra:.4f} more in writes" if extra >= 0 else f"${-extra:.4f} less in writes"
    verdict = "pays for itself" if net > 0 else ("changes nothing" if net == 0 else "costs more than it saves")
    line = (f"a {label} TTL turns {n} {'miss' if n == 1 else 'misses'} ({tok:,} tokens) into hits for {more} and saves "
            f"${saved:.4f} in reads: net ${net:+.4f} against {versus} ({verdict})")
    return TtlAdvice(label, versus, n, tok, _usd(extra), _usd(saved), _usd(net), line)


def ttl_whatif(reqs: Sequence[SimRequest], spec: CacheSpec, capacity: tuple[str, int | None], base: Baseline,
               rules: ProviderRules | None, causes: Mapping[int, str] | None = None) -> TtlWhatIf:
    """The what-if of ``spec`` (policy and TTL as the first result row ran) at ``capacity``
    (label, blocks or None) over ``reqs`` (arrival order; ``base`` their baseline): provider
    retentions when ``rules`` (the priced cache's rules) are given, else the engine TTLs."""
    label, blocks = capacity
    own = "none" if spec.ttl_s is None else f"{spec.ttl_s:g}s"
    if rules is not None:
        options = [(r.label, r.ttl_s, r.write_multiplier) for r in RETENTIONS.get(spec.cache, ())] or \
            [("default", None, None)]
        if spec.ttl_s is not None:  # the run replaced the retention: it is the row to compare with
            options = [(f"run (--ttl {own})", spec.ttl_s, None), *options]
    else:
        options = [(f"run (--ttl {own})", spec.ttl_s, None)] + \
            [(f"{t:g}s", t, None) for t in ENGINE_TTLS if t != spec.ttl_s]
    runs = [simulate_stream(reqs, replace(spec, ttl_s=ttl) if i else spec, blocks, base, causes)
            for i, (_, ttl, _) in enumerate(options)]
    ttl_default = spec.model_class().ttl_of(spec)
    rows = [_row(lab, ttl_default if i == 0 else ttl, w, got, rules)
            for i, ((lab, ttl, w), got) in enumerate(zip(options, runs))]
    tips = [advice(lab, options[0][0], runs[0], got, w, rules) for (lab, _, w), got in zip(options[1:], runs[1:])] \
        if rules is not None else []
    return TtlWhatIf(spec.cache, label, rows, tips)
