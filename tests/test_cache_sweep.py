"""One-pass LRU sweep: identical to per-capacity replays; Mooncake ground truth."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from prefixcache.analyzer.cache.block_hash import BlockHashCache
from prefixcache.analyzer.cache.sweep import ChainRequest, stack_profile
from prefixcache.analyzer.errors import ConfigError
from tests.conftest import SAMPLES, need

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
    reqs = [orjson.loads(line) for line in need(MOONCAKE).read_bytes().splitlines()]
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
