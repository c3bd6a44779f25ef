"""Fleet simulation: routing loses exactly what a hand computation says, the decomposition
adds up, oracle bounds every policy, tier restores happen only when cheaper, the
calibration recovers known constants."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import orjson
import pytest

from prefixcache.analyzer.api import FleetOptions, SimulateOptions, parse_capacities
from prefixcache.analyzer.cache.fleet.replicas import Arm, fleet_lost, run_fleet
from prefixcache.analyzer.cache.fleet.document import FleetReport
from prefixcache.analyzer.cache.fleet.study import FLEET_CAUSES, fleet_report
from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.fleet.routing import ROUTERS, parse_routers
from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
from prefixcache.analyzer.cache.fleet.tiers import TierSpec, parse_tiers, plan_restore, restore_cost
from prefixcache.analyzer.cache.fleet.timing import HARDWARE, Hardware
from prefixcache.analyzer.cache.workload import SimRequest, to_sim_requests
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES, existing, validate

CLAUDE = "claude_code_session_v1.0.98_fe5e1c67.jsonl"
MOONCAKE = "mooncake_kvtrace_synthetic_trace.jsonl"
SWE = "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
SINGLE = "kvcache_tester_claudecode_hashids64_trace_0001.json"  # one session, 41 requests
ALL = ",".join(ROUTERS)
HW = HARDWARE["h100-llama3-8b"]


@lru_cache(maxsize=None)
def _prepared(name: str, limit: int | None = None):
    ingest = Ingest([str(existing(SAMPLES / name))])
    preparer = Preparer()
    items = [preparer.prepare(r) for r in ingest]
    if limit:
        items = items[:limit]
    return items, to_sim_requests(items), ingest.summary


def _report(name: str, replicas: int, routers: str, capacity: str | None = None, limit: int | None = None,
            **kw) -> FleetReport:
    items, reqs, summary = _prepared(name, limit)
    options = SimulateOptions(capacities=tuple(parse_capacities(capacity)) if capacity else (), **kw)
    return fleet_report(items, reqs, options, FleetOptions(replicas, routers), None, summary, {})


def _trace(chains: list[list[int]], bs: int = 4, gap: float = 100.0) -> list[SimRequest]:
    return [SimRequest(order=i, session="s", index=i, source="t", record=i + 1, model=None, now=i * gap,
                       num_tokens=len(c) * bs, hashes=tuple(c), block_size=bs) for i, c in enumerate(chains)]


def test_round_robin_on_a_tiny_trace_loses_what_the_hand_computation_says():
    # Two replicas, blocks cache, 4-token blocks. Requests 0..3 alternate replicas:
    #   r0 [1,2,3]   → replica 0: cold
    #   r1 [1,2,4]   → replica 1: empty, but replica 0 holds [1,2] → 8 tokens lost to routing
    #   r2 [1,2,3,5] → replica 0: hits [1,2,3] = 12
    #   r3 [1,2,4,6] → replica 1: hits [1,2,4] = 12
    reqs = _trace([[1, 2, 3], [1, 2, 4], [1, 2, 3, 5], [1, 2, 4, 6]])
    spec = CacheSpec("blocks")
    served, _ = run_fleet(reqs, spec, 4, Arm(2, None, HW), "round-robin", None, [0, 1, 2, 3], [0] * 4)
    assert [s.replica for s in served] == [0, 1, 0, 1]
    assert [s.cached for s in served] == [0, 0, 12, 12]
    ceiling = simulate_stream(reqs, spec, None)
    assert [f.cached_tokens for f in ceiling] == [0, 8, 12, 12]
    lost = [fleet_lost(f.lost, f.cached_tokens, s) for f, s in zip(ceiling, served)]
    assert [x["routing"] for x in lost] == [0, 8, 0, 0]
    assert sum(x["capacity"] for x in lost) == 0
    for f, s, x in zip(ceiling, served, lost):
        assert sum(x.values()) + s.cached == f.prompt_tokens


@pytest.mark.parametrize("capacity", [None, 300])
@pytest.mark.parametrize("n", [2, 3])
def test_round_robin_equals_one_cache_per_replica_on_its_share_of_the_requests(n, capacity):
    _, reqs, _ = _prepared(CLAUDE)
    spec = CacheSpec("vllm")
    served, _ = run_fleet(reqs, spec, 16, Arm(n, capacity, HW), "round-robin", None, [0.0] * len(reqs),
                          [0] * len(reqs))
    for w in range(n):
        alone = simulate_stream(reqs[w::n], spec, capacity)
        assert [s.cached for s in served[w::n]] == [f.cached_tokens for f in alone]
        assert {s.replica for s in served[w::n]} == {w}


@pytest.mark.parametrize("spec", [CacheSpec("sglang"), CacheSpec("vllm", "fifo"), CacheSpec("vllm", ttl_s=30.0),
                                  CacheSpec("blocks", "lfu")], ids=["sglang", "fifo", "ttl", "lfu"])
def test_round_robin_on_other_caches_equals_one_cache_per_replica(spec):
    _, reqs, _ = _prepared(SWE)
    bs = spec.block_size_for(reqs)
    cap = 400 if spec.cache != "sglang" else 6000
    served, _ = run_fleet(reqs, spec, bs, Arm(2, cap, HW), "round-robin", None, [0.0] * len(reqs), [0] * len(reqs))
    for w in range(2):
        assert [s.cached for s in served[w::2]] == [f.cached_tokens for f in simulate_stream(reqs[w::2], spec, cap)]


@pytest.mark.parametrize("cache", ["vllm", "blocks"])
@pytest.mark.parametrize("router", ["round-robin", "kv-cost", "cache-aware", "oracle"])
def test_pooled_block_index_gives_the_same_figures_as_one_model_per_replica(cache, router):
    _, reqs, _ = _prepared(CLAUDE)
    spec = CacheSpec(cache)
    args = (reqs, spec, 16, Arm(4, 250, HW), router, None, [r.now - reqs[0].now for r in reqs], [50] * len(reqs))
    assert run_fleet(*args, fast=True)[0] == run_fleet(*args, fast=False)[0]


def test_session_on_a_single_session_log_loses_nothing_to_routing():
    bounded = _report(SINGLE, 4, "session", "20%")
    assert bounded.summary.sessions == 1
    row = bounded.results[0]
    assert row.lost_tokens_by_cause["routing"] == 0
    assert row.requests_per_replica.count(0) == 3
    unbounded = _report(SINGLE, 4, "session").results[0]
    assert unbounded.routing_loss_tokens == 0 and unbounded.capacity_loss_tokens == 0
    assert unbounded.cached_tokens == _report(SINGLE, 4, "session").ceiling_tokens


@pytest.mark.parametrize(("name", "replicas", "capacity", "limit"),
                         [(CLAUDE, 4, "20%", None), (CLAUDE, 3, "5%", None), (MOONCAKE, 4, "1%", 800)])
def test_oracle_is_at_least_every_policy_and_every_row_adds_up(name, replicas, capacity, limit):
    rep = _report(name, replicas, ALL, capacity, limit)
    rows = {r.router.split(" ")[0]: r for r in rep.results}
    assert set(rows) == set(ROUTERS)
    for r in rep.results:
        assert rows["oracle"].cached_tokens >= r.cached_tokens, r.router
        assert rep.ceiling_tokens - r.capacity_loss_tokens - r.routing_loss_tokens == r.cached_tokens
        assert list(r.lost_tokens_by_cause) == list(FLEET_CAUSES)
        assert sum(r.lost_tokens_by_cause.values()) + r.cached_tokens == rep.prompt_tokens
        assert min(r.lost_tokens_by_cause.values()) >= 0
        assert sum(r.requests_per_replica) == rep.requests
        assert r.ttft.p50 <= r.ttft.p95 <= r.ttft.p99 and (r.ttft_p50_s, r.ttft_p95_s, r.ttft_p99_s) == r.ttft.flat()


def _tier_case(bandwidth: float, latency: float = 0.0):
    """GPU of 2 blocks, a CPU tier; r2 needs blocks 1, 2 which r1 pushed down to the CPU."""
    bpt, bs = 2, 4
    hw = Hardware("test", 1000.0, 0.0, 100.0, 8, bpt)
    tier = TierSpec("cpu", parse_capacities("10blocks")[0], bandwidth, latency)
    arm = Arm(1, 2, hw, (tier,), (10,), bpt * bs)
    reqs = _trace([[1, 2], [3, 4], [1, 2, 5]])
    spec = CacheSpec("blocks")
    served, _ = run_fleet(reqs, spec, bs, arm, "round-robin", None, [0.0, 10.0, 20.0], [0, 0, 0])
    ceiling = simulate_stream(reqs, spec, None)
    return served[2], fleet_lost(ceiling[2].lost, ceiling[2].cached_tokens, served[2])


def test_tier_restore_is_taken_only_when_cheaper_than_recompute():
    # 2 blocks × 4 tokens × 2 bytes = 16 bytes; recompute 8 tokens at 1,000 tok/s = 8 ms.
    # Break-even bandwidth: 16 B / 8 ms = 2,000 B/s.
    assert restore_cost([0, 0], [TierSpec("cpu", parse_capacities("1blocks")[0], 2000.0, 0.0)], 8) == 8 / 1000
    even, lost = _tier_case(2000.0)
    assert even.cached == 0 and even.restored == 0 and even.restore_s == 0.0
    assert lost["tier_restore_slower"] == 8 and lost["routing"] == 0 and lost["capacity"] == 0
    faster, lost = _tier_case(2000.0 * 1.001)
    assert faster.cached == 8 and faster.restored == 8 and 0 < faster.restore_s < 8 / 1000
    assert lost["tier_restore_slower"] == 0 and sum(lost.values()) == 12 - 8
    slower, lost = _tier_case(2000.0 * 1.001, latency=1e-3)  # the latency tips it back
    assert slower.cached == 0 and lost["tier_restore_slower"] == 8
    assert faster.ttft_s < even.ttft_s


def test_a_run_across_tiers_restores_only_the_part_that_pays():
    cap = parse_capacities("1blocks")[0]
    fast, slow = TierSpec("cpu", cap, 4000.0, 0.0), TierSpec("remote", cap, 1000.0, 0.0)
    # 8-byte blocks, recompute 4 ms a block: the CPU restores one in 2 ms, the remote tier in 8 ms
    assert plan_restore([0, 0, 1, 1], [fast, slow], 8, 0.004) == (2, 0.004)
    assert plan_restore([1, 0], [fast, slow], 8, 0.004) == (0, 0.0)
    assert plan_restore([0, 0], [fast, slow], 8, 0.002) == (0, 0.0)  # break-even: recompute


def test_tiers_on_a_fixture_restore_and_still_add_up():
    items, reqs, summary = _prepared(CLAUDE)
    fleet = FleetOptions(2, "round-robin,session", tiers="gpu=400blocks,cpu=800blocks@50GB/s,disk=1Mblocks@5GB/s+100us")
    flat = FleetOptions(2, "round-robin,session", tiers="gpu=400blocks")
    rep = fleet_report(items, reqs, SimulateOptions(), fleet, None, summary, {})
    without = fleet_report(items, reqs, SimulateOptions(), flat, None, summary, {})
    assert [t.name for t in rep.tiers] == ["gpu", "cpu", "disk"]
    for r, w in zip(rep.results, without.results):
        assert r.restored_tokens > 0 and r.cached_tokens >= w.cached_tokens
        assert sum(r.lost_tokens_by_cause.values()) + r.cached_tokens == rep.prompt_tokens


def test_tier_grammar_and_errors():
    gpu, cpu, disk = parse_tiers("gpu=16GiB,cpu=128GiB,disk=1TiB@3GB/s+1ms")
    assert gpu.bandwidth is None and cpu.bandwidth == 50e9 and cpu.latency_s == 20e-6
    assert disk.bandwidth == 3e9 and disk.latency_s == 1e-3 and disk.size.value == 2**40
    for bad in ("gpu", "gpu=16GiB,nvme=1TiB", "gpu=16GiB,cpu=1GiB@fast", "gpu=1GiB,gpu=2GiB", "gpu=-1GiB", ""):
        with pytest.raises(ConfigError):
            parse_tiers(bad)


def test_router_names_and_parameters():
    assert parse_routers("prefix-hash:8,session-per-router:3,oracle") == (
        ("prefix-hash", 8), ("session-per-router", 3), ("oracle", None))
    for bad in ("bogus", "oracle:2", "prefix-hash:0", "prefix-hash:x", ""):
        with pytest.raises(ConfigError):
            parse_routers(bad)
    with pytest.raises(ConfigError):
        FleetOptions(0)
    with pytest.raises(ConfigError):
        FleetOptions(2, rate=0)
    items, reqs, summary = _prepared(SINGLE)
    for options in (SimulateOptions(cache="openai"), SimulateOptions(policies=("lru", "fifo")),
                    SimulateOptions(capacities=tuple(parse_capacities("5%,10%")))):
        with pytest.raises(ConfigError):
            fleet_report(items, reqs, options, FleetOptions(2), None, summary, {})


def test_session_per_router_splits_a_session_over_router_replicas():
    one = _report(SINGLE, 4, "session,session-per-router:2,session-per-router:4").results
    assert [sum(n > 0 for n in r.requests_per_replica) for r in one] == [1, 2, 4]
    assert one[0].lost_tokens_by_cause["routing"] == 0 < one[1].lost_tokens_by_cause["routing"]


def test_report_is_json_in_field_order():
    rep = _report(CLAUDE, 2, "round-robin,kv-cost", "10%")
    doc = orjson.loads(orjson.dumps(rep))
    assert list(doc) == [f.name for f in dataclasses.fields(FleetReport)]
    assert doc["results"][1]["router"] == "kv-cost" and doc["arrivals"] == "logged"
    validate(doc, "simulate-fleet")
