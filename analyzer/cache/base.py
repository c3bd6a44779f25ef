"""The one interface every prefix-cache model implements, and its typed results.

A cache model answers two questions about a prompt (a token sequence): how many
leading tokens are already cached (:meth:`PrefixCache.match`, read-only), and
what changes when the request has run (:meth:`PrefixCache.insert`: hits are
touched/refreshed, new blocks stored, and whatever no longer fits is evicted).
``now`` is a logical clock in seconds taken from the logged timestamps (or the
request index when the log has none), never the wall clock, so two runs print the
same numbers. Evictions are reported block by block so that a replay engine
holding real KV for those blocks can free it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType, Protocol, Sequence, runtime_checkable

#: A block's identity: a 64-bit unsigned int. Only equality matters (two equal
#: hashes mean "same prefix up to and including this block"); the bit pattern is
#: not vLLM's (see :mod:`.block_hash`).
BlockHash = NewType("BlockHash", int)


@dataclass(frozen=True, slots=True)
class MatchResult:
    """A lookup: ``cached_tokens`` leading tokens are served from cache.

    ``block_hashes`` are the hashes of the matched leading blocks, in prompt
    order (``len == cached_tokens // block_size`` for block caches; one entry per
    matched node/unit for the other models).
    """

    cached_tokens: int
    block_hashes: tuple[BlockHash, ...] = ()


@dataclass(frozen=True, slots=True)
class InsertResult:
    """The effect of storing a request's blocks.

    ``inserted``: blocks newly stored (not previously cached). ``evicted``: every
    block whose entry left the cache during this call (capacity eviction or TTL
    expiry), oldest decision first, so an engine can free the matching KV.
    """

    inserted: tuple[BlockHash, ...] = ()
    evicted: tuple[BlockHash, ...] = ()


@dataclass(frozen=True, slots=True)
class EvictResult:
    """Blocks removed by an explicit eviction or expiry sweep, and tokens freed."""

    evicted: tuple[BlockHash, ...] = ()
    freed_tokens: int = 0


@runtime_checkable
class PrefixCache(Protocol):
    """A prefix cache over token sequences (tokens: ``Sequence[int]``).

    ``block_size`` is the caching granularity in tokens (1 for a token-level
    radix tree). ``match`` must not change the cache; ``insert`` refreshes hits,
    stores the rest and evicts to capacity; ``evict`` frees at least
    ``num_tokens`` tokens (fewer if the cache holds less).
    """

    block_size: int

    def match(self, tokens: Sequence[int], now: float) -> MatchResult: ...

    def insert(self, tokens: Sequence[int], now: float) -> InsertResult: ...

    def evict(self, num_tokens: int, now: float) -> EvictResult: ...


def hit_cap_tokens(num_tokens: int, block_size: int, cap_last_token: bool = True) -> int:
    """Longest hit an engine allows for a prompt of ``num_tokens`` tokens.

    vLLM v1 (`KVCacheManager.get_computed_blocks`) and SGLang
    (`Req._compute_max_prefix_len`) both keep the last prompt token uncached so
    its logits can be computed: hit ≤ ⌊(n−1)/B⌋·B. Without the cap (block traces
    counted as given, provider rules): ⌊n/B⌋·B.
    """
    n = num_tokens - 1 if cap_last_token else num_tokens
    if n <= 0:
        return 0
    return (n // block_size) * block_size


def block_aligned(shared: int, prompt_tokens: int, block_size: int = 16) -> int:
    """Tokens a block-granular prefix cache can serve (tokens).

    vLLM v1 rule: only full blocks are cached, and at least the last prompt token is
    always computed, so a hit is at most ``⌊(n−1)/B⌋·B`` tokens:
    ``⌊min(shared, n−1)/B⌋·B``. ``block_size`` must be ≥ 1 (ValueError otherwise).
    """
    if block_size < 1:
        raise ValueError(f"block size must be >= 1, got {block_size}")
    if prompt_tokens <= 0:
        return 0
    return (min(shared, prompt_tokens - 1) // block_size) * block_size
