"""Issue 24 item 2: a system prompt whose sections flip between two orders is restored to the
order first sent (PC402, as tools are for PC201), reaching the ceiling: the figure of the same
session sent in one order throughout."""

from __future__ import annotations

from prefixcache.analyzer.cache.simulate.reuse import reuse
from prefixcache.analyzer.canonical.causes import canonicalize_explained
from prefixcache.analyzer.canonical.rewrite import CanonicalOptions, canonicalize_all
from prefixcache.analyzer.ingest import Ingest
from tests.analyzer.canonical.drift_logs import SECTIONS, flip_flop_sections, session, write


def _total(figs) -> tuple[int, int]:
    return sum(f.prompt_tokens for f in figs), sum(f.reusable_tokens for f in figs)


def test_flip_flop_sections_reach_the_ceiling(tmp_path) -> None:
    reqs = list(Ingest([str(write(tmp_path / "flip.jsonl", flip_flop_sections()))]))
    ceiling = _total(reuse(list(Ingest([str(write(tmp_path / "one.jsonl", session(["\n\n".join(SECTIONS)] * 4)))]))))
    results = canonicalize_explained(reqs)
    before, after = _total(reuse(reqs)), _total(reuse([c.request for c in results]))
    assert before[1] < ceiling[1] and after == ceiling
    codes = [(c.original.index, t.code, t.applied) for c in results for t in c.transformations]
    assert codes == [(1, "PC402", True), (3, "PC402", True)]  # request 2 is already in the first order
    assert all(c.request.messages[0].content == "\n\n".join(SECTIONS) for c in results)
    assert all(c.request.messages[1:] == c.original.messages[1:] for c in results)  # nothing else touched


def test_sections_first_sent_in_another_order_are_left_alone(tmp_path) -> None:
    """Only a return to an order already sent is restored; an input sent in one (any) order is
    byte-identical, and --skip PC402 leaves the flip-flop as it is (lint then reports it)."""
    swapped = "\n\n".join([SECTIONS[1], SECTIONS[0], *SECTIONS[2:]])
    stable = list(Ingest([str(write(tmp_path / "s.jsonl", session([swapped] * 3)))]))
    assert all(c.request == c.original and not c.transformations for c in canonicalize_all(stable))
    reqs = list(Ingest([str(write(tmp_path / "flip.jsonl", flip_flop_sections()))]))
    vetoed = canonicalize_explained(reqs, CanonicalOptions(skip=frozenset({"PC402"})))
    assert [(c.original.index, t.code, t.applied) for c in vetoed for t in c.transformations] == \
        [(1, "PC402", False), (2, "PC402", False), (3, "PC402", False)]


def test_an_edited_section_is_not_a_reorder(tmp_path) -> None:
    edited = "\n\n".join([SECTIONS[0], SECTIONS[2], SECTIONS[1] + " Always.", *SECTIONS[3:]])
    reqs = list(Ingest([str(write(tmp_path / "e.jsonl", session(["\n\n".join(SECTIONS), edited])))]))
    assert not [t for c in canonicalize_all(reqs) for t in c.transformations if t.code == "PC402"]
