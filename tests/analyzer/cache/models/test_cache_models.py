"""Cache models and their registry, one eviction order per policy, hashes once per request."""

from __future__ import annotations

import random

import pytest

from prefixcache.analyzer.cache import workload
from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE, hit_cap_tokens, servable_tokens
from prefixcache.analyzer.cache.index.eviction import ORDERS, HeapPolicy, make_policy, resolve_policy
from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.models import CACHES, MODELS, CacheModel, CacheSpec, Hit, make_model
from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
from prefixcache.analyzer.cache.simulate.study import SimulateOptions, simulate_report
from prefixcache.analyzer.cache.capacity import parse_capacities
from prefixcache.analyzer.cache.workload import SimRequest, to_sim_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES, existing

SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


def _req(i: int, tokens: tuple[int, ...], **kw) -> SimRequest:
    return SimRequest(order=i, session="s", index=i, source="t", record=i + 1, model=None, now=float(i),
                      num_tokens=len(tokens), tokens=tokens, **kw)


def test_registry_names_every_cache_once():
    assert CACHES == ("vllm", "blocks", "sglang", "openai", "anthropic", "deepseek", "gemini", "llamacpp") == tuple(MODELS)
    for name, cls in MODELS.items():
        assert issubclass(cls, CacheModel) and cls.name == name
    with pytest.raises(ConfigError):
        make_model(CacheSpec("nope"), 16)


@pytest.mark.parametrize("cache", CACHES)
def test_every_model_steps_and_serves_at_most_its_granular_level(cache):
    spec = CacheSpec(cache)
    shared = tuple(range(3000))
    marks = dict(boundaries=(3000, 3050), breakpoints=(Breakpoint(3000), Breakpoint(3050)))  # Anthropic's
    reqs = [_req(i, shared + tuple(range(10_000 * (i + 1), 10_000 * (i + 1) + 50)), **marks) for i in range(3)]
    bs = spec.block_size_for(reqs)
    model = make_model(spec, bs)
    for i, r in enumerate(reqs):
        hit = model.step(r)
        assert isinstance(hit, Hit) and 0 <= hit.cached_tokens <= model.granular(r, 3000 if i else 0)
    assert hit.cached_tokens > 0
    trace = SimRequest(0, "s", 0, "t", 1, None, 0.0, 8, hashes=(1, 2), block_size=4)
    if cache not in ("vllm", "blocks"):
        with pytest.raises(ConfigError, match="needs token prompts"):
            make_model(spec, bs).step(trace)


def test_block_sizes_come_from_the_model_and_one_default():
    reqs = [_req(0, (1, 2, 3))]
    assert CacheSpec("vllm").block_size_for(reqs) == DEFAULT_BLOCK_SIZE == 16
    assert CacheSpec("sglang").block_size_for(reqs) == 1 and CacheSpec("vllm", block_size=4).block_size_for(reqs) == 4
    assert CacheSpec("openai", block_size=4).block_size_for(reqs) == 128  # the provider's unit is fixed
    assert CacheSpec("anthropic").block_size_for(reqs) == 1 and CacheSpec("deepseek").block_size_for(reqs) == 64
    trace = SimRequest(0, "s", 0, "t", 1, None, 0.0, 8, hashes=(1, 2), block_size=4)
    assert trace.block_size == 4 and CacheSpec("blocks").block_size_for([trace]) == 4
    with pytest.raises(ConfigError, match="block traces fix"):
        CacheSpec("vllm", block_size=16).block_size_for([trace])


def test_one_cap_function():
    for n in range(0, 70):
        for shared in (0, 5, 16, 33, n, n + 3):
            want = (min(shared, n - 1) // 16) * 16 if n > 0 and shared > 0 else 0
            assert servable_tokens(shared, n, 16) == max(0, want)
        assert hit_cap_tokens(n, 16) == servable_tokens(n, n, 16)
        assert hit_cap_tokens(n, 16, False) == n // 16 * 16
    with pytest.raises(ConfigError):
        servable_tokens(5, 10, 0)


@pytest.mark.parametrize("name", ["lru", "fifo", "slru", "lfu"])
def test_block_policies_pop_in_the_one_order_of_their_key(name):
    """The O(1) policies evict exactly as a heap over the shared :data:`ORDERS` key."""
    rng = random.Random(7)
    fast, ref = make_policy(name), HeapPolicy(name)
    assert ref._order is ORDERS[name]
    keys = list(range(12))
    for t in range(400):
        k = rng.choice(keys)
        op = rng.random()
        if op < 0.45:
            for p in (fast, ref):
                (p.touch if k in p else p.add)(k, float(t))
        elif op < 0.55:
            for p in (fast, ref):
                p.remove(k)
        elif len(ref):
            pinned = set(rng.sample(keys, 2))
            got = [_pop(p, pinned) for p in (fast, ref)]
            assert got[0] == got[1], (name, t)
    assert len(fast) == len(ref)


def _pop(policy, pinned):
    try:
        return policy.pop_victim(pinned)
    except KeyError:
        return None


def test_ttl_is_an_option_and_the_policy_name_an_alias():
    assert resolve_policy("ttl", None) == ("lru", 300.0) and resolve_policy("ttl", 3.0) == ("lru", 3.0)
    assert resolve_policy("fifo", None) == ("fifo", None)
    spec = CacheSpec("vllm", "ttl")
    assert (spec.policy, spec.ttl_s) == ("lru", 300.0)
    opts = SimulateOptions(policies=("lru", "ttl", "ttl"), ttl_s=3.0)
    assert opts.runs() == [("lru", 3.0)]  # the same run twice runs once
    assert SimulateOptions(policies=("lru", "ttl")).runs() == [("lru", None), ("lru", 300.0)]
    for bad in (dict(ttl_s=-1.0), dict(block_size=0), dict(in_flight=0), dict(price_read=-0.1),
                dict(cache="nope"), dict(policies=("random",)), dict(policies=()),
                dict(capacities=tuple(parse_capacities("16GiB")))):  # bytes need a KV shape
        with pytest.raises(ConfigError):
            SimulateOptions(**bad)


@pytest.fixture(scope="module")
def swe():
    prep = Preparer()
    ingest = Ingest([str(existing(SAMPLES / SWE))])
    items = [prep.prepare(r) for r in ingest]
    return items, ingest.summary, prep.notes


@pytest.mark.parametrize("cache", ["vllm", "blocks", "openai", "anthropic"])
def test_each_request_is_hashed_once_per_run(swe, monkeypatch, cache):
    items, summary, notes = swe
    calls = []
    real, real_cuts = workload.hash_blocks, AnthropicCache.prefix_hashes
    monkeypatch.setattr(workload, "hash_blocks", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    monkeypatch.setattr(AnthropicCache, "prefix_hashes", staticmethod(lambda *a: calls.append(0) or real_cuts(*a)))
    reqs = to_sim_requests(items)
    opts = SimulateOptions(cache=cache, policies=("lru", "fifo", "lfu"), capacities=tuple(parse_capacities("5%,20%,2Mtok")),
                           per_request=True)
    report = simulate_report(items, reqs, opts, None, summary, notes)
    assert len(report.results) == 9 and len(report.requests) == len(reqs) == 13
    assert len(calls) == len(reqs)  # once per request: every model, sweep and count reuses the chain
    assert simulate_stream(reqs, CacheSpec(cache), 50)[0].prompt_tokens == reqs[0].num_tokens
    assert len(calls) == len(reqs)


def test_every_structure_implements_the_prefix_cache_protocol():
    from prefixcache.analyzer.cache.base import PrefixCache
    from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
    from prefixcache.analyzer.cache.provider.caches import UnitPrefixCache
    from prefixcache.analyzer.cache.provider.rules import rules_for
    from prefixcache.analyzer.cache.index.radix import RadixTree

    for c in (BlockHashCache(), RadixTree(), UnitPrefixCache(rules_for("openai")), AnthropicCache(rules_for("anthropic"))):
        assert isinstance(c, PrefixCache)
        assert c.match(tuple(range(40)), 0.0).cached_tokens == 0 and c.evict(8, 0.0).freed_tokens >= 0


def test_vllm_caches_full_blocks_only_and_blocks_keeps_the_partial_tail():
    # 4-token blocks. r0 is 10 tokens: blocks 1, 2 full, block 3 holds 2 tokens (partial).
    # r1 [1, 2, 3, 4] is 16 tokens and logs the same id 3 for its third block.
    #   vllm: vLLM caches full blocks only (BlockPool.cache_full_blocks), so 3 was never stored:
    #         r1 hits blocks 1, 2 = 8 tokens (its own cap is floor(15/4) = 3 blocks).
    #   blocks: the papers' block-level replay stores every logged id: r1 hits 1, 2, 3 = 12.
    from prefixcache.analyzer.cache.fleet.replicas import Arm, run_fleet
    from prefixcache.analyzer.cache.fleet.timing import HARDWARE
    from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
    from prefixcache.analyzer.cache.simulate.sweeps import sweep_block_cache

    reqs = [SimRequest(0, "s", 0, "t", 1, None, 0.0, 10, hashes=(1, 2, 3), block_size=4),
            SimRequest(1, "s", 1, "t", 2, None, 1.0, 16, hashes=(1, 2, 3, 4), block_size=4)]
    want = {"vllm": [0, 8], "blocks": [0, 12]}
    for cache, cached in want.items():
        spec = CacheSpec(cache)
        model = make_model(spec, 4)
        assert [model.step(r).cached_tokens for r in reqs] == cached, cache
        assert [f.cached_tokens for f in simulate_stream(reqs, spec, 8)] == cached, cache
        swept = sweep_block_cache(reqs, spec, [8])[0]  # the one-pass LRU stack profile
        assert [f.cached_tokens for f in swept] == cached, cache
        for fast in (True, False):  # PooledBlocks and one Replica model each
            served, _ = run_fleet(reqs, spec, 4, Arm(1, 8, HARDWARE["h100-llama3-8b"]), "round-robin", None, [0.0, 1.0], [0, 0],
                                  fast=fast)
            assert [s.cached for s in served] == cached, (cache, fast)


def test_vllm_partial_block_takes_a_cached_blocks_room_while_it_runs():
    # 2-block pool, 4-token blocks. r0 [1, 2] (8 tokens) fills it. r1 is 2 tokens: no full block, but
    # vLLM allocates one physical block for it, so a cached block is evicted (the oldest: r0's blocks
    # were freed tail first, so block 2 is older than block 1). r2 [1, 2, 5] then hits block 1 only.
    # Without the scratch block (the papers' block replay, `blocks`) r1's id 3 is stored instead,
    # evicting block 1 (freed head first, so the oldest): r2 hits nothing.
    from prefixcache.analyzer.cache.fleet.replicas import Arm, run_fleet
    from prefixcache.analyzer.cache.fleet.timing import HARDWARE
    from prefixcache.analyzer.cache.simulate.sweeps import sweep_block_cache

    reqs = [SimRequest(0, "s", 0, "t", 1, None, 0.0, 8, hashes=(1, 2), block_size=4),
            SimRequest(1, "s", 1, "t", 2, None, 1.0, 2, hashes=(3,), block_size=4),
            SimRequest(2, "s", 2, "t", 3, None, 2.0, 12, hashes=(1, 2, 5), block_size=4)]
    for cache, cached in {"vllm": [0, 0, 4], "blocks": [0, 0, 0]}.items():
        spec = CacheSpec(cache)
        model = make_model(spec, 4, 2)
        assert [model.step(r).cached_tokens for r in reqs] == cached, cache
        assert [f.cached_tokens for f in simulate_stream(reqs, spec, 2)] == cached, cache
        assert [f.cached_tokens for f in sweep_block_cache(reqs, spec, [2])[0]] == cached, cache
        for fast in (True, False):
            served, _ = run_fleet(reqs, spec, 4, Arm(1, 2, HARDWARE["h100-llama3-8b"]), "round-robin", None,
                                  [0.0, 1.0, 2.0], [0, 0, 0], fast=fast)
            assert [s.cached for s in served] == cached, (cache, fast)
