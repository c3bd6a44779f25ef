"""vLLM's prefix cache and block-level replay as cache models: ``--cache vllm`` and ``blocks``.

* ``vllm`` — :class:`~prefixcache.analyzer.cache.index.block_hash.BlockHashCache`:
  16-token blocks, ⌊(n−1)/B⌋·B cap, tail-first LRU free queue, full blocks only (a block
  trace's last, partial block is not stored); block traces use their own block size and
  hashes;
* ``blocks`` — block-level replay as the Mooncake/Bailian papers count it: leading
  cached blocks, no last-token cap, blocks touched in prompt order, every logged block
  stored.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from prefixcache.analyzer.cache.base import hit_cap_tokens, servable_tokens
from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.index.eviction import POLICIES
from prefixcache.analyzer.cache.models.base import CacheModel, CacheSpec, Hit, Traits, pool_blocks, register
from prefixcache.analyzer.cache.workload import SimRequest


@register
class VllmModel(CacheModel):
    """vLLM v1 prefix caching: chained block hashes, n−1 cap, tail-first LRU free queue, full
    blocks only (``BlockPool.cache_full_blocks``)."""

    name = "vllm"
    traits = Traits(unit="blocks", cap_last_token=True, free_order="tail-first", pool="blocks", partial_tail=False)
    policies = (*POLICIES, "belady")

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        self._window = max(1, spec.in_flight)
        self.cache = BlockHashCache(block_size, capacity_blocks, spec.policy, ttl_s=spec.ttl_s if expire else None,
                                    cap_last_token=self.traits.cap_last_token, free_order=self.traits.free_order,
                                    ordered=self._window > 1)  # unbounded and sequential: no order needed
        self._flight: deque = deque()

    def step(self, r: SimRequest) -> Hit:
        cap = hit_cap_tokens(r.num_tokens, self.block_size) // self.block_size if self.traits.cap_last_token else None
        chain = r.chain(self.block_size)
        stored, scratch = pool_blocks(self.traits, r, chain, self.block_size)
        return Hit(min(r.num_tokens, self._blocks(chain[:stored], scratch, r.now, cap) * self.block_size))

    def _blocks(self, hashes: Sequence[int], scratch: int, now: float, cap: int | None) -> int:
        """Match then store a block chain (the blocks the model stores, with ``scratch`` uncached
        ones held while the request runs, :func:`pool_blocks`); returns hit blocks. With
        ``in_flight`` > 1 the chain stays pinned (vLLM ``ref_cnt``) until that many later
        requests began."""
        if self._window == 1:
            k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.block_size
            self.cache.insert_hashes(hashes, now, scratch)
            return k
        while len(self._flight) >= self._window:
            done, held = self._flight.popleft()
            self.cache.release(done, now, held)
        k = self.cache.match_hashes(hashes, now, cap).cached_tokens // self.block_size
        self.cache.acquire(hashes, now, scratch)
        self._flight.append((hashes, scratch))
        return k


@register
class BlocksModel(VllmModel):
    """Block-level replay (Mooncake, Bailian): leading cached blocks, no last-token cap,
    blocks touched in prompt order."""

    name = "blocks"
    traits = Traits(unit="blocks", cap_last_token=False, free_order="head-first", pool="blocks", partial_tail=True)

    def granular(self, r: SimRequest, shared: int) -> int:
        return shared if r.hashes is not None else servable_tokens(shared, r.num_tokens, self.block_size, False)
