"""Prefix-cache models: vLLM block hash, SGLang radix, provider rules, eviction, sweeps.

The structures share :class:`~.base.PrefixCache` (``match`` / ``insert`` / ``evict``
with typed results): :class:`~.block_hash.BlockHashCache`, :class:`~.radix.RadixTree`
(also lint's prefix index) and the provider caches; the replay engine's KV store is
built on ``BlockHashCache``. :mod:`.models` wraps each in a :class:`~.models.CacheModel`
the simulator steps; :mod:`.study` and :mod:`.report` build the ``simulate`` report.
One cap rule (:func:`~.base.servable_tokens`) and one default block size
(:data:`~.base.DEFAULT_BLOCK_SIZE`) serve them all.
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
