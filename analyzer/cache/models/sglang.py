"""SGLang's radix cache as a cache model: ``--cache sglang`` (pages, n−1 cap, leaf eviction)."""

from __future__ import annotations

from prefixcache.analyzer.cache.index.radix import RADIX_POLICIES, RadixTree
from prefixcache.analyzer.cache.models.base import CacheModel, CacheSpec, Hit, Traits, register
from prefixcache.analyzer.cache.workload import SimRequest


@register
class SglangModel(CacheModel):
    """SGLang's radix cache: the radix tree with pages, the n−1 cap and leaf eviction
    (capacity in tokens = blocks × page; :meth:`~.radix.RadixTree.serve`: the matched
    path is locked while the request's uncached tokens are allocated, unlocked leaves
    are evicted when they would not fit); no expiry."""

    name = "sglang"
    traits = Traits(unit="pages", cap_last_token=True, expiry="none", pool="leaves", distinct="tokens")
    default_block_size = 1
    policies = RADIX_POLICIES

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, expire: bool = True) -> None:
        super().__init__(spec, block_size, capacity_blocks, expire)
        cap = None if capacity_blocks is None else capacity_blocks * block_size
        self.cache = RadixTree(block_size, cap, spec.policy)

    def step(self, r: SimRequest) -> Hit:
        return Hit(self.cache.serve(self._tokens(r), r.now)[0])
