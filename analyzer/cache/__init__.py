"""Prefix-cache models: vLLM block hash, SGLang radix, provider rules, eviction, sweeps.

All share :class:`~.base.PrefixCache` (``match`` / ``insert`` / ``evict`` with typed
results); the replay engine's KV store is built on :class:`~.block_hash.BlockHashCache`.
"""

from prefixcache.analyzer.cache.base import BlockHash, EvictResult, InsertResult, MatchResult, PrefixCache, hit_cap_tokens
from prefixcache.analyzer.cache.block_hash import BlockHashCache, hash_blocks

__all__ = [
    "BlockHash", "BlockHashCache", "EvictResult", "InsertResult", "MatchResult",
    "PrefixCache", "hash_blocks", "hit_cap_tokens",
]
