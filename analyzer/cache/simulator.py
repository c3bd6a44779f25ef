"""Replay a request stream through a cache model and measure every request.

Input: :class:`~prefixcache.analyzer.prepare.Prepared` requests (token prompts
from logs, or block-hash traces). They are ordered by logged timestamp (stable:
equal or missing times keep input order); ``now`` is the logged time in seconds,
or the request's position when a log has no times — a logical clock, so the same
input gives the same numbers. Caches (``--cache``):

* ``vllm``   — :class:`~.block_hash.BlockHashCache` (16-token blocks, ⌊(n−1)/B⌋·B cap,
  tail-first LRU; traces use their own block size and hashes);
* ``blocks`` — block-level replay as the Mooncake/Bailian papers count it: leading
  cached blocks, no last-token cap, blocks touched in prompt order;
* ``sglang`` — :class:`~.radix.RadixCache` (page 1, n−1 cap, leaf eviction);
* ``openai`` / ``deepseek`` / ``anthropic`` — :mod:`.provider` rules.

Besides the cache itself, shadow copies with no capacity (and no expiry) give
each request's ideal and TTL-only levels, from which :func:`metrics.lost_by_cause`
splits the lost tokens.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.cache.figures import RequestFigures, hits_by_segment, lost_by_cause, Levels
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.cache.base import hit_cap_tokens
from prefixcache.analyzer.cache.block_hash import BlockHashCache, hash_blocks
from prefixcache.analyzer.cache.provider import AnthropicCache, Breakpoint, ProviderRules, UnitPrefixCache, rules_for
from prefixcache.analyzer.cache.radix import RadixCache

CACHES = ("vllm", "blocks", "sglang", "openai", "anthropic", "deepseek")
TTL_CODES = {"5m": 300.0, "1h": 3600.0}
#: Segment kinds that are content blocks (breakpoints and lookback stop at their ends;
#: the generation prompt and template glue are not content).
_CONTENT = ("system", "tool", "message", "opaque")


@dataclass(frozen=True, slots=True)
class SimRequest:
    """A request reduced to what cache models need.

    ``tokens`` for log prompts, ``hashes`` + ``trace_block`` for block traces;
    ``spans``: ``(group, start, end)`` token spans for hit attribution;
    ``boundaries``: content-block ends (tokens); ``breakpoints``: Anthropic marks
    (automatic mode — end of the system/tools prefix and end of prompt — when the
    log has none); ``salt``: vLLM ``cache_salt`` namespace, if logged;
    ``hidden_tokens``: size of a prefix the log lacks and the prompt does not
    represent (Claude Code's system prompt and tools: reported prompt tokens minus
    ours), counted toward provider minimum lengths only.
    """

    order: int
    session: str
    index: int
    source: str
    record: int
    model: str | None
    now: float
    num_tokens: int
    tokens: tuple[int, ...] | None = None
    hashes: tuple[int, ...] | None = None
    trace_block: int = 0
    spans: tuple[tuple[str, int, int], ...] = ()
    boundaries: tuple[int, ...] = ()
    breakpoints: tuple[Breakpoint, ...] = ()
    salt: str | None = None
    hidden_tokens: int = 0
    reported_prompt: int | None = None
    reported_cached: int | None = None
    exact: bool = True


def _group(kind: str, ref: int, last_assistant: int) -> str:
    if kind in ("system", "opaque"):
        return "system"
    if kind == "tool":
        return "tools"
    if kind == "message":
        return "newest_turn" if ref > last_assistant else "history"
    return "other"


def _marks(req: Request, segments) -> tuple[Breakpoint, ...]:
    out = []
    for seg in segments:
        src = None
        if seg.kind in ("message", "system") and 0 <= seg.ref < len(req.messages):
            src = req.messages[seg.ref].cache_control
        elif seg.kind == "tool" and 0 <= seg.ref < len(req.tools):
            src = req.tools[seg.ref].cache_control
        if src:
            out.append(Breakpoint(seg.end, TTL_CODES.get(src, 300.0)))
    if out:
        return tuple(out)
    head = [s.end for s in segments if s.kind in ("system", "tool", "opaque")]
    ends = [s.end for s in segments if s.kind in _CONTENT]
    auto = ([Breakpoint(max(head))] if head else []) + ([Breakpoint(max(ends))] if ends else [])
    return tuple(auto)


def to_sim_requests(items: Iterable) -> list[SimRequest]:
    """Convert ``Prepared`` items (input order) into time-ordered :class:`SimRequest`s."""
    staged = []
    for pos, p in enumerate(items):
        r = p.request
        u = r.usage
        common = dict(session=r.session, index=r.index, source=r.provenance.source, record=r.provenance.record,
                      model=r.model, reported_prompt=u.prompt_tokens if u else None,
                      reported_cached=u.cached_tokens if u else None)
        if r.trace is not None:
            sim = SimRequest(order=pos, now=0.0, num_tokens=r.trace.input_length,
                             hashes=tuple(r.trace.hash_ids), trace_block=r.trace.block_size, **common)
        elif p.tokens is not None:
            segs = p.tokens.segments
            last_a = max((i for i, m in enumerate(r.messages) if m.role == "assistant"), default=-1)
            salt = r.extra.get("cache_salt") if isinstance(r.extra, Mapping) else None
            hidden = 0
            if r.extra.get("opaque_prefix_key") and not p.tokens.opaque_prefix_tokens and u and u.prompt_tokens:
                hidden = max(0, u.prompt_tokens - len(p.tokens.ids))
            sim = SimRequest(
                order=pos, now=0.0, num_tokens=len(p.tokens.ids), tokens=tuple(p.tokens.ids),
                spans=tuple((_group(s.kind, s.ref, last_a), s.start, s.end) for s in segs),
                boundaries=tuple(sorted({s.end for s in segs if s.kind in _CONTENT})),
                breakpoints=_marks(r, segs), salt=str(salt) if salt else None, hidden_tokens=hidden,
                exact=bool(p.tokens.exact), **common)
        else:
            continue
        staged.append((r.timestamp, pos, sim))
    timed = all(t is not None for t, _, _ in staged)
    if timed:
        staged.sort(key=lambda x: (x[0], x[1]))
    return [replace(s, order=i, now=float(t) if timed else float(i)) for i, (t, _, s) in enumerate(staged)]


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """Which cache to simulate. ``block_size`` None = the cache's default (vLLM 16,
    SGLang page 1, provider unit, a trace's own block size). ``rule_overrides``
    override provider constants (``ttl_s``, ``min_tokens``, prices). ``in_flight``
    (block caches): each request keeps its blocks pinned until ``in_flight`` later
    requests have started — a fixed concurrency window on the logical clock
    (1 = sequential)."""

    cache: str = "vllm"
    policy: str = "lru"
    block_size: int | None = None
    ttl_s: float | None = None
    model: str | None = None
    rule_overrides: Mapping[str, float] | None = None
    in_flight: int = 1

    def provider_rules(self, model: str | None = None) -> ProviderRules:
        return rules_for(self.cache, model or self.model, **dict(self.rule_overrides or {}))

    def unit(self, reqs: Sequence[SimRequest]) -> int:
        """Block size in tokens for this cache on these requests."""
        if self.cache in ("openai", "deepseek"):
            return self.provider_rules().unit_tokens
        if self.cache == "anthropic":
            return 1
        trace = next((r.trace_block for r in reqs if r.hashes is not None), 0)
        if trace:
            if self.block_size and self.block_size != trace:
                raise ConfigError(f"block traces fix the block size ({trace}); drop --block-size {self.block_size}")
            return trace
        return self.block_size or (1 if self.cache == "sglang" else 16)


@dataclass(frozen=True, slots=True)
class Baseline:
    """Cache-independent levels of each request: shared prefix and drift extent (tokens)."""

    lcp: tuple[int, ...]
    drift_end: tuple[int, ...]
    unique_tokens: int


def baseline(reqs: Sequence[SimRequest]) -> Baseline:
    """Longest prefix each request shares with any earlier one (unbounded radix tree
    over tokens; for traces, leading previously seen blocks) and how far its
    session's previous request overlapped it (the drift extent; none for traces)."""
    tree = RadixCache(page_size=1, cap_last_token=False)
    seen: set[int] = set()
    prev_len: dict[str, int] = {}
    lcp, drift, uniq = [], [], 0
    for r in reqs:
        if r.hashes is not None:
            k = 0
            while k < len(r.hashes) and r.hashes[k] in seen:
                k += 1
            seen.update(r.hashes)
            shared = min(r.num_tokens, k * r.trace_block)
        else:
            shared = tree.longest_prefix(r.tokens)
            tree.insert(r.tokens, r.now)
        lcp.append(shared)
        # Traces carry no content, so a changed block cannot be told from new text:
        # their misses are all "cold".
        overlap = 0 if r.hashes is not None else min(r.num_tokens, prev_len.get(r.session, 0))
        drift.append(max(shared, overlap))
        prev_len[r.session] = r.num_tokens
    uniq = tree.size_tokens + len(seen) * max((r.trace_block for r in reqs), default=0)
    return Baseline(tuple(lcp), tuple(drift), uniq)


class _Model:
    """One cache instance driven request by request: ``step(r) -> (cached, written, write_mult)``."""

    def __init__(self, spec: CacheSpec, unit: int, capacity_blocks: int | None, ttl: bool) -> None:
        self.spec, self.unit = spec, unit
        self._flight: deque = deque()
        c = spec.cache
        ttl_s = spec.ttl_s if ttl else None
        if c in ("vllm", "blocks"):
            order = "tail-first" if c == "vllm" else "head-first"
            pol = spec.policy if spec.policy not in ("ttl",) or ttl_s else "lru"
            self.cache = BlockHashCache(unit, capacity_blocks, pol, ttl_s=ttl_s,
                                        cap_last_token=(c == "vllm"), free_order=order)
        elif c == "sglang":
            cap = None if capacity_blocks is None else capacity_blocks * unit
            self.cache = RadixCache(unit, cap, spec.policy if spec.policy != "ttl" else "lru")
            self.ttl_s = None
        elif c in ("openai", "deepseek"):
            rules = spec.provider_rules()
            rules = replace(rules, ttl_s=(spec.ttl_s or rules.ttl_s) if ttl else 1e18)
            self.cache = UnitPrefixCache(rules, capacity_blocks, spec.policy if spec.policy != "ttl" else "lru")
        elif c == "anthropic":
            self.rules = spec.provider_rules()
            self.cache = AnthropicCache(self.rules)
            self.ttl = ttl
        else:
            raise ConfigError(f"unknown cache {c!r}; choose one of {', '.join(CACHES)}")

    def step(self, r: SimRequest) -> tuple[int, int, float]:
        c = self.spec.cache
        if r.hashes is not None:
            if c not in ("vllm", "blocks"):
                raise ConfigError(f"--cache {c} needs token prompts; block traces work with --cache vllm or blocks")
            cap = None if c == "blocks" else hit_cap_tokens(r.num_tokens, self.unit) // self.unit
            return min(r.num_tokens, self._blocks(r.hashes, r.now, cap) * self.unit), 0, 1.0
        if c == "anthropic":
            bps = r.breakpoints if self.ttl else tuple(Breakpoint(b.end, 1e18) for b in r.breakpoints)
            return self.cache.step(r.tokens, r.boundaries, bps, r.now, r.hidden_tokens)
        if c in ("vllm", "blocks"):
            hashes = hash_blocks(r.tokens, self.unit, ("cache_salt", r.salt) if r.salt else None)
            cap = hit_cap_tokens(r.num_tokens, self.unit, c == "vllm") // self.unit
            return self._blocks(hashes, r.now, cap) * self.unit, 0, 1.0
        if c == "sglang":
            cached = self.cache.match(r.tokens, r.now).cached_tokens
            self.cache.insert(r.tokens, r.now)
            return cached, 0, 1.0
        cached = self.cache.match(r.tokens, r.now, r.hidden_tokens).cached_tokens
        self.cache.insert(r.tokens, r.now, r.hidden_tokens)
        write_mult = 1.0
        return cached, 0, write_mult


    def _blocks(self, hashes: Sequence[int], now: float, cap: int | None) -> int:
        """Match then store a block chain; returns hit blocks. With ``in_flight`` > 1
        the chain stays pinned (vLLM ``ref_cnt``) until that many later requests began."""
        window = max(1, self.spec.in_flight)
        if window == 1:
            k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.unit
            self.cache.insert_hashes(hashes, now)
            return k
        while len(self._flight) >= window:
            self.cache.release(self._flight.popleft(), now)
        k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.unit
        self.cache.acquire(hashes, now)
        self._flight.append(hashes)
        return k


def _granular(spec: CacheSpec, unit: int, r: SimRequest, lcp: int) -> int:
    """The shared prefix after block/unit rounding and the engine's last-token cap."""
    if r.hashes is not None:
        if spec.cache == "vllm":
            return min(lcp // unit * unit, hit_cap_tokens(r.num_tokens, unit))
        return lcp
    if spec.cache in ("vllm", "sglang"):
        return min(lcp // unit * unit, hit_cap_tokens(r.num_tokens, unit))
    if spec.cache in ("openai", "deepseek", "blocks"):
        return lcp // unit * unit
    return lcp  # anthropic: breakpoint placement is measured by the shadow below


def simulate(reqs: Sequence[SimRequest], spec: CacheSpec, capacity_blocks: int | None = None,
             base: Baseline | None = None,
             drift_causes: Mapping[int, str] | None = None) -> list[RequestFigures]:
    """Run ``reqs`` through the cache of ``spec`` with ``capacity_blocks`` (None =
    unbounded) and return one :class:`RequestFigures` per request, in time order.
    ``drift_causes`` (request order → rule code) names why a request drifted."""
    unit = spec.unit(reqs)
    base = base or baseline(reqs)
    main = _Model(spec, unit, capacity_blocks, ttl=True)
    has_ttl = spec.cache in ("openai", "deepseek", "anthropic") or spec.ttl_s is not None
    ideal_m = _Model(spec, unit, None, ttl=False) if (capacity_blocks is not None or has_ttl) else None
    ttl_m = _Model(spec, unit, None, ttl=True) if (has_ttl and capacity_blocks is not None) else None
    gran_m = None
    if spec.cache == "anthropic":
        gran_m = _Model(replace(spec, rule_overrides={**dict(spec.rule_overrides or {}), "min_tokens": 0}),
                        unit, None, ttl=False)
    out = []
    for i, r in enumerate(reqs):
        cached, written, wmult = main.step(r)
        ideal = ideal_m.step(r)[0] if ideal_m else cached
        ttl_only = ttl_m.step(r)[0] if ttl_m else (cached if capacity_blocks is None else ideal)
        lcp = base.lcp[i]
        gran = gran_m.step(r)[0] if gran_m else _granular(spec, unit, r, lcp)
        lv = Levels(r.num_tokens, lcp, base.drift_end[i], gran, ideal, ttl_only, cached)
        out.append(_figures(r, unit, cached, ideal, written, wmult, lost_by_cause(lv),
                            (drift_causes or {}).get(i), lcp))
    return out


def _figures(r: SimRequest, unit: int, cached: int, ideal: int, written: int, wmult: float,
             lost: dict, drift_cause: str | None, shared: int = 0) -> RequestFigures:
    blocks_total = len(r.hashes) if r.hashes is not None else -(-r.num_tokens // unit)
    return RequestFigures(
        order=r.order, session=r.session, source=r.source, record=r.record,
        prompt_tokens=r.num_tokens, cached_tokens=cached, ideal_tokens=ideal,
        blocks_total=blocks_total, blocks_hit=-(-cached // unit) if r.hashes is not None else cached // unit,
        written_tokens=written, write_multiplier=wmult, shared_tokens=shared, lost=lost,
        segments=hits_by_segment(r.spans, cached) if r.spans else {},
        reported_prompt_tokens=r.reported_prompt, reported_cached_tokens=r.reported_cached,
        drift_cause=drift_cause)
