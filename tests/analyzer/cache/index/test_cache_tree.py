"""The one radix tree against brute force: owners, pages, caps, capacity with leaf eviction."""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache.analyzer.cache.base import servable_tokens
from prefixcache.analyzer.cache.index.eviction import ORDERS
from prefixcache.analyzer.cache.index.radix import RadixTree
from prefixcache.analyzer.sequence import common_prefix_len

SEQS = st.lists(st.lists(st.integers(0, 2), max_size=14).map(tuple), min_size=1, max_size=25)


def aligned(n: int, b: int) -> int:
    return n // b * b


def brute(stored: list[tuple[tuple[int, ...], int]], ids: tuple[int, ...], b: int) -> tuple[int, int | None]:
    """Block-aligned longest prefix shared with any stored sequence (each kept to its
    full blocks), and the most recent owner sharing that many."""
    shares = [(aligned(common_prefix_len(s, ids), b), owner) for s, owner in stored]
    best = max((n for n, _ in shares), default=0)
    owners = [o for n, o in shares if n == best]
    return best, (owners[-1] if best else None)


@settings(max_examples=150, deadline=None)
@given(SEQS, st.sampled_from([1, 2, 3]))
def test_unbounded_tree_with_owners_and_pages_equals_brute_force(seqs, b):
    tree = RadixTree(b, cap_last_token=False)
    capped = RadixTree(b)
    stored: list[tuple[tuple[int, ...], int]] = []
    for i, ids in enumerate(seqs):
        want, owner = brute(stored, ids, b)
        assert tree.longest(ids).length == want and tree.longest(ids).owner == owner
        assert tree.match(ids).cached_tokens == want  # no cap: the plain aligned LCP
        assert capped.match(ids).cached_tokens == servable_tokens(want, len(ids), b)  # ⌊min(p, n−1)/B⌋·B
        found = tree.share(ids, i)  # the match before inserting, then the insert
        assert (found.length, found.owner) == (want, owner)
        capped.insert(ids, float(i), owner=i)
        stored.append((ids[:aligned(len(ids), b)], i))
        assert tree.size_tokens == capped.size_tokens == _held_tokens([s for s, _ in stored], b)


def _held_tokens(seqs, b: int) -> int:
    """Tokens a block-keyed tree holds for these (block-aligned) sequences: distinct block prefixes × B."""
    return b * len({s[:k] for s in seqs for k in range(b, len(s) + 1, b)})


def _contents(tree: RadixTree) -> list[tuple[int, ...]]:
    """Every root-to-leaf token sequence the tree holds."""
    out, stack = [], [(tree.root, ())]
    while stack:
        node, prefix = stack.pop()
        prefix = prefix + tuple(node.key)
        if not node.children and node is not tree.root:
            out.append(prefix)
        stack.extend((c, prefix) for c in node.children.values())
    return out


@pytest.mark.parametrize("policy", list(ORDERS))
@pytest.mark.parametrize("b", [1, 2])
def test_capacity_keeps_the_tree_consistent_with_what_it_holds(policy, b):
    rng = random.Random(11 + b)
    tree = RadixTree(b, capacity_tokens=24, policy=policy)
    for t in range(120):
        ids = tuple(rng.randrange(3) for _ in range(rng.randrange(1, 16)))
        held = _contents(tree)
        want = max((aligned(common_prefix_len(s, ids), b) for s in held), default=0)
        assert tree.match(ids, t).cached_tokens == servable_tokens(want, len(ids), b)
        before = tree.size_tokens
        ins = tree.insert(ids, float(t), owner=t)
        after = _contents(tree)
        assert tree.size_tokens == _held_tokens(after, b)
        assert tree.longest(ids).length == aligned(len(ids), b)  # the inserted path is never evicted
        assert tree.size_tokens <= max(24, aligned(len(ids), b))
        assert tree.size_tokens <= before + aligned(len(ids), b) and (ins.evicted or tree.size_tokens <= 24)


def test_lru_evicts_the_least_recent_leaf_and_reports_it():
    tree = RadixTree(capacity_tokens=8)
    tree.insert((1, 2, 3, 4), 0.0)
    tree.insert((5, 6, 7, 8), 1.0)
    tree.insert((1, 2, 3, 4), 2.0)  # refreshes the first path
    ins = tree.insert((9, 9), 3.0)
    assert len(ins.evicted) == 1 and tree.longest((5, 6)).length == 0 and tree.longest((1, 2, 3, 4)).length == 4
    mru = RadixTree(capacity_tokens=8, policy="mru")
    for now, ids in enumerate([(1, 2, 3, 4), (5, 6, 7, 8), (1, 2, 3, 4)]):
        mru.insert(ids, float(now))
    mru.insert((9, 9), 3.0)
    assert mru.longest((1, 2, 3, 4)).length == 0 and mru.longest((5, 6, 7, 8)).length == 4


def test_edges_hold_each_distinct_token_once_in_compact_arrays():
    base = tuple(range(1000))
    tree = RadixTree(cap_last_token=False)
    tree.insert(base, 0.0, owner="a")
    tree.insert(base[:400] + (7,) * 10, 1.0, owner="b")
    nodes = [n for n in _nodes(tree) if n is not tree.root]
    stores = {id(n.src): n.src for n in nodes}  # a split shares its child's storage
    assert sum(len(s) for s in stores.values()) == 1010  # only the new tokens are copied, never the whole prompt
    assert all(isinstance(s, array) and s.itemsize == 4 for s in stores.values())
    assert tree.longest(base[:500]).owner == "a" and tree.longest(base[:300]).owner == "b"


def test_edges_store_each_token_once():
    base = tuple(range(1000))
    tree = RadixTree(cap_last_token=False)
    tree.insert(base, 0.0, owner="a")
    tree.insert(base[:400] + (-1,) * 10, 1.0, owner="b")
    tree.insert(base + (7,) * 5, 2.0, owner="c")  # extends the first: only the 5 new tokens are stored
    stores = {id(n.src): len(n.src) for n in _nodes(tree) if n is not tree.root}
    assert sum(stores.values()) == 1000 + 10 + 5  # a leaf keeps its own tokens, a split shares its child's
    assert tree.longest(base[:500]).owner == "c" and tree.longest(base[:300]).owner == "c"
    assert tree.longest(base[:400] + (-1,)).owner == "b"


def test_compact_arrays_are_stored_as_they_are():
    tree = RadixTree(cap_last_token=False)
    tree.insert(array("I", range(100)), 0.0, owner="a")
    assert tree.longest(array("I", range(50)) + array("I", [7])).length == 50
    assert all(isinstance(n.src, array) for n in _nodes(tree) if n is not tree.root)


def test_ids_that_do_not_fit_widen_the_tree():
    tree = RadixTree(cap_last_token=False)
    tree.insert((1, 2, 3), 0.0, owner="a")
    tree.insert((1, 2, -5), 1.0, owner="b")  # negative: int64 storage
    tree.insert((1, 2, 2 ** 70), 2.0, owner="c")  # beyond int64: tuples
    assert [tree.longest(t).owner for t in ((1, 2, 3), (1, 2, -5), (1, 2, 2 ** 70))] == ["a", "b", "c"]
    assert tree.longest((1, 2, 9)).length == 2


def _nodes(tree):
    stack = [tree.root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children.values())
