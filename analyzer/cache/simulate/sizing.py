"""How big a self-hosted KV cache must be to reach a share of the ideal (``simulate --sizing 0.9``).

An LRU block cache has the inclusion property, so one stack-distance pass
(:mod:`.stack_profile`) gives the hit tokens at every capacity; the smallest capacity
whose hit tokens reach ``target`` × the ideal (an unbounded cache's hit tokens) is read
off the sorted per-block thresholds. The answer is for a paged engine cache: the run's
own block cache (``--cache vllm`` or ``blocks``, ``--block-size``) when it is one, else
vLLM's (16-token blocks, or a block trace's own size), LRU, sequential requests, no TTL —
a hosted log's provider cache has no capacity a user can buy, so its sizing line answers
"if I served this workload myself". Blocks convert to KV bytes with the run's
``--kv-model`` / ``--model-config`` (None without one). The figure equals ``simulate
--cache vllm --capacity <capacity_blocks>blocks``'s hit tokens (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from prefixcache.analyzer.cache.models import CacheSpec, lru_stack_order
from prefixcache.analyzer.cache.simulate.stack_profile import stack_profile
from prefixcache.analyzer.cache.simulate.sweeps import chains
from prefixcache.analyzer.cache.workload import SimRequest

#: ``--sizing``'s usual target (the report's sizing line): 90% of the ideal hit tokens.
DEFAULT_TARGET = 0.9


@dataclass(frozen=True, slots=True)
class Sizing:
    """The smallest LRU cache (``cache``, ``block_size`` tokens per block) whose hit tokens
    reach ``target`` (a fraction, 0–1) of ``ideal_tokens`` (an unbounded cache's hit tokens
    over ``prompt_tokens``): ``capacity_blocks`` (None when nothing is reusable),
    ``capacity_tokens`` (blocks × block size), ``capacity_bytes`` (× ``kv_bytes_per_token``;
    None without a KV size), ``hit_tokens`` at that capacity and its ``fraction_of_ideal``;
    ``unique_blocks``: distinct blocks of the run (a cache of that many holds every block)."""

    target: float
    cache: str
    policy: str
    block_size: int
    prompt_tokens: int
    ideal_tokens: int
    capacity_blocks: int | None
    capacity_tokens: int | None
    capacity_bytes: int | None
    kv_bytes_per_token: int | None
    hit_tokens: int
    fraction_of_ideal: float | None
    unique_blocks: int


def sizing_spec(spec: CacheSpec) -> CacheSpec:
    """The engine cache the sizing answers for: ``spec`` itself under LRU (no TTL,
    sequential) when it is a block-chain cache, else vLLM's defaults."""
    if spec.traits.block_chain:
        return replace(spec, policy="lru", ttl_s=None, in_flight=1, rule_overrides=None)
    return CacheSpec("vllm", "lru", None, None, spec.model)


def sizing(reqs: Sequence[SimRequest], spec: CacheSpec, target: float = DEFAULT_TARGET,
           kv_bytes_per_token: int | None = None) -> Sizing:
    """The :class:`Sizing` of ``reqs`` (arrival order) for ``target`` (0 < target ≤ 1) on
    :func:`sizing_spec` of ``spec``; ``kv_bytes_per_token`` converts blocks to bytes."""
    engine = sizing_spec(spec)
    order = lru_stack_order(engine)
    assert order is not None  # sizing_spec is LRU, sequential, no TTL, on a block-chain cache
    bs = engine.block_size_for(reqs)
    prof = stack_profile(chains(reqs, engine, bs), order)
    prompt = int(sum(r.num_tokens for r in reqs))
    _, ideal = prof.ideal()
    if ideal <= 0:
        return Sizing(target, engine.cache, "lru", bs, prompt, 0, None, None, None, kv_bytes_per_token, 0, None,
                      prof.unique_blocks)
    need = int(np.ceil(target * ideal - 1e-9))
    by = np.argsort(prof.m, kind="stable")
    ms, cum = prof.m[by], np.cumsum(prof.tokens[by])
    k = int(np.searchsorted(cum, need, side="left"))  # the first block whose hit brings the total to ``need``
    blocks = int(ms[k]) + 1  # block j hits iff m[j] < C
    hit = int(prof.hits(blocks)[1][0])
    return Sizing(target, engine.cache, "lru", bs, prompt, ideal, blocks, blocks * bs,
                  blocks * bs * kv_bytes_per_token if kv_bytes_per_token else None, kv_bytes_per_token, hit,
                  round(hit / ideal, 6), prof.unique_blocks)


def kv_size(n: int) -> str:
    """``n`` bytes as the sizing line writes them: GiB (2 decimals) from 256 MiB, else MiB (1 decimal)."""
    return f"{n / 2**30:,.2f} GiB" if n >= 2**28 else f"{n / 2**20:,.1f} MiB"


def sizing_line(s: Sizing, kv_name: str | None = None) -> str:
    """``s`` in one sentence, e.g. ``"2.50 GiB of KV (20,480 tokens, 1,280 16-token blocks of
    vllm LRU) reaches 90% of the ideal: 41,234 of 45,800 reusable hit tokens"``; ``kv_name``
    names the KV size used (a preset or config)."""
    if s.capacity_blocks is None:
        return (f"nothing here is reusable by a {s.cache} cache ({s.block_size}-token blocks): "
                f"no cache size helps")
    size = f"{s.capacity_tokens:,} tokens = {s.capacity_blocks:,} {s.block_size}-token blocks"
    head = (f"{kv_size(s.capacity_bytes)} of KV ({size}{f', {kv_name}' if kv_name else ''})" if s.capacity_bytes
            else f"{size} of KV")
    return (f"{head} reaches {100 * s.target:g}% of the ideal on a self-hosted {s.cache} LRU cache: "
            f"{s.hit_tokens:,} of the {s.ideal_tokens:,} tokens an unbounded cache serves "
            f"(a cache holding all {s.unique_blocks:,} distinct blocks serves them all)")
