"""Prefix-cache models: vLLM block hash, SGLang radix, provider rules, eviction, sweeps.

Inner layers, innermost first (``tests/test_layout.py`` checks them): :mod:`.base` (the
:class:`~.base.PrefixCache` interface, its typed results, the one cap rule
:func:`~.base.servable_tokens`, the one flooring :func:`~.base.floor_blocks`, the default
block size) < :mod:`.index` (:class:`~.index.block_hash.BlockHashCache`,
:class:`~.index.radix.RadixTree` — also lint's prefix index —, eviction) < :mod:`.provider`
(rules, prices, cost, provider caches) < :mod:`.workload`, :mod:`.capacity` (simulator
requests, capacity specs) < :mod:`.models` (one :class:`~.models.CacheModel` per ``--cache``,
its traits, the registry) < :mod:`.simulate` (the ``simulate`` study and document) <
:mod:`.fleet` (``simulate --replicas``). The replay engine's KV store is built on
``BlockHashCache``.
"""

from prefixcache.analyzer.cache.base import (
    DEFAULT_BLOCK_SIZE, BlockHash, EvictResult, InsertResult, MatchResult, PrefixCache, hit_cap_tokens,
    servable_tokens,
)
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache, hash_blocks

__all__ = [
    "DEFAULT_BLOCK_SIZE", "BlockHash", "BlockHashCache", "EvictResult", "InsertResult", "MatchResult",
    "PrefixCache", "hash_blocks", "hit_cap_tokens", "servable_tokens",
]
