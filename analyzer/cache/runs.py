"""Capacity sweeps and helpers over a simulated request stream.

:func:`sweep_block_cache` gives per-request figures at many capacities: one LRU
stack-distance pass (:mod:`.sweep`) when the policy allows it, Belady MIN replays
(:mod:`.belady`), else one replay per capacity (:func:`.simulator.simulate`).
Also: the block chains those passes consume and the distinct-block count behind
``N%`` capacities.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.cache.figures import Levels, RequestFigures, lost_by_cause
from prefixcache.analyzer.cache.base import hit_cap_tokens
from prefixcache.analyzer.cache.belady import belady_hits
from prefixcache.analyzer.cache.block_hash import hash_blocks
from prefixcache.analyzer.cache.simulator import Baseline, CacheSpec, SimRequest, _figures, _granular, baseline, simulate
from prefixcache.analyzer.cache.sweep import ChainRequest, stack_profile


def chains(reqs: Sequence[SimRequest], spec: CacheSpec, unit: int) -> list[ChainRequest]:
    """Block chains for the one-pass sweep and Belady (block caches only)."""
    out = []
    for r in reqs:
        if r.hashes is not None:
            hashes, n = r.hashes, r.num_tokens
        else:
            hashes = hash_blocks(r.tokens, unit, ("cache_salt", r.salt) if r.salt else None)
            n = len(hashes) * unit  # only full blocks are cached
        cap = hit_cap_tokens(r.num_tokens, unit) // unit if spec.cache == "vllm" else None
        out.append(ChainRequest(hashes, n, unit, cap))
    return out


def sweep_block_cache(reqs: Sequence[SimRequest], spec: CacheSpec, capacities: Sequence[int],
                      base: Baseline | None = None,
                      progress: Callable[[int], None] | None = None) -> list[list[RequestFigures]]:
    """Per-request figures at each capacity (blocks) for ``vllm`` / ``blocks``.

    LRU without TTL: one stack-distance pass (:mod:`.sweep`) serves every capacity;
    ``belady``: one MIN replay per capacity; any other policy: one replay each.
    """
    unit = spec.unit(reqs)
    base = base or baseline(reqs)
    sequential = spec.in_flight <= 1
    if spec.policy == "lru" and spec.ttl_s is None and spec.cache in ("vllm", "blocks") and sequential:
        prof = stack_profile(chains(reqs, spec, unit), "tail-first" if spec.cache == "vllm" else "head-first")
        ideal = _ideal_tokens(reqs, prof.per_request(prof.INF)[1], unit)
        per_cap = [_ideal_tokens(reqs, prof.per_request(c)[1], unit) for c in capacities]
    elif spec.policy == "belady" and sequential:
        if spec.cache not in ("vllm", "blocks"):
            raise ConfigError("--policy belady works with --cache vllm or blocks")
        ch = chains(reqs, spec, unit)
        ideal = simulate_tokens(reqs, spec, None, base)
        per_cap = []
        for c in capacities:
            per_cap.append([min(r.num_tokens, int(k) * unit) for r, k in zip(reqs, belady_hits(ch, c))])
            if progress:
                progress(1)
    else:
        return [simulate(reqs, spec, c, base) for c in capacities]
    out = []
    for cached_list in per_cap:
        rows = []
        for i, r in enumerate(reqs):
            lv = Levels(r.num_tokens, base.lcp[i], base.drift_end[i],
                        _granular(spec, unit, r, base.lcp[i]), ideal[i], ideal[i], cached_list[i])
            rows.append(_figures(r, unit, cached_list[i], ideal[i], 0, 1.0, lost_by_cause(lv), None,
                                 base.lcp[i]))
        out.append(rows)
    return out


def _ideal_tokens(reqs: Sequence[SimRequest], toks, unit: int) -> list[int]:
    return [min(r.num_tokens, int(t)) for r, t in zip(reqs, toks)]


def unique_blocks(reqs: Sequence[SimRequest], unit: int) -> int:
    """Distinct blocks of ``unit`` tokens over all prompts (the base of ``N%`` capacities)."""
    seen: set[int] = set()
    for r in reqs:
        seen.update(r.hashes if r.hashes is not None else hash_blocks(r.tokens, unit))
    return len(seen)


def simulate_tokens(reqs, spec, capacity, base) -> list[int]:
    """Cached tokens per request (convenience over :func:`simulate`)."""
    return [f.cached_tokens for f in simulate(reqs, replace(spec, policy="lru"), capacity, base)]
