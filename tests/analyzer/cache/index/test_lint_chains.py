"""The compact chain index answers exactly what the radix PrefixIndex answers (length and
most recent owner), on chained traces and on chains that reuse ids under other parents."""

from __future__ import annotations

import random
from array import array

from prefixcache.analyzer.cache.index.radix import PrefixIndex
from prefixcache.analyzer.cache.index.chains import ChainIndex
from prefixcache.analyzer.model import compact_ids


def _same_answers(chains):
    radix, compact = PrefixIndex(), ChainIndex()
    for n, ids in enumerate(chains):
        want = radix.insert(array("q", ids), n)
        assert compact.insert(compact_ids(ids), n) == (want.length, want.owner), (n, ids)


def test_random_chains_with_shared_ids_under_other_parents():
    rng = random.Random(11)
    for alphabet in (2, 3, 5, 50):
        chains = []
        for _ in range(400):
            if chains and rng.random() < 0.6:  # extend or cut an earlier chain
                base = rng.choice(chains)[: rng.randint(0, 12)]
            else:
                base = []
            chains.append(base + [rng.randrange(alphabet) for _ in range(rng.randint(0, 8))])
        _same_answers(chains)


def test_prefix_chained_trace():
    rng, chains, prefixes, next_id = random.Random(2), [], [], 0
    for _ in range(2000):
        if prefixes and rng.random() < 0.8:
            base = rng.choice(prefixes)
        else:
            base = list(range(next_id, next_id + rng.randint(1, 10)))
            next_id += len(base)
            prefixes.append(base)
        grow = list(range(next_id, next_id + rng.randint(0, 5)))
        next_id += len(grow)
        chains.append(base[: rng.randint(1, len(base))] + grow if rng.random() < 0.3 else base + grow)
        if rng.random() < 0.5:
            base.extend(grow)
    _same_answers(chains)


def test_empty_and_repeated_chains():
    _same_answers([[], [1, 2, 3], [1, 2, 3], [], [1, 2], [1, 2, 3, 4], [-5, 1], [-5]])
    _same_answers([[1, 2, 3], [1, 2, 2**40, 7], [1, 2, 2**40], [1, 2, 3, 2**33 + 1, -1], [1, 2, 3, 2**33 + 1]])


def test_id_table_is_a_dict():
    from prefixcache.analyzer.cache.index.chains import IdTable

    rng, table, want = random.Random(4), IdTable(bits=2), {}
    for _ in range(5000):
        key = rng.choice([rng.randrange(-2**63, 2**63), rng.randrange(100), rng.randrange(2**32)])
        if rng.random() < 0.7:
            table[key] = want[key] = rng.randrange(2**31 - 1)
        assert table.get(key) == want.get(key) and (key in table) == (key in want)
    assert len(table) == len(want) and all(table.get(k) == v for k, v in want.items())
