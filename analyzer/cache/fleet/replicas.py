"""Fleet simulation: N replicas of one cache model behind a router, with a load and
timing model and optional KV tiers.

Each replica is a :class:`~.models.CacheModel` (``vllm``, ``blocks`` or ``sglang``) with
its own capacity, a :class:`~.timing.ReplicaClock` and, for block caches, the
:class:`~.tiers.LowerTiers` its GPU evictions demote into. Requests are taken in
arrival order; for each, every replica is probed (read-only: the tokens of the prompt
it holds now, on the GPU and below), the router picks one (:mod:`.routing`), the
chosen replica looks the prompt up (restoring the part of a lower-tier continuation
whose restore is cheaper than recomputing it, :func:`~.tiers.plan_restore`) and stores it, and its clock queues the prefill.
The cache is updated at arrival, not when the prefill ends (as the single-cache
simulator does).

Per request, the tokens the workload ceiling (one unbounded shared cache with the
same rules, :func:`~.simulator.simulate_stream`) hit and the fleet missed are split
(nested levels, each loss the drop between two, adding up exactly):

  ``ceiling ≥ best held anywhere ≥ held by the chosen replica ≥ cached``

* ``capacity`` — no replica held it any more (evicted, or never stored there);
* ``routing`` — another replica held more of the prompt than the chosen one;
* ``tier_restore_slower`` — the chosen replica held it in a lower tier, and restoring
  it would have taken longer than recomputing it.

The ceiling's own causes (cold, drift, granularity, below_minimum, ttl) come first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

from prefixcache.analyzer.cache.base import PrefixCache, hit_cap_tokens
from prefixcache.analyzer.cache.models import MODELS, CacheSpec, Traits, lru_stack_order, make_model, pool_blocks
from prefixcache.analyzer.cache.fleet.routing import View, make_router
from prefixcache.analyzer.cache.fleet.tiers import LowerTiers, TierSpec, plan_restore
from prefixcache.analyzer.cache.fleet.timing import Hardware, ReplicaClock
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.analyzer.errors import ConfigError

#: Caches a fleet can be made of (engine caches: a router cannot see provider caches).
FLEET_CACHES = tuple(name for name, cls in MODELS.items() if cls.traits.pool is not None)
#: Block size of the router's own chain over token prompts of a page-1 cache (SGLang).
ROUTER_BLOCK = 16


@dataclass(frozen=True, slots=True)
class Held:
    """What one replica holds of a prompt now: GPU tokens, and the tier index of each
    block continuing the GPU hit below it (block caches with tiers)."""

    gpu: int
    run: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Served:
    """One request under one router: the replica, tokens cached (restored included),
    restored from lower tiers, held by the chosen replica and the best held by any,
    and seconds of queue wait, TTFT and restore."""

    replica: int
    cached: int
    restored: int
    held_here: int
    held_best: int
    wait_s: float
    ttft_s: float
    restore_s: float


class Replica:
    """One replica: a cache model, optional lower tiers, a clock."""

    def __init__(self, spec: CacheSpec, block_size: int, capacity_blocks: int | None, hw: Hardware,
                 tiers: Sequence[TierSpec] = (), tier_blocks: Sequence[int] = ()) -> None:
        self.model = make_model(spec, block_size, capacity_blocks)
        self.bs = block_size
        traits = self.model.traits
        #: the model's structure through the one cache interface (a read-only ``match`` of a
        #: token prompt; block chains use the block cache's hash-level calls below)
        self.index: PrefixCache = self.model.cache
        self.blocks = traits.block_chain
        if traits.pool is None:
            raise ConfigError(f"--replicas needs an engine cache ({', '.join(FLEET_CACHES)}), not --cache {spec.cache}")
        if tiers and not self.blocks:
            raise ConfigError("--tiers needs a block cache (--cache vllm or blocks)")
        self.lower = LowerTiers(tiers, tier_blocks) if tiers else None
        self.clock = ReplicaClock(hw)

    def _limit(self, r: SimRequest, chain: Sequence[int]) -> int:
        cap = hit_cap_tokens(r.num_tokens, self.bs) // self.bs if self.model.traits.cap_last_token else len(chain)
        return min(cap, len(chain))

    def held(self, r: SimRequest) -> Held:
        """Tokens of ``r`` this replica holds (read-only)."""
        if not self.blocks:
            return Held(self.index.match(self.model._tokens(r), r.now).cached_tokens)
        chain = r.chain(self.bs)
        limit = self._limit(r, chain)
        k = self.model.cache.match_hashes(chain, r.now, limit).cached_tokens // self.bs
        run = tuple(self.lower.run(chain, k, limit)) if self.lower is not None else ()
        return Held(min(r.num_tokens, k * self.bs), run)

    def tokens(self, r: SimRequest, h: Held) -> int:
        """GPU and lower-tier tokens of ``h``."""
        return min(r.num_tokens, h.gpu + len(h.run) * self.bs)

    def step(self, r: SimRequest, h: Held, restore: int) -> int:
        """Look ``r`` up (restoring the first ``restore`` blocks of ``h.run``) and store
        it; cached tokens."""
        if self.lower is None:
            return self.model.step(r).cached_tokens
        chain = r.chain(self.bs)
        k = h.gpu // self.bs
        if restore:
            self.lower.touch(chain, h.run[:restore], k)
        stored, scratch = pool_blocks(self.model.traits, r, chain, self.bs)
        res = self.model.cache.insert_hashes(chain[:stored], r.now, scratch)
        self.lower.demote(res.evicted)
        return min(r.num_tokens, h.gpu + restore * self.bs)


class PooledBlocks:
    """Every replica's LRU block cache at once, for the common case (``vllm`` / ``blocks``,
    policy ``lru``, no TTL, no tiers): one OrderedDict per replica (oldest first) and one
    index block → bit mask of the replicas holding it, so probing all replicas is one
    walk of the chain. Same results as :class:`~.block_hash.BlockHashCache` (sequential:
    a request's blocks are pinned while others are evicted for it, then freed
    tail-first for vLLM, head-first for ``blocks``; a trace's partial last block stored only
    where the model keeps it, and its uncached blocks taking room while it runs,
    :func:`~.models.pool_blocks`). ``traits``: the model's."""

    def __init__(self, n: int, block_size: int, capacity_blocks: int | None, traits: Traits) -> None:
        self.n, self.bs, self.cap = n, block_size, capacity_blocks
        self.traits = traits
        self.cap_last_token, self.tail_first = traits.cap_last_token, traits.free_order == "tail-first"
        self.lru: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(n)]
        self.index: dict[int, int] = {}

    def limit(self, r: SimRequest, chain: Sequence[int]) -> int:
        cap = hit_cap_tokens(r.num_tokens, self.bs) // self.bs if self.cap_last_token else len(chain)
        return min(cap, len(chain))

    def held(self, r: SimRequest) -> list[int]:
        """Tokens of ``r`` each replica holds (read-only, one walk)."""
        chain = r.chain(self.bs)
        limit = self.limit(r, chain)
        depth = [limit] * self.n
        alive = (1 << self.n) - 1
        index = self.index
        for k in range(limit):
            m = index.get(chain[k], 0) & alive
            gone = alive & ~m
            while gone:
                low = gone & -gone
                depth[low.bit_length() - 1] = k
                gone ^= low
            alive = m
            if not alive:
                break
        bs, top = self.bs, min(r.num_tokens, limit * self.bs)
        return [d * bs if d < limit else top for d in depth]

    def step(self, w: int, r: SimRequest, held: int) -> int:
        """Store ``r`` on replica ``w`` (its lookup was ``held`` tokens); cached tokens.
        Under LRU, pinning the request's blocks while evicting for them and then freeing
        them in order leaves the same cache as moving them to the young end in that
        order and evicting from the old end: the victims are the oldest other blocks,
        then (a chain longer than the cache) the request's first-freed blocks."""
        lru, bit, index = self.lru[w], 1 << w, self.index
        chain = r.chain(self.bs)
        stored, scratch = pool_blocks(self.traits, r, chain, self.bs)
        uniq = dict.fromkeys(chain[:stored])
        for h in (reversed(uniq) if self.tail_first else uniq):
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                index[h] = index.get(h, 0) | bit
        if self.cap is not None:
            pop = lru.popitem
            for _ in range(len(lru) - max(0, self.cap - scratch)):
                h = pop(last=False)[0]
                left = index[h] & ~bit
                if left:
                    index[h] = left
                else:
                    del index[h]
        return held

    def _unindex(self, h: int, bit: int) -> None:
        left = self.index[h] & ~bit
        if left:
            self.index[h] = left
        else:
            del self.index[h]


@dataclass(frozen=True, slots=True)
class Arm:
    """A fleet's settings: replicas, per-replica GPU capacity (blocks; None unbounded),
    the tiers below the GPU with their per-replica sizes (blocks), hardware, and the KV
    bytes of one block (restore cost)."""

    replicas: int
    capacity_blocks: int | None
    hw: Hardware
    tiers: tuple[TierSpec, ...] = ()
    tier_blocks: tuple[int, ...] = ()
    block_bytes: int = 0

    def pooled(self) -> "Arm":
        """One replica with the whole fleet's memory (the routing-free reference)."""
        n = self.replicas
        return Arm(1, None if self.capacity_blocks is None else n * self.capacity_blocks, self.hw, self.tiers,
                   tuple(n * b for b in self.tier_blocks), self.block_bytes)


def fast_path(spec: CacheSpec, arm: Arm) -> bool:
    """Whether :class:`PooledBlocks` serves this arm: the one-pass LRU order applies
    (:func:`~.models.lru_stack_order`: LRU block caches, no TTL) and there are no tiers."""
    return lru_stack_order(spec) is not None and not arm.tiers


def run_fleet(reqs: Sequence[SimRequest], spec: CacheSpec, block_size: int, arm: Arm, router: str,
              param: int | None, arrivals: Sequence[float], outputs: Sequence[int], seed: int = 0,
              fast: bool | None = None) -> tuple[list[Served], list[ReplicaClock]]:
    """Serve ``reqs`` (arrival order; ``arrivals`` seconds, ``outputs`` output tokens per
    request) on ``arm`` behind ``router``; every request's :class:`Served` and the clocks.
    ``fast`` (default: when it applies) uses :class:`PooledBlocks` instead of one
    :class:`Replica` model each (same figures)."""
    reps = [Replica(spec, block_size, arm.capacity_blocks, arm.hw, arm.tiers, arm.tier_blocks)
            for _ in range(arm.replicas)]
    pool = None
    if fast_path(spec, arm) if fast is None else fast:
        m = reps[0].model
        pool = PooledBlocks(arm.replicas, block_size, arm.capacity_blocks, m.traits)
    clocks = [rep.clock for rep in reps]
    route = make_router(router, param, arm.replicas, seed)
    rbs = block_size if reps[0].blocks else ROUTER_BLOCK
    out = []
    loads = route.uses_load
    for r, t, n_out in zip(reqs, arrivals, outputs):
        if loads:
            for c in clocks:
                c.advance(t)
        if pool is not None:
            held_all = held_gpu = pool.held(r)
            runs = None
        else:
            held = [rep.held(r) for rep in reps]
            held_all = [rep.tokens(r, h) for rep, h in zip(reps, held)]
            held_gpu, runs = [h.gpu for h in held], [h.run for h in held]
        chain = r.chain(rbs)
        view = View(chain, rbs, [c.load() for c in clocks] if loads else (), held_gpu, held_all,
                    lambda w: clocks[w].active_blocks(), lambda w: clocks[w].prefill_blocks())
        w = route.pick(r, view)
        route.routed(r, view, w)
        gpu, run = held_gpu[w], runs[w] if runs else ()
        take, spent = plan_restore(run, arm.tiers, arm.block_bytes, arm.hw.prefill_s(block_size)) if run else (0, 0.0)
        cached = pool.step(w, r, gpu) if pool is not None else reps[w].step(r, held[w], take)
        wait, ttft = clocks[w].serve(t, r.num_tokens - cached, spent, n_out, len(chain), rbs)
        out.append(Served(w, cached, cached - gpu, held_all[w], max(held_all), wait, ttft, spent))
    return out, clocks


def fleet_lost(ceiling_lost: Mapping[str, int], ceiling_cached: int, s: Served) -> dict[str, int]:
    """One request's lost tokens by cause (module docstring): the ceiling's causes, then
    ``capacity``, ``routing`` and ``tier_restore_slower`` down to what the fleet cached."""
    top = ceiling_cached
    best = min(top, s.held_best)
    here = min(best, s.held_here)
    cached = min(here, s.cached)
    lost = {k: v for k, v in ceiling_lost.items() if k != "capacity"}
    lost.update(capacity=top - best, routing=best - here, tier_restore_slower=here - cached)
    return lost
