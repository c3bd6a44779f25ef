"""Belady MIN, pinned and unpinned: the bucketed replay equals a plain per-block heap MIN."""

from __future__ import annotations

import heapq
import random

import orjson
import pytest

from prefixcache.analyzer.cache.simulate.bounds import belady_hits, min_plan
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile
from tests.helpers import SAMPLES, existing


def plain_min(reqs: list[ChainRequest], capacity: int, pinned: bool) -> list[int]:
    """The definition, one heap entry per block: leading cached blocks (up to ``max_blocks``),
    then every block stored with its next use (request, first position there) and the
    furthest evicted until ``capacity`` fits; with ``pinned`` the request's own blocks go
    only when nothing else is left."""
    never = (len(reqs), 0)
    nxt: dict = {}
    nexts: list[list[tuple[int, int]]] = [[] for _ in reqs]
    for r in range(len(reqs) - 1, -1, -1):
        nexts[r] = [nxt.get(h, never) for h in reqs[r].hashes]
        for i in range(len(reqs[r].hashes) - 1, -1, -1):
            nxt[reqs[r].hashes[i]] = (r, i)
    when: dict = {}
    heap: list = []
    hits = []
    for r, req in enumerate(reqs):
        limit = len(req.hashes) if req.max_blocks is None else min(len(req.hashes), req.max_blocks)
        k = 0
        while k < limit and req.hashes[k] in when:
            k += 1
        hits.append(k)
        for h, nu in zip(req.hashes, nexts[r]):
            when[h] = nu
            heapq.heappush(heap, ((-nu[0], -nu[1]), repr(h), h))
        mine = set(req.hashes) if pinned else set()
        held, others = [], len(when) - len(mine)
        while len(when) > capacity and others > 0:  # first the blocks of other requests
            item = heapq.heappop(heap)
            h = item[2]
            if when.get(h, None) != (-item[0][0], -item[0][1]):
                continue  # stale entry
            if h in mine:
                held.append(item)
            else:
                del when[h]
                others -= 1
        for item in held:
            heapq.heappush(heap, item)
        while len(when) > capacity:  # then the request's own
            item = heapq.heappop(heap)
            if when.get(item[2], None) == (-item[0][0], -item[0][1]):
                del when[item[2]]
    return hits


def random_chains(rng: random.Random, n: int, universe: int, longest: int) -> list[ChainRequest]:
    """Chains that share heads (sessions), repeat hashes inside a request, carry caps."""
    out = []
    for _ in range(n):
        root = rng.randrange(3)
        hashes = [root * 1000 + i if rng.random() < 0.6 else rng.randrange(universe)
                  for i in range(rng.randint(0, longest))]
        out.append(ChainRequest(hashes, 4 * len(hashes), 4, rng.choice([None, None, None, 0, 1, 3])))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_equals_plain_min_on_random_traces(seed):
    rng = random.Random(seed)
    for _ in range(60):
        reqs = random_chains(rng, rng.randint(1, 25), rng.randint(1, 15), rng.randint(1, 9))
        plan = min_plan(reqs)
        distinct = len({h for r in reqs for h in r.hashes})
        for cap in range(0, distinct + 3):
            for pinned in (True, False):
                assert belady_hits(reqs, cap, pinned, plan).tolist() == plain_min(reqs, cap, pinned), (cap, pinned)


def test_hash_values_beyond_uint64_and_negative():
    rng = random.Random(7)
    for _ in range(30):
        base = random_chains(rng, 15, 8, 6)
        odd = {h: v for h, v in zip(sorted({h for r in base for h in r.hashes}),
                                    [1 << 70, -5, 2**64 - 1, 0, -(1 << 66), 3, 2**63, 17] * 20)}
        reqs = [ChainRequest([odd[h] for h in r.hashes], r.num_tokens, 4, r.max_blocks) for r in base]
        for cap in (0, 1, 3, 6, 50):
            for pinned in (True, False):
                assert belady_hits(reqs, cap, pinned).tolist() == plain_min(reqs, cap, pinned)


def test_small_exact_case():
    # capacity 2: after [a,b], request [c] must evict; MIN drops b (used later than a)
    reqs = [ChainRequest([1, 2], 8, 4), ChainRequest([3], 4, 4), ChainRequest([1], 4, 4),
            ChainRequest([1, 2], 8, 4)]
    assert belady_hits(reqs, 2).tolist() == [0, 0, 1, 1]
    assert belady_hits([], 3).tolist() == []
    assert belady_hits([ChainRequest([], 0, 4)] * 2, 3).tolist() == [0, 0]


def test_pinned_request_larger_than_the_cache_keeps_its_nearest_blocks():
    # request 0 stores 4 blocks into 2 slots: the two next used soonest (3 at request 1, 1 at request 2)
    reqs = [ChainRequest([1, 2, 3, 4], 16, 4), ChainRequest([3], 4, 4), ChainRequest([1, 2], 8, 4)]
    assert belady_hits(reqs, 2, pinned=True).tolist() == plain_min(reqs, 2, True) == [0, 1, 1]


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


def test_mooncake_equals_plain_min_and_bounds():
    lines = existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl").read_bytes().splitlines()
    reqs = [orjson.loads(x) for x in lines]
    chains = [ChainRequest(r["hash_ids"], r["input_length"], 512) for r in reqs]
    total = sum(len(r["hash_ids"]) for r in reqs)
    plan = min_plan(chains)
    at5 = belady_hits(chains, int(0.05 * 43924), True, plan)
    at10 = belady_hits(chains, int(0.10 * 43924), True, plan)
    assert at5.sum() / total >= 0.386 and at10.sum() / total >= 0.501  # papers.md §1 Belady row
    assert at5.sum() / total < 0.640 and at10.sum() / total < 0.640  # never above the unbounded ideal
    for pinned in (True, False):
        assert belady_hits(chains, 2196, pinned, plan).tolist() == plain_min(chains, 2196, pinned)
