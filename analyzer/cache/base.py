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
from typing import NewType, Protocol, Sequence, TypeVar, runtime_checkable

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.sequence import DEFAULT_BLOCK_SIZE

__all__ = [
    "DEFAULT_BLOCK_SIZE", "BlockHash", "EvictResult", "InsertResult", "MatchResult", "PrefixCache", "floor_blocks",
    "hit_cap_tokens", "servable_tokens",
]

#: A block's identity: a 64-bit unsigned int. Only equality matters (two equal
#: hashes mean "same prefix up to and including this block"); the bit pattern is
#: not vLLM's (see :mod:`.block_hash`).
BlockHash = NewType("BlockHash", int)

T = TypeVar("T")


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


def servable_tokens(shared: int, prompt_tokens: int, block_size: int = DEFAULT_BLOCK_SIZE,
                    cap_last_token: bool = True) -> int:
    """Tokens of a ``shared``-token cached prefix that a block-granular engine serves
    to a prompt of ``prompt_tokens`` tokens: ``⌊min(shared, n−1)/B⌋·B``.

    The one cap rule of every cache model: only whole blocks of ``block_size``
    tokens are served, and the last prompt token is always computed so its logits
    exist — vLLM v1 ``KVCacheManager.get_computed_blocks`` (``max_cache_hit_length
    = num_tokens − 1``) and SGLang ``Req._compute_max_prefix_len`` (``input_len − 1``).
    ``cap_last_token=False`` drops that cap (block traces counted as given,
    provider rules): ``⌊min(shared, n)/B⌋·B``. 0 for an empty prompt; ConfigError
    for ``block_size`` < 1.
    """
    if block_size < 1:
        raise ConfigError(f"block size must be >= 1, got {block_size}")
    limit = prompt_tokens - 1 if cap_last_token else prompt_tokens
    if limit <= 0 or shared <= 0:
        return 0
    return floor_blocks(min(shared, limit), block_size)


def floor_blocks(n: T, block_size: int) -> T:
    """``n`` tokens rounded down to whole blocks of ``block_size`` tokens: ``⌊n/B⌋·B``.

    The one flooring of the cache layers (served hits, full pages, unit steps, whole
    blocks hashed). ``n``: an int, or a numpy integer/float array (element-wise, same
    type back); ``block_size`` ≥ 1 (not checked: callers validated it, and this runs
    per request).
    """
    return n // block_size * block_size


def hit_cap_tokens(num_tokens: int, block_size: int, cap_last_token: bool = True) -> int:
    """Longest hit an engine allows for a prompt of ``num_tokens`` tokens: the
    special case ``shared = num_tokens`` of :func:`servable_tokens`, ⌊(n−1)/B⌋·B
    (⌊n/B⌋·B without the last-token cap)."""
    return servable_tokens(num_tokens, num_tokens, block_size, cap_last_token)

