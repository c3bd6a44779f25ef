"""One-pass LRU sweep: identical to per-capacity replays; Mooncake ground truth."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from prefixcache.analyzer.cache.index.block_hash import BlockHashCache
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile
from prefixcache.analyzer.errors import ConfigError
from tests.helpers import SAMPLES, existing

MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


def _replay(reqs, cap, order):
    c = BlockHashCache(4, cap, "lru", cap_last_token=False, free_order=order)
    out = []
    for hashes, maxb in reqs:
        out.append(c.match_hashes(hashes, 0, maxb).cached_tokens // 4)
        c.insert_hashes(hashes, 0)
    return out


@pytest.mark.parametrize("order", ["head-first", "tail-first"])
def test_sweep_equals_replay_at_every_capacity(order):
    rng = random.Random(7)
    for _ in range(25):
        reqs = []
        for _ in range(25):
            base = rng.randrange(4)
            chain = [base * 100 + i for i in range(rng.randrange(0, 8))]
            if chain and rng.random() < 0.2:
                chain.append(chain[0])  # a repeated hash inside one request
            reqs.append((chain, rng.choice([None, 2, 5])))
        prof = stack_profile([ChainRequest(h, len(h) * 4, 4, m) for h, m in reqs], order)
        for cap in range(0, 16):
            blocks, toks = prof.per_request(cap)
            assert blocks.tolist() == _replay(reqs, cap, order), (cap, reqs)
            assert (toks == blocks * 4).all()
            assert prof.hits(cap)[0][0] == blocks.sum()


def test_partial_last_block_and_ideal():
    prof = stack_profile([ChainRequest([1, 2, 3], 10, 4), ChainRequest([1, 2, 3], 10, 4)],
                         "head-first")
    assert prof.tokens.tolist() == [4, 4, 2, 4, 4, 2]
    assert prof.ideal() == (3, 10)
    assert [int(x) for x in prof.hits([0, 2, 3])[1]] == [0, 0, 10]
    assert prof.unique_blocks == 3
    with pytest.raises(ConfigError):
        stack_profile([], "sideways")
    empty = stack_profile([], "tail-first")
    assert empty.ideal() == (0, 0) and empty.hits(5)[0][0] == 0


def test_big_hash_values_do_not_collide():
    a, b = 2**64 - 1, 2**64 - 2  # float64 would merge these
    prof = stack_profile([ChainRequest([a], 4, 4), ChainRequest([b], 4, 4)], "head-first")
    assert prof.ideal() == (0, 0) and prof.unique_blocks == 2


def test_mooncake_sweep_ground_truth():
    reqs = [orjson.loads(line) for line in existing(MOONCAKE).read_bytes().splitlines()]
    prof = stack_profile([ChainRequest(r["hash_ids"], r["input_length"], 512) for r in reqs],
                         "head-first")
    assert prof.unique_blocks == 43924 and len(prof.m) == 121877
    fracs = [0.01, 0.05, 0.10, 0.25, 0.50]
    blocks, toks = prof.hits([int(f * prof.unique_blocks) for f in fracs])
    ratios = np.round(blocks / len(prof.m), 3).tolist()
    assert ratios == [0.034, 0.155, 0.260, 0.443, 0.589]  # papers.md §1, LRU row
    ideal_blocks, ideal_tokens = prof.ideal()
    assert round(ideal_blocks / len(prof.m), 3) == 0.640
    assert round(ideal_tokens / int(prof.tokens.sum()), 3) == 0.651


def _caps_around(prof) -> list[int]:
    """Capacities around and above the unique and total block counts (bug: a finite
    'never hits' threshold made caches ≥ total lookups count cold blocks as hits)."""
    u, n = prof.unique_blocks, len(prof.m)
    return sorted({max(0, u - 1), u, u + 1, max(0, n - 1), n, n + 1, n + 2, n + 7, 10 * n + 3})


@pytest.mark.parametrize("order", ["head-first", "tail-first"])
def test_sweep_at_capacities_above_total_lookups(order):
    rng = random.Random(11)
    for _ in range(20):
        reqs = []
        for _ in range(rng.randrange(1, 30)):
            base = rng.randrange(5)
            chain = [base * 100 + i for i in range(rng.randrange(0, 9))] + [rng.randrange(10**6, 2 * 10**6)]
            reqs.append((chain, rng.choice([None, 3])))
        prof = stack_profile([ChainRequest(h, len(h) * 4, 4, m) for h, m in reqs], order)
        ideal_blocks, _ = prof.ideal()
        for cap in _caps_around(prof):
            blocks, _ = prof.per_request(cap)
            assert blocks.tolist() == _replay(reqs, cap, order), (cap, reqs)
            assert prof.hits(cap)[0][0] == blocks.sum() <= ideal_blocks
        assert prof.hits(len(prof.m) + 1)[0][0] == ideal_blocks  # flat once every block fits


@pytest.mark.parametrize("cache", ["vllm", "blocks"])
def test_swe_agent_sweep_matches_replay_above_unique_and_total(cache):
    from prefixcache.analyzer.cache.simulate.sweeps import chains, sweep_block_cache
    from prefixcache.analyzer.cache.models import CacheSpec
    from prefixcache.analyzer.cache.simulate.simulator import baseline, simulate_stream
    from prefixcache.analyzer.cache.workload import to_sim_requests
    from prefixcache.analyzer.ingest import Ingest
    from prefixcache.analyzer.prepare import Preparer

    path = existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
    prep = Preparer()
    reqs = to_sim_requests([prep.prepare(r) for r in Ingest([str(path)])])
    spec = CacheSpec(cache)
    prof = stack_profile(chains(reqs, spec, 16), "tail-first" if cache == "vllm" else "head-first")
    assert prof.unique_blocks == 1468 and len(prof.m) == 3134  # the trial's 3,140 ≥ total lookups
    caps = _caps_around(prof) + [3100, 3140]
    base = baseline(reqs)
    ideal = [f.cached_tokens for f in simulate_stream(reqs, spec, None, base)]
    prompt = sum(r.num_tokens for r in reqs)
    for cap, rows in zip(caps, sweep_block_cache(reqs, spec, caps, base)):
        replayed = [f.cached_tokens for f in simulate_stream(reqs, spec, cap, base)]
        assert [f.cached_tokens for f in rows] == replayed, cap
        assert sum(replayed) / prompt <= sum(ideal) / prompt
        assert all(f.cached_tokens <= f.ideal_tokens for f in rows)
    assert sum(replayed) == sum(ideal) == 26656  # flat: unbounded = every cap ≥ unique blocks
