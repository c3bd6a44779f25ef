"""vLLM v1 block-hash prefix cache: chained full-block hashes, LRU free queue.

Semantics implemented (vLLM 0.33, `vllm/v1/core/kv_cache_utils.py`,
`block_pool.py`, `kv_cache_manager.py`):

* Only **full** blocks of ``block_size`` tokens are hashed and cached; each block's
  hash covers (parent hash, the block's tokens, extra keys), so equal hashes mean
  equal prefixes. Extra keys (LoRA name, ``cache_salt``) change the chain from
  block 0 on.
* A lookup walks the chain from block 0 and stops at the first miss; the hit is
  capped at ⌊(n−1)/B⌋·B tokens so the last prompt token is always computed
  (``max_cache_hit_length = num_tokens − 1``; :func:`~.base.servable_tokens`).
* Eviction: one LRU free queue. A finished request's blocks are freed **tail
  first** (``free_blocks(reversed(blocks))``), so among blocks freed together the
  last block of the chain is evicted first; allocation evicts from the head.
  Blocks of requests in flight are pinned (``ref_cnt > 0``).

Hash function: vLLM's default is SHA-256 over pickled tuples. Here each block is
XXH3-64 of its tokens packed as little-endian int64, seeded with the parent hash.
Only hash *equality* matters for a simulation, so the bit patterns need not match
vLLM's (they differ even between vLLM runs unless ``PYTHONHASHSEED`` is fixed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Sequence

import xxhash

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.cache.base import (
    DEFAULT_BLOCK_SIZE, BlockHash, EvictResult, InsertResult, MatchResult, floor_blocks, hit_cap_tokens,
)
from prefixcache.analyzer.cache.index.compact import Shared, int64_bytes
from prefixcache.analyzer.cache.index.eviction import make_policy

#: Seed of the first block's parent (vLLM's ``NONE_HASH`` analogue).
NONE_HASH = xxhash.xxh3_64_intdigest(b"prefixcache-none-hash")
_xxh = xxhash.xxh3_64_intdigest


def chain_seed(extra_keys: tuple | None) -> int:
    """Parent hash of block 0 for a namespace (LoRA, cache salt); ``NONE_HASH`` for none."""
    if not extra_keys:
        return NONE_HASH
    return _xxh(repr(extra_keys).encode(), NONE_HASH)


def hash_blocks(tokens: Sequence[int], block_size: int,
                extra_keys: tuple | Mapping[int, tuple] | None = None,
                parent: int | None = None) -> list[BlockHash]:
    """Chained hashes of the full blocks of ``tokens`` (``len(tokens) // block_size`` of them).

    ``extra_keys``: a tuple applies to the whole chain (vLLM puts LoRA on every
    block and ``cache_salt`` on block 0 — with chaining both change every hash);
    a mapping ``{block_index: tuple}`` mixes keys into single blocks (multimodal
    items). ``parent`` continues an existing chain. Token ids must fit int64.
    """
    if block_size <= 0:
        raise ConfigError(f"block size must be positive, got {block_size}")
    per_block = extra_keys if isinstance(extra_keys, Mapping) else None
    h = parent if parent is not None else chain_seed(None if per_block is not None else extra_keys)
    data = int64_bytes(tokens)
    step = block_size * 8
    out: list[BlockHash] = []
    append = out.append
    for start in range(0, floor_blocks(len(data), step), step):
        if per_block is not None and (key := per_block.get(start // step)) is not None:
            h = _xxh(repr(key).encode(), h)
        h = _xxh(data[start:start + step], h)
        append(h)
    return out


class BlockHashCache:
    """A vLLM v1-style prefix cache over chained block hashes (implements ``PrefixCache``).

    ``capacity_blocks``: usable KV blocks (vLLM's ``num_gpu_blocks − 1``); None =
    unbounded. ``policy``: an :mod:`.eviction` name (``lru`` is vLLM's). ``ttl_s``:
    blocks unused for longer expire (provider retention). ``cap_last_token``: apply
    the ⌊(n−1)/B⌋·B hit cap (False to count block traces as given).
    ``free_order``: ``tail-first`` (vLLM) or ``head-first`` (plain LRU over the
    request's blocks in prompt order). ``extra_keys``: namespace of every chain.
    ``ordered=False`` (unbounded plain LRU only, nothing in flight): no eviction order is
    kept — nothing is ever evicted — which saves about half the memory per block;
    :meth:`evict` then raises ConfigError.

    ``scratch`` (of :meth:`insert_hashes`, :meth:`acquire`, :meth:`release`): blocks a request
    holds that are never cached — its last, partial block — so that the pool is physical, as
    vLLM's is: a request allocates ⌈n/B⌉ blocks, only the ⌊n/B⌋ full ones get a hash, and while
    it runs its scratch blocks take room from cached ones (``BlockPool.get_new_blocks`` evicts a
    cached block when no uncached free block is left; a freed uncached block is reused first).
    """

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE, capacity_blocks: int | None = None,
                 policy: str = "lru", *, ttl_s: float | None = None,
                 cap_last_token: bool = True, free_order: str = "tail-first",
                 extra_keys: tuple | None = None, ordered: bool = True) -> None:
        if block_size <= 0:
            raise ConfigError(f"block size must be positive, got {block_size}")
        if capacity_blocks is not None and capacity_blocks < 0:
            raise ConfigError(f"capacity must be >= 0 blocks, got {capacity_blocks}")
        if free_order not in ("tail-first", "head-first"):
            raise ConfigError(f"free_order must be tail-first or head-first, got {free_order!r}")
        if policy == "ttl" and ttl_s is None:
            raise ConfigError("policy 'ttl' needs ttl_s")
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self.policy_name = policy
        self.ttl_s = ttl_s
        self.cap_last_token = cap_last_token
        self.free_order = free_order
        self.extra_keys = extra_keys
        self._policy = make_policy(policy, block_size)
        self._ordered = ordered or capacity_blocks is not None or ttl_s is not None or policy != "lru"
        self._last: dict[BlockHash, float] = {}  # cached block -> last use (logical s), oldest use first
        self._latest = float("-inf")  # latest use seen: while uses come in time order, _last is sorted by time
        self._in_order = True
        self._pins: dict[BlockHash, int] = {}    # in-flight ref counts
        self._scratch = 0                         # uncached blocks held by requests in flight
        self._memo: tuple[object, list[BlockHash]] = ((), [])

    # -- hashing -------------------------------------------------------------------
    def hashes(self, tokens: Sequence[int]) -> list[BlockHash]:
        """Full-block hashes of ``tokens`` (memoized for the last tuple seen, so a
        ``match`` then ``insert`` of one prompt hashes it once; lists are rehashed
        since they may change in place)."""
        if isinstance(tokens, (tuple, Shared)) and self._memo[0] is tokens:
            return self._memo[1]
        hashes = hash_blocks(tokens, self.block_size, self.extra_keys)
        if isinstance(tokens, (tuple, Shared)):
            self._memo = (tokens, hashes)
        return hashes

    def __len__(self) -> int:
        """Cached blocks (including pinned ones)."""
        return len(self._last)

    def __contains__(self, block: object) -> bool:
        return block in self._last

    def _live(self, h: BlockHash, now: float) -> bool:
        last = self._last.get(h)
        return last is not None and (self.ttl_s is None or now - last <= self.ttl_s)

    # -- PrefixCache ---------------------------------------------------------------
    def match(self, tokens: Sequence[int], now: float) -> MatchResult:
        """Leading cached full blocks of ``tokens``, capped per vLLM; read-only."""
        cap = hit_cap_tokens(len(tokens), self.block_size, self.cap_last_token) // self.block_size
        return self.match_hashes(self.hashes(tokens), now, cap)

    def match_hashes(self, hashes: Sequence[int], now: float,
                     max_blocks: int | None = None) -> MatchResult:
        """Leading cached blocks of a hash chain (block traces), at most ``max_blocks``."""
        limit = len(hashes) if max_blocks is None else min(max_blocks, len(hashes))
        k = 0
        if self.ttl_s is None:
            last = self._last
            while k < limit and hashes[k] in last:
                k += 1
        else:
            while k < limit and self._live(hashes[k], now):
                k += 1
        return MatchResult(k * self.block_size, tuple(hashes[:k]))

    def insert(self, tokens: Sequence[int], now: float) -> InsertResult:
        """Store every full block of ``tokens`` after the request ran (hits refreshed); a last,
        partial block is scratch while it runs (see the class docstring)."""
        return self.insert_hashes(self.hashes(tokens), now, int(len(tokens) % self.block_size != 0))

    def insert_hashes(self, hashes: Sequence[int], now: float, scratch: int = 0) -> InsertResult:
        """Acquire and release a request's blocks at ``now`` (``scratch``: its uncached blocks,
        see the class docstring); see :meth:`acquire`. Plain LRU with nothing in flight and no
        TTL takes a fast path with the same effect: the request's blocks are touched in free
        order, then the least recent evicted — the victims :meth:`acquire` would pick with
        them pinned, then :meth:`release`'s."""
        if self.policy_name == "lru" and self.ttl_s is None and not self._pins and not self._scratch:
            return self._insert_lru(hashes, now, scratch)
        inserted, evicted = self.acquire(hashes, now, scratch)
        evicted += self.release(hashes, now, scratch)
        return InsertResult(tuple(inserted), tuple(evicted))

    def _insert_lru(self, hashes: Sequence[int], now: float, scratch: int = 0) -> InsertResult:
        uniq = list(dict.fromkeys(hashes))
        last = self._last
        inserted = [h for h in uniq if h not in last]
        if not self._ordered:  # unbounded: membership is all that matters
            for h in uniq:
                last[h] = now
            return InsertResult(tuple(inserted), ())
        od = self._policy._od  # type: ignore[attr-defined]
        move = od.move_to_end
        for h in (reversed(uniq) if self.free_order == "tail-first" else uniq):
            last[h] = now
            if h in od:
                move(h)
            else:
                od[h] = None
        evicted: list[BlockHash] = []
        if self.capacity_blocks is not None:
            while len(last) > self.capacity_blocks - scratch:
                h = od.popitem(last=False)[0]
                del last[h]
                evicted.append(h)
        return InsertResult(tuple(inserted), tuple(evicted))

    def acquire(self, hashes: Sequence[int], now: float, scratch: int = 0) -> tuple[list[BlockHash], list[BlockHash]]:
        """Pin a request's blocks while it is in flight: hits are touched, missing
        blocks allocated (evicting unpinned blocks to make room; if everything left
        is pinned the cache runs over capacity, as a queued request would wait), and
        ``scratch`` uncached blocks held until :meth:`release`. Returns (newly stored,
        evicted)."""
        self._scratch += scratch
        evicted = self.expire(now).evicted if self.ttl_s is not None else ()
        inserted: list[BlockHash] = []
        last = self._last
        self._seen(now)
        for h in dict.fromkeys(hashes):
            if last.pop(h, None) is None:
                inserted.append(h)
            last[h] = now  # re-inserted: the dict stays in order of last use
            self._pins[h] = self._pins.get(h, 0) + 1
        return inserted, list(evicted) + self._evict_to(self._room(), now)

    def _seen(self, now: float) -> None:
        """Note a use at ``now``; a use earlier than one seen before ends the time order of
        ``_last`` (:meth:`expire` then scans every block)."""
        if now < self._latest:
            self._in_order = False
        self._latest = max(self._latest, now)

    def release(self, hashes: Sequence[int], now: float, scratch: int = 0) -> list[BlockHash]:
        """Unpin a finished request's blocks (and its ``scratch`` uncached ones, as given to
        :meth:`acquire`), freeing them in ``free_order``; returns blocks evicted to get back
        under capacity."""
        self._scratch -= scratch
        self._seen(now)
        uniq = list(dict.fromkeys(hashes))
        order = reversed(uniq) if self.free_order == "tail-first" else uniq
        pos = {h: i for i, h in enumerate(uniq)}
        for h in order:
            left = self._pins.get(h, 0) - 1
            if left > 0:
                self._pins[h] = left
                continue
            self._pins.pop(h, None)
            if h in self._last:
                del self._last[h]
                self._last[h] = now
                span = len(uniq) - pos[h]
                if h in self._policy:
                    self._policy.touch(h, now, pos[h], span)
                else:
                    self._policy.add(h, now, pos[h], span)
        return self._evict_to(self._room(), now)

    def _room(self) -> int | None:
        """Blocks that may be cached now: the capacity less the scratch blocks in flight."""
        return None if self.capacity_blocks is None else max(0, self.capacity_blocks - self._scratch)

    def evict(self, num_tokens: int, now: float) -> EvictResult:
        """Evict unpinned blocks until ``num_tokens`` tokens are freed (or none is left).
        ConfigError for a cache built with ``ordered=False``."""
        if not self._ordered:
            raise ConfigError("this block cache keeps no eviction order (ordered=False)")
        want = -(-num_tokens // self.block_size)
        target = max(0, len(self._last) - want)
        out = self._evict_to(target, now)
        return EvictResult(tuple(out), len(out) * self.block_size)

    def _evict_to(self, target: int | None, now: float) -> list[BlockHash]:
        out: list[BlockHash] = []
        if target is None:
            return out
        while len(self._last) > target:
            try:
                h = self._policy.pop_victim(self._pins)
            except KeyError:
                break  # everything left is pinned by requests in flight
            del self._last[h]
            out.append(h)
        return out

    def expire(self, now: float) -> EvictResult:
        """Drop unpinned blocks idle for more than ``ttl_s`` (retention / TTL). While uses come in
        time order the blocks are kept oldest use first, so only the expired ones are visited."""
        if self.ttl_s is None:
            return EvictResult()
        if self._in_order:  # oldest use first: stop at the first block still live
            dead = []
            for h, t in self._last.items():
                if now - t <= self.ttl_s:
                    break
                if h not in self._pins:
                    dead.append(h)
        else:
            dead = [h for h, t in self._last.items() if now - t > self.ttl_s and h not in self._pins]
        for h in dead:
            del self._last[h]
            self._policy.remove(h)
        return EvictResult(tuple(dead), len(dead) * self.block_size)


__all__ = ["BlockHashCache", "NONE_HASH", "chain_seed", "hash_blocks"]
