"""Radix prefix index (against brute force), vLLM block alignment, divergence location."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import prepare
from prefixcache.analyzer.cache.base import servable_tokens
from prefixcache.analyzer.cache.index.radix import PrefixIndex
from prefixcache.analyzer.lint.locate import locate
from prefixcache.analyzer.sequence import common_prefix_len


def brute(seqs: list[tuple[int, ...]], ids: tuple[int, ...]) -> tuple[int, set[int]]:
    """Longest shared prefix with any earlier sequence, and which ones share it."""
    best = max((common_prefix_len(s, ids) for s in seqs), default=0)
    return best, {i for i, s in enumerate(seqs) if common_prefix_len(s, ids) == best}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=12).map(tuple), min_size=1, max_size=25))
def test_index_matches_brute_force(seqs):
    index = PrefixIndex()
    for i, ids in enumerate(seqs):
        found = index.insert(ids, i)
        length, owners = brute(seqs[:i], ids)
        assert found.length == length
        if length:
            # the most recent request sharing the longest prefix
            assert found.owner == max(owners)
        else:
            assert found.owner is None


def test_owner_is_most_recent_and_never_longer_than_its_prompt():
    index = PrefixIndex()
    index.insert((1, 2, 3, 4, 5), "a")
    index.insert((1, 2), "b")  # shorter, ends mid-edge
    m = index.match((1, 2, 3, 9))
    assert (m.length, m.owner) == (3, "a")  # "b" covers only 2 tokens
    m = index.match((1, 2, 7))
    assert (m.length, m.owner) == (2, "b")
    assert index.match((8,)).owner is None and index.requests == 2 and index.tokens == 7


def test_long_sequences_use_the_binary_search():
    base = tuple(range(10_000))
    index = PrefixIndex()
    index.insert(base, 0)
    assert index.insert(base[:6_543] + (-1,) + base[6_544:], 1).length == 6_543
    assert index.insert(base + (5,), 2).length == 10_000


def test_block_aligned_follows_vllm():
    assert servable_tokens(100, 200, 16) == 96
    assert servable_tokens(200, 200, 16) == 192  # the last token is always computed: ⌊199/16⌋·16
    assert servable_tokens(32, 33, 16) == 32 and servable_tokens(33, 33, 16) == 32
    assert servable_tokens(15, 100, 16) == 0 and servable_tokens(5, 0, 16) == 0
    assert servable_tokens(100, 200, 1) == 100


def test_locate_maps_a_timestamp_divergence(cases):
    preps = list(prepare(Ingest([str(cases / "timestamp_in_system.jsonl")])))
    a, b = preps[0], preps[1]
    token = common_prefix_len(a.tokens.ids, b.tokens.ids)
    div = locate(b.request, b.rendered, b.tokens, a.rendered, a.tokens, token)
    assert div.segment == "system" and div.kind == "system" and div.other_kind == "system"
    assert div.json_path == "messages[0].content" and div.line == 1
    assert b.rendered.text[div.char - 6 : div.char + 2] == "10:31:40" and div.before.endswith("10:31:")
    assert div.after.startswith("40 UTC") and div.other_after.startswith("02 UTC")
    red = locate(b.request, b.rendered, b.tokens, a.rendered, a.tokens, token, redact=True)
    assert red.after.startswith("<40 chars, h:") and "UTC" not in red.before + red.after + red.other_after
