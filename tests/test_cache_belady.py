"""Belady MIN with in-flight blocks pinned: the upper reference."""

from __future__ import annotations

import random

import orjson

from prefixcache.analyzer.cache.belady import belady_hits
from prefixcache.analyzer.cache.sweep import ChainRequest, stack_profile
from tests.helpers import SAMPLES, existing


def test_small_exact_case():
    # capacity 2: after [a,b], request [c] must evict; MIN drops b (used later than a)
    reqs = [ChainRequest([1, 2], 8, 4), ChainRequest([3], 4, 4), ChainRequest([1], 4, 4),
            ChainRequest([1, 2], 8, 4)]
    assert belady_hits(reqs, 2).tolist() == [0, 0, 1, 1]


def test_never_below_lru_on_random_chains():
    rng = random.Random(11)
    for _ in range(20):
        reqs = []
        for _ in range(40):
            root = rng.randrange(5)
            reqs.append(ChainRequest([root * 100 + i for i in range(rng.randrange(1, 6))], 20, 4))
        prof = stack_profile(reqs, "head-first")
        for cap in (2, 4, 8):
            assert belady_hits(reqs, cap).sum() >= prof.hits(cap)[0][0]


def test_mooncake_belady_bounds():
    lines = existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl").read_bytes().splitlines()
    reqs = [orjson.loads(x) for x in lines]
    chains = [ChainRequest(r["hash_ids"], r["input_length"], 512) for r in reqs]
    total = sum(len(r["hash_ids"]) for r in reqs)
    at5 = belady_hits(chains, int(0.05 * 43924)).sum() / total
    at10 = belady_hits(chains, int(0.10 * 43924)).sum() / total
    assert at5 >= 0.386 and at10 >= 0.501  # papers.md §1 Belady row
    assert at5 < 0.640 and at10 < 0.640  # never above the unbounded ideal
