"""Issue 25 item 4: simulate keeps the prepared requests' kept parts in columns
(:class:`~prefixcache.analyzer.cache.workload.KeptItems`), not an object each: read back they
equal :meth:`Kept.of` of every request, on every shared sample, and a request a column cannot
hold is kept whole."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.cache.workload import Kept, KeptItems
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Provenance, Request, Usage
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES

PATHS = sorted(p for p in SAMPLES.iterdir() if p.suffix != ".md")


def _kept(path) -> tuple[KeptItems, list[Kept]]:
    """The sample's prepared requests kept in columns and as objects."""
    preparer, items, ref = Preparer(), KeptItems(), []
    for request in Ingest([str(path)]):
        p = preparer.prepare(request)
        items.append(p)
        ref.append(Kept.of(p))
    return items, ref


@pytest.mark.parametrize("path", PATHS, ids=[p.name[:40] for p in PATHS])
def test_columns_read_back_as_kept(path):
    items, ref = _kept(path)
    assert len(items) == len(ref) > 0 and not items._whole
    assert list(items) == ref and items[-1] == ref[-1] and items[1:3] == ref[1:3]
    assert [type(k.request.timestamp) for k in items] == [type(k.request.timestamp) for k in ref]


class _P:
    def __init__(self, request, usage_only=False):
        self.request, self.usage_only = request, usage_only


def test_odd_values_are_kept_whole():
    odd = Request(session="s", index=0, format="openai", provenance=Provenance("f", 1, "/0", None),
                  timestamp=3, usage=Usage(prompt_tokens=2 ** 70), extra={"prompt_cache_key": "k", "x": 1})
    plain = Request(session="s", index=1, format="openai", provenance=Provenance("f", 2), model="m", timestamp=1.5,
                    usage=Usage(10, None, 2, 3), extra={"prompt_cache_retention": "24h"})
    items = KeptItems()
    for r in (odd, plain):
        items.append(_P(r))
    assert list(items) == [Kept.of(_P(odd)), Kept.of(_P(plain))] and list(items._whole) == [0]
    assert items[1].request.extra == {"prompt_cache_retention": "24h"} and items[1].request.usage == Usage(10, None, 2, 3)
    from prefixcache.analyzer.cache.workload import item_facts
    assert item_facts(items) == item_facts([Kept.of(_P(odd)), Kept.of(_P(plain))])
    with pytest.raises(IndexError):
        items[2]


@pytest.mark.parametrize("path", PATHS, ids=[p.name[:40] for p in PATHS])
def test_facts_from_columns_equal_facts_from_objects(path):
    from prefixcache.analyzer.cache.workload import item_facts
    items, ref = _kept(path)
    assert item_facts(items) == item_facts(ref)


def test_permuted_reads_back_in_the_new_order():
    """``report``'s tee keeps the parts in the order lint fed them (arrival order) and puts them
    back in input order: ``permuted(order)[k] == items[order[k]]``, odd (whole) parts and kept
    ``extra`` included."""
    odd = Request(session="s", index=0, format="openai", provenance=Provenance("f", 1, "/0", None),
                  timestamp=3, usage=Usage(prompt_tokens=2 ** 70), extra={"prompt_cache_key": "k", "x": 1})
    plain = Request(session="s", index=1, format="openai", provenance=Provenance("f", 2), model="m", timestamp=1.5,
                    usage=Usage(10, None, 2, 3), extra={"prompt_cache_retention": "24h"})
    bare = Request(session="t", index=0, format="openai", provenance=Provenance("g", 7), model="n", timestamp=None)
    items = KeptItems()
    for r in (odd, plain, bare):
        items.append(_P(r))
    order = [2, 0, 1]
    moved = items.permuted(order)
    assert list(moved) == [items[k] for k in order] and list(moved._whole) == [1]
    assert moved[2].request.extra == {"prompt_cache_retention": "24h"} and moved[0].request.timestamp is None
    from prefixcache.analyzer.cache.workload import item_facts
    assert item_facts(moved) == item_facts([items[k] for k in order])
    with pytest.raises(ValueError):
        items.permuted([0, 1])
    assert list(KeptItems().permuted([])) == []
