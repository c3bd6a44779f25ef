"""The cache-model interface, its declared traits and the one registry of ``--cache`` names.

Each model wraps one cache structure and is stepped request by request in arrival
order: :meth:`CacheModel.step` returns the request's :class:`Hit` and stores it.
:meth:`CacheModel.granular` gives the "granular" level of the lost-token chain (what
the cache's rules let it serve of a shared prefix, before capacity and expiry).

What a model *is* — the unit it counts in, its hit cap, whether one LRU stack pass or
Belady's MIN apply, whether it is priced, how it expires, whether it runs slots — is
declared once on its class as :class:`Traits`; every other layer asks
:func:`traits_for` (or :func:`lru_stack_order` for the one-pass fast path) instead of
testing names. :data:`MODELS` (filled by :func:`register`) is the only place that
knows the names; the families live in :mod:`.vllm`, :mod:`.sglang`, :mod:`.providers`
and :mod:`.llamacpp`, and importing the package registers them all.

``expire=False`` builds the same model without expiry (the ideal and TTL-only shadow
levels of :func:`~prefixcache.analyzer.cache.simulate.simulator.simulate_stream`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal, Mapping, Sequence

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE, servable_tokens
from prefixcache.analyzer.cache.index.eviction import POLICIES, resolve_policy
from prefixcache.analyzer.cache.provider.rules import ProviderRules, rules_for
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Traits:
    """What a cache model is, declared once on its class (:attr:`CacheModel.traits`).

    * ``unit``: what one block is called in reports — ``blocks`` (vLLM block hashes),
      ``pages`` (SGLang radix pages), ``units`` (provider unit chains), ``breakpoints``
      (Anthropic-style marks, token-granular), ``slots`` (llama.cpp, token-granular).
    * ``cap_last_token``: the hit cap is ⌊(n−1)/B⌋·B (the last prompt token is always
      computed, :func:`~prefixcache.analyzer.cache.base.servable_tokens`); False: ⌊n/B⌋·B.
    * ``free_order``: for models that are one chain of fixed-size block hashes under an
      LRU free queue, the order a finished request's blocks join it (``tail-first``:
      vLLM v1 ``free_blocks`` reversed; ``head-first``: prompt order, the block-level
      replay of the Mooncake/Bailian papers). Only these models get the one-pass LRU
      stack profile and Belady's MIN bounds (both run on block chains). None: not a
      block chain.
    * ``priced``: a provider cache with a price table (cost, calls predicted vs reported).
    * ``expiry``: ``ttl`` (entries expire only under ``--ttl``), ``retention`` (the
      provider's retention, which ``--ttl`` replaces), ``none`` (no expiry at all).
    * ``slots``: an engine model configured by ``CacheSpec.engine_options`` (llama.cpp).
    * ``pool``: how a finite capacity holds a request — ``blocks`` (a block pool, what
      fits is kept), ``leaves`` (whole radix leaves are freed), None (no pool to warn about).
    * ``distinct``: what the base of ``N%`` capacities counts — ``chains`` (distinct
      blocks of the prompts' block chains) or ``tokens`` (distinct tokens ÷ page: radix).
    * ``partial_tail``: a block trace's last, partial block (an input length that is not a
      multiple of the block size) is stored like a full one — the block-level replay of the
      Mooncake/Bailian papers counts every logged hash id. False: only full blocks are cached
      (vLLM ``BlockPool.cache_full_blocks``: the partial block gets no hash and is freed
      first, taking room from cached ones while the request runs), :func:`pool_blocks`. Token
      prompts hash only full blocks either way.
    """

    unit: Literal["blocks", "pages", "units", "breakpoints", "slots"] = "blocks"
    cap_last_token: bool = True
    free_order: Literal["tail-first", "head-first"] | None = None
    priced: bool = False
    expiry: Literal["ttl", "retention", "none"] = "ttl"
    slots: bool = False
    pool: Literal["blocks", "leaves"] | None = None
    distinct: Literal["chains", "tokens"] = "chains"
    partial_tail: bool = True

    @property
    def block_chain(self) -> bool:
        """A chain of fixed-size block hashes: the stack profile and Belady's MIN apply."""
        return self.free_order is not None


def pool_blocks(traits: Traits, r: SimRequest, chain: Sequence[int], block_size: int) -> tuple[int, int]:
    """How a block cache holds ``r`` (``chain``: its block chain at ``block_size`` tokens): ``(stored,
    scratch)`` — the leading blocks of ``chain`` it caches, and the uncached blocks the request
    holds while it runs. Under a model that caches full blocks only (:attr:`Traits.partial_tail`
    False, vLLM) an n-token request stores ⌊n/B⌋ blocks (a block trace's last, partial id is never
    stored) and holds one scratch block when n is not a multiple of B: vLLM allocates ⌈n/B⌉
    physical blocks, hashes the full ones (``BlockPool.cache_full_blocks``) and, with no uncached
    free block left, evicts a cached one for the partial block (``get_new_blocks``), which it frees
    first. Otherwise (``blocks``, the papers' replay) every id is stored and nothing is scratch.
    Source: vLLM v1 ``vllm/v1/core/block_pool.py`` (docs/methods/cache-models.md); checked against
    vLLM's own ``BlockPool`` in tests/engines/test_vllm_blockpool.py."""
    if traits.partial_tail:
        return len(chain), 0
    stored = len(chain) if r.hashes is None else min(len(chain), r.num_tokens // block_size)
    return stored, int(r.num_tokens % block_size != 0)


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
        return model_class(self.cache)

    @property
    def traits(self) -> Traits:
        """The traits of :attr:`cache`'s model (ConfigError for an unknown name)."""
        return self.model_class().traits

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
    """One cache instance driven request by request (see the module docstring).

    Subclasses set ``name`` (the ``--cache`` name), ``traits``, ``default_block_size``
    (tokens) and ``policies`` (the ``--policy`` names it evicts by; ``belady``: an
    offline pass over blocks), and register with :func:`register`. A model built on one
    structure keeps it as ``cache`` (a :class:`~prefixcache.analyzer.cache.base.PrefixCache`:
    the block cache, the radix tree, a provider cache); llama.cpp's slots are not one."""

    name: ClassVar[str] = ""
    traits: ClassVar[Traits] = Traits()
    default_block_size: ClassVar[int] = DEFAULT_BLOCK_SIZE
    policies: ClassVar[tuple[str, ...]] = POLICIES

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        self.spec, self.block_size, self.capacity_blocks, self.expire = spec, block_size, capacity_blocks, expire

    @classmethod
    def fixed_block_size(cls, spec: CacheSpec) -> int | None:
        """The block size the cache's rules fix (providers), else None."""
        return None

    @classmethod
    def ttl_of(cls, spec: CacheSpec) -> float | None:
        """The idle expiry this cache applies under ``spec`` (seconds; None: none), by
        :attr:`Traits.expiry`: ``--ttl``; ``--ttl`` else the provider's retention; none."""
        if cls.traits.expiry == "none":
            return None
        if cls.traits.expiry == "retention" and spec.ttl_s is None:
            return spec.provider_rules().ttl_s
        return spec.ttl_s

    @abstractmethod
    def step(self, r: SimRequest) -> Hit:
        """Look ``r`` up, then store it: its cached (and written) tokens."""

    def granular(self, r: SimRequest, shared: int) -> int:
        """Tokens of a ``shared``-token prefix the cache's rules can serve (no capacity or
        expiry): whole blocks under the model's hit cap (:attr:`Traits.cap_last_token`)."""
        return servable_tokens(shared, r.num_tokens, self.block_size, self.traits.cap_last_token)

    def _tokens(self, r: SimRequest) -> tuple[int, ...]:
        if r.tokens is None:
            chains = " or ".join(n for n, m in MODELS.items() if m.traits.block_chain)
            raise ConfigError(f"--cache {self.name} needs token prompts, and {r.source} is a block trace "
                              f"(hash ids only); block traces work with --cache {chains}")
        return r.tokens


#: Every cache model by ``--cache`` name, in registration order (the order the CLI
#: lists them: the package imports vllm, sglang, providers, llamacpp in that order).
MODELS: dict[str, type[CacheModel]] = {}


def register(cls: type[CacheModel]) -> type[CacheModel]:
    """Class decorator: add a model to :data:`MODELS` under its ``name``."""
    MODELS[cls.name] = cls
    return cls


def model_class(cache: str) -> type[CacheModel]:
    """The registered model named ``cache``; ConfigError for an unknown name."""
    if cache not in MODELS:
        raise ConfigError(f"unknown cache {cache!r}; choose one of {', '.join(MODELS)}")
    return MODELS[cache]


def traits_for(cache: str) -> Traits:
    """The :class:`Traits` of the model named ``cache``; ConfigError for an unknown name."""
    return model_class(cache).traits


def lru_stack_order(spec: CacheSpec) -> Literal["tail-first", "head-first"] | None:
    """The free-queue order under which one LRU stack-distance pass gives the figures of
    every capacity of ``spec``, or None when that pass does not apply.

    It applies to block-chain models (:attr:`Traits.free_order`) under ``lru`` with no
    TTL and sequential requests (``in_flight`` ≤ 1): then a capacity-``c`` cache holds
    exactly the ``c`` most recently freed blocks (Mattson et al. 1970, the stack
    property of LRU), which :mod:`~prefixcache.analyzer.cache.simulate.stack_profile`
    and the fleet's pooled replicas rely on. ConfigError for an unknown cache name."""
    order = spec.traits.free_order
    if order is None or spec.policy != "lru" or spec.ttl_s is not None or spec.in_flight > 1:
        return None
    return order


def make_model(spec: CacheSpec, block_size: int, capacity_blocks: int | None = None,
               expire: bool = True) -> CacheModel:
    """A fresh model of ``spec.cache`` (ConfigError for an unknown name)."""
    return spec.model_class()(spec, block_size, capacity_blocks, expire)
