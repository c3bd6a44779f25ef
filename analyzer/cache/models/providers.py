"""Provider prompt caches as cache models: ``--cache openai``, ``anthropic``, ``gemini`` and ``deepseek``.

* ``openai`` / ``gemini`` / ``deepseek`` — :class:`~prefixcache.analyzer.cache.provider.caches.UnitPrefixCache`
  unit chains (OpenAI GPT-5.6 and later: explicit breakpoints);
* ``anthropic`` — :class:`~prefixcache.analyzer.cache.provider.caches.AnthropicCache` breakpoints.

Rules and prices come from :mod:`prefixcache.analyzer.cache.provider`; these models are
priced (:attr:`~.base.Traits.priced`) and expire by the provider's retention.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from prefixcache.analyzer.cache.index.eviction import POLICIES
from prefixcache.analyzer.cache.index.radix import RADIX_POLICIES
from prefixcache.analyzer.cache.models.base import CacheModel, CacheSpec, Hit, Traits, register
from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint, Scope, UnitPrefixCache
from prefixcache.analyzer.cache.workload import SimRequest


def scope_of(r: SimRequest) -> Scope:
    """The :class:`~.provider.caches.Scope` of ``r``'s cache entries (its model, thinking, ...)."""
    return Scope(r.scope[0], r.scope[1], r.head_end)

#: Retention that stands for "never expires" in the provider rules (seconds).
_FOREVER_S = 1e18
#: The traits every provider cache shares: priced, expiring by retention, no last-token cap.
_PROVIDER = Traits(unit="units", cap_last_token=False, priced=True, expiry="retention")


class _UnitModel(CacheModel):
    """Automatic provider caching over a chain of units (OpenAI, DeepSeek). When the
    rules store output (``deepseek-chat``), a call's generated tokens are stored with
    its prompt: they are known from the session's next prompt, which starts with the
    call's prompt followed by them (the V3.2 encoding re-renders a reply as generated)."""

    traits = _PROVIDER

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        rules = spec.provider_rules()
        rules = replace(rules, ttl_s=self.ttl_of(spec) if expire else _FOREVER_S)
        self.cache = UnitPrefixCache(rules, capacity_blocks, spec.policy)
        self._last: dict[str, SimRequest] = {}  # session → its previous request (stores_output)

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        return spec.provider_rules().block_size

    def step(self, r: SimRequest) -> Hit:
        self._tokens(r)
        chain = r.chain(self.block_size, salted=False)
        if self.cache.rules.stores_output:
            self._store_output(r, chain)
        cached = self.cache.match_hashes(chain, r.num_tokens, r.now, r.hidden_tokens).cached_tokens
        self.cache.insert_hashes(chain, r.num_tokens, r.now, r.hidden_tokens)
        return Hit(cached)

    def _store_output(self, r: SimRequest, chain: Sequence[int]) -> None:
        """Store the session's previous call's prompt + generated tokens (as ``r`` renders
        them) at that call's time, when ``r`` extends its prompt and it reported its output."""
        prev = self._last.get(r.session)
        self._last[r.session] = r
        if prev is None or not prev.reported_output or prev.tokens is None or r.tokens is None:
            return
        end = min(r.num_tokens, prev.num_tokens + prev.reported_output)
        if r.tokens[:prev.num_tokens] != prev.tokens:
            return
        self.cache.insert_hashes(chain[:end // self.block_size], end, prev.now, prev.hidden_tokens)


@register
class OpenAIModel(_UnitModel):
    """OpenAI, rule set by model name (:func:`~.provider.rules.openai_breakpoints`): up to GPT-5.5
    automatic (≥ 1,024 tokens, 128-token steps, 5 min idle retention); GPT-5.6 and later
    explicit breakpoints (the logged ``prompt_cache_breakpoint`` marks plus the implicit
    one at the end of the prompt unless the request chose ``mode: explicit``), exact
    prefixes, 4 written per request, the latest 80 considered, 30 min, writes 1.25×."""

    name = "openai"

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        rules = spec.provider_rules()
        self.marks = AnthropicCache(rules, self.ttl_of(spec) if expire else _FOREVER_S) \
            if rules.max_breakpoints else None

    def step(self, r: SimRequest) -> Hit:
        if self.marks is None:
            return super().step(r)
        tokens = self._tokens(r)
        bps = r.breakpoints
        if r.implicit_breakpoint and r.boundaries:
            bps = (*bps, Breakpoint(max(r.boundaries)))
        return Hit(*self.marks.step(tokens, r.boundaries, bps, r.now, r.hidden_tokens, r.prefix_hashes(), r.sent))

    def granular(self, r: SimRequest, shared: int) -> int:
        return shared if self.marks is not None else super().granular(r, shared)


@register
class AnthropicModel(CacheModel):
    """Anthropic breakpoints; the granular level is measured by a shadow cache with no
    minimum length and no expiry (breakpoint placement, not a formula), stepped on each
    :meth:`granular` call — once per request, in order.

    Breakpoints (:class:`~prefixcache.analyzer.cache.workload.Marks`): the logged ``cache_control``
    marks and the automatic mark; none — no write, no read — when the log shows the request set
    none; the agent's placement when the log cannot show them (Claude Code transcripts). Entries are
    scoped by model (and thinking / ``tool_choice`` for message entries): a model switch reads
    nothing the other model wrote.

    Retention: each breakpoint keeps its mark (``5m`` = 300 s, the default and the
    automatic mode's; ``1h`` = 3,600 s), refreshed on hit. ``--ttl`` (``spec.ttl_s``)
    replaces the retention of every entry, 1 h marks included — the same "what if the
    cache kept entries this long" question as for every other cache; write prices keep
    following the marks (1.25×, 2× for 1 h)."""

    name = "anthropic"
    traits = replace(_PROVIDER, unit="breakpoints")
    default_block_size = 1
    policies = (*POLICIES, "belady", *RADIX_POLICIES)  # breakpoint entries expire; nothing is evicted

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        self.cache = AnthropicCache(spec.provider_rules(), spec.ttl_s if expire else _FOREVER_S)
        self._shadow: AnthropicModel | None = None

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        return 1

    def step(self, r: SimRequest) -> Hit:
        tokens = self._tokens(r)
        return Hit(*self.cache.step(tokens, r.boundaries, r.anthropic_breakpoints, r.now, r.hidden_tokens,
                                    r.prefix_hashes(), r.sent, scope_of(r), r.blocks()))

    def granular(self, r: SimRequest, shared: int) -> int:
        if self._shadow is None:
            spec = replace(self.spec, rule_overrides={**dict(self.spec.rule_overrides or {}), "min_tokens": 0})
            self._shadow = AnthropicModel(spec, self.block_size, None, expire=False)
        return self._shadow.step(r).cached_tokens


@register
class DeepSeekModel(_UnitModel):
    """DeepSeek: 64-token units, nothing under 64 tokens, retention of hours (24 h)."""

    name = "deepseek"


@register
class GeminiModel(_UnitModel):
    """Gemini implicit caching (2.5 and later): automatic, exact prefixes counted per token,
    nothing under the model's minimum (:data:`~.provider.rules.GEMINI_MIN_TOKENS`), 1 h retention
    (not documented for implicit caches). Explicit ``cachedContents`` are not modeled."""

    name = "gemini"
