"""Cache models the simulator drives: one class per ``--cache``, a registry by name.

Each model wraps one cache structure and is stepped request by request in arrival
order: :meth:`CacheModel.step` returns the request's :class:`Hit` and stores it.
:meth:`CacheModel.granular` gives the "granular" level of the lost-token chain (what
the cache's rules let it serve of a shared prefix, before capacity and expiry).

* ``vllm``   — :class:`~.block_hash.BlockHashCache`: 16-token blocks, ⌊(n−1)/B⌋·B cap,
  tail-first LRU free queue; block traces use their own block size and hashes;
* ``blocks`` — block-level replay as the Mooncake/Bailian papers count it: leading
  cached blocks, no last-token cap, blocks touched in prompt order;
* ``sglang`` — :class:`~.radix.RadixTree`: page 1, n−1 cap, leaf eviction;
* ``openai`` / ``deepseek`` — :class:`~.provider.UnitPrefixCache` unit chains;
* ``anthropic`` — :class:`~.provider.AnthropicCache` breakpoints;
* ``llamacpp`` — :mod:`.llamacpp`: server slots and the host-RAM prompt cache.

``expire=False`` builds the same model without expiry (the ideal and TTL-only shadow
levels of :func:`~.simulator.simulate`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, replace
from typing import ClassVar, Mapping, Sequence

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE, hit_cap_tokens, servable_tokens
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.index.eviction import POLICIES, resolve_policy
from prefixcache.analyzer.cache.provider.rules import AnthropicCache, Breakpoint, ProviderRules, UnitPrefixCache, rules_for
from prefixcache.analyzer.cache.index.radix import RADIX_POLICIES, RadixTree
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError

#: Retention that stands for "never expires" in the provider rules (seconds).
_FOREVER_S = 1e18


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """Which cache to simulate. ``block_size`` None = the cache's default (vLLM 16,
    SGLang page 1, provider unit, a trace's own block size). ``ttl_s``: idle expiry
    (seconds, logical clock; None = none). ``rule_overrides`` override provider
    constants (``min_tokens``, prices). ``in_flight`` (block caches): each request keeps
    its blocks pinned until ``in_flight`` later requests have started — a fixed
    concurrency window on the logical clock (1 = sequential). ``engine_options``: knobs of
    an engine model (llama.cpp: ``slots``, ``slot_similarity``, ``cache_ram_mib``,
    ``kv_bytes_per_token``). The deprecated policy
    name ``ttl`` is resolved here (:func:`~.eviction.resolve_policy`)."""

    cache: str = "vllm"
    policy: str = "lru"
    block_size: int | None = None
    ttl_s: float | None = None
    model: str | None = None
    rule_overrides: Mapping[str, float] | None = None
    in_flight: int = 1
    engine_options: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if self.policy == "ttl":
            policy, ttl_s = resolve_policy(self.policy, self.ttl_s)
            object.__setattr__(self, "policy", policy)
            object.__setattr__(self, "ttl_s", ttl_s)

    def provider_rules(self, model: str | None = None) -> ProviderRules:
        """The provider's rules for ``model`` (default: the spec's) with the overrides."""
        return rules_for(self.cache, model or self.model, **dict(self.rule_overrides or {}))

    def model_class(self) -> type["CacheModel"]:
        """The registered model of :attr:`cache`; ConfigError for an unknown name."""
        if self.cache not in MODELS:
            raise ConfigError(f"unknown cache {self.cache!r}; choose one of {', '.join(MODELS)}")
        return MODELS[self.cache]

    def block_size_for(self, reqs: Sequence[SimRequest]) -> int:
        """Block size in tokens for this cache on these requests: the provider's unit,
        a block trace's own size (ConfigError if ``block_size`` disagrees), else
        ``block_size`` or the cache's default."""
        cls = self.model_class()
        fixed = cls.fixed_block_size(self)
        if fixed:
            return fixed
        trace = next((r.block_size for r in reqs if r.hashes is not None), 0)
        if trace:
            if self.block_size and self.block_size != trace:
                raise ConfigError(f"block traces fix the block size ({trace}); drop --block-size {self.block_size}")
            return trace
        return self.block_size or cls.default_block_size


@dataclass(frozen=True, slots=True)
class Hit:
    """One request under one cache (tokens): read from cache, written to cache (where
    the provider bills writes), and the write price multiplier."""

    cached_tokens: int
    written_tokens: int = 0
    write_multiplier: float = 1.0


class CacheModel(ABC):
    """One cache instance driven request by request (see the module docstring)."""

    name: ClassVar[str] = ""
    default_block_size: ClassVar[int] = DEFAULT_BLOCK_SIZE
    #: ``--policy`` names the cache can evict by (``belady``: an offline pass over blocks).
    policies: ClassVar[tuple[str, ...]] = POLICIES

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        self.spec, self.block_size, self.capacity_blocks, self.expire = spec, block_size, capacity_blocks, expire

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        """The block size the cache's rules fix (providers), else None."""
        return None

    @classmethod
    def ttl_of(cls, spec: CacheSpec) -> float | None:
        """The idle expiry this cache applies under ``spec`` (seconds; None: none)."""
        return spec.ttl_s

    @abstractmethod
    def step(self, r: SimRequest) -> Hit:
        """Look ``r`` up, then store it: its cached (and written) tokens."""

    def granular(self, r: SimRequest, shared: int) -> int:
        """Tokens of a ``shared``-token prefix the cache's rules can serve (no capacity or expiry)."""
        return servable_tokens(shared, r.num_tokens, self.block_size)

    def _tokens(self, r: SimRequest) -> tuple[int, ...]:
        if r.tokens is None:
            raise ConfigError(f"--cache {self.name} needs token prompts; block traces work with --cache vllm or blocks")
        return r.tokens


#: Every cache model by ``--cache`` name, in the order the CLI lists them.
MODELS: dict[str, type[CacheModel]] = {}


def register(cls: type[CacheModel]) -> type[CacheModel]:
    """Class decorator: add a model to :data:`MODELS` under its ``name``."""
    MODELS[cls.name] = cls
    return cls


def make_model(spec: CacheSpec, block_size: int, capacity_blocks: int | None = None,
               expire: bool = True) -> CacheModel:
    """A fresh model of ``spec.cache`` (ConfigError for an unknown name)."""
    return spec.model_class()(spec, block_size, capacity_blocks, expire)


@register
class VllmModel(CacheModel):
    """vLLM v1 prefix caching: chained block hashes, n−1 cap, tail-first LRU free queue."""

    name = "vllm"
    policies = (*POLICIES, "belady")
    cap_last_token: ClassVar[bool] = True
    free_order: ClassVar[str] = "tail-first"

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        self._window = max(1, spec.in_flight)
        self.cache = BlockHashCache(block_size, capacity_blocks, spec.policy, ttl_s=spec.ttl_s if expire else None,
                                    cap_last_token=self.cap_last_token, free_order=self.free_order,
                                    ordered=self._window > 1)  # unbounded and sequential: no order needed
        self._flight: deque = deque()

    def step(self, r: SimRequest) -> Hit:
        cap = hit_cap_tokens(r.num_tokens, self.block_size) // self.block_size if self.cap_last_token else None
        return Hit(min(r.num_tokens, self._blocks(r.chain(self.block_size), r.now, cap) * self.block_size))

    def _blocks(self, hashes: Sequence[int], now: float, cap: int | None) -> int:
        """Match then store a block chain; returns hit blocks. With ``in_flight`` > 1
        the chain stays pinned (vLLM ``ref_cnt``) until that many later requests began."""
        if self._window == 1:
            k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.block_size
            self.cache.insert_hashes(hashes, now)
            return k
        while len(self._flight) >= self._window:
            self.cache.release(self._flight.popleft(), now)
        k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.block_size
        self.cache.acquire(hashes, now)
        self._flight.append(hashes)
        return k


@register
class BlocksModel(VllmModel):
    """Block-level replay (Mooncake, Bailian): leading cached blocks, no last-token cap,
    blocks touched in prompt order."""

    name = "blocks"
    cap_last_token = False
    free_order = "head-first"

    def granular(self, r: SimRequest, shared: int) -> int:
        return shared if r.hashes is not None else servable_tokens(shared, r.num_tokens, self.block_size, False)


@register
class SglangModel(CacheModel):
    """SGLang's radix cache: the radix tree with pages, the n−1 cap and leaf eviction
    (capacity in tokens = blocks × page; :meth:`~.radix.RadixTree.serve`: the matched
    path is locked while the request's uncached tokens are allocated, unlocked leaves
    are evicted when they would not fit); no expiry."""

    name = "sglang"
    default_block_size = 1
    policies = RADIX_POLICIES

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        cap = None if capacity_blocks is None else capacity_blocks * block_size
        self.cache = RadixTree(block_size, cap, spec.policy)

    @classmethod
    def ttl_of(cls, spec: CacheSpec) -> float | None:
        return None

    def step(self, r: SimRequest) -> Hit:
        return Hit(self.cache.serve(self._tokens(r), r.now)[0])


class _UnitModel(CacheModel):
    """Automatic provider caching over a chain of units (OpenAI, DeepSeek). When the
    rules store output (``deepseek-chat``), a call's generated tokens are stored with
    its prompt: they are known from the session's next prompt, which starts with the
    call's prompt followed by them (the V3.2 encoding re-renders a reply as generated)."""

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        rules = spec.provider_rules()
        rules = replace(rules, ttl_s=self.ttl_of(spec) if expire else _FOREVER_S)
        self.cache = UnitPrefixCache(rules, capacity_blocks, spec.policy)
        self._last: dict[str, SimRequest] = {}  # session → its previous request (stores_output)

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        return spec.provider_rules().block_size

    @classmethod
    def ttl_of(cls, spec: CacheSpec) -> float | None:
        return spec.ttl_s if spec.ttl_s is not None else spec.provider_rules().ttl_s

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

    def granular(self, r: SimRequest, shared: int) -> int:
        return servable_tokens(shared, r.num_tokens, self.block_size, False)


@register
class OpenAIModel(_UnitModel):
    """OpenAI, rule set by model name (:func:`~.provider.openai_breakpoints`): up to GPT-5.5
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

    Retention: each breakpoint keeps its mark (``5m`` = 300 s, the default and the
    automatic mode's; ``1h`` = 3,600 s), refreshed on hit. ``--ttl`` (``spec.ttl_s``)
    replaces the retention of every entry, 1 h marks included — the same "what if the
    cache kept entries this long" question as for every other cache; write prices keep
    following the marks (1.25×, 2× for 1 h)."""

    name = "anthropic"
    default_block_size = 1
    policies = (*POLICIES, "belady", *RADIX_POLICIES)  # breakpoint entries expire; nothing is evicted

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        self.cache = AnthropicCache(spec.provider_rules(), spec.ttl_s if expire else _FOREVER_S)
        self._shadow: AnthropicModel | None = None

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        return 1

    @classmethod
    def ttl_of(cls, spec: CacheSpec) -> float | None:
        """``--ttl`` when given (it replaces every breakpoint's retention, 5 min and 1 h marks
        alike), else the default breakpoint TTL (5 min; ``1h`` marks live longer)."""
        return spec.ttl_s if spec.ttl_s is not None else spec.provider_rules().ttl_s

    def step(self, r: SimRequest) -> Hit:
        tokens = self._tokens(r)
        return Hit(*self.cache.step(tokens, r.boundaries, r.breakpoints, r.now, r.hidden_tokens, r.prefix_hashes(),
                                    r.sent))

    def granular(self, r: SimRequest, shared: int) -> int:
        if self._shadow is None:
            spec = replace(self.spec, rule_overrides={**dict(self.spec.rule_overrides or {}), "min_tokens": 0})
            self._shadow = AnthropicModel(spec, self.block_size, None, expire=False)
        return self._shadow.step(r).cached_tokens


@register
class DeepSeekModel(_UnitModel):
    """DeepSeek: 64-token units, nothing under 64 tokens, retention of hours (24 h)."""

    name = "deepseek"


from prefixcache.analyzer.cache.models import llamacpp as _llamacpp  # noqa: E402,F401  (registers ``llamacpp``)

#: ``--cache`` names.
CACHES = tuple(MODELS)
