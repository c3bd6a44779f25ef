"""Reuse in time (``simulate --survival``): reuse gaps and residency against brute-force definitions on real samples."""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np
import pytest

from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.cache.simulate.survival import T_POINTS, reuse_gaps, residency, survival, survival_curve
from prefixcache.analyzer.cache.workload import to_sim_requests
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import Preparer
from tests.helpers import SAMPLES, existing

CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"


@lru_cache(maxsize=None)
def _reqs(path, limit: int | None = None):
    p = Preparer()
    items = [p.prepare(r) for r in Ingest([str(existing(path))])]
    reqs = to_sim_requests(items)
    return reqs[:limit] if limit else reqs


def _keys(r, bs):
    """A block's identity by brute force: a node of a trie of blocks (parent node, block tokens)
    numbered in order seen (equal keys ⇔ equal prefixes, no hash of ours involved); a trace's
    logged ids."""
    if r.hashes is not None:
        return list(r.hashes)
    ids, out, key = list(r.tokens), [], -1
    for k in range(len(ids) // bs):
        key = _TRIE.setdefault((key, tuple(ids[k * bs:(k + 1) * bs])), len(_TRIE))
        out.append(key)
    return out


_TRIE: dict = {}


def brute_gaps(reqs, bs) -> list[tuple[str, float]]:
    """Every (session, gap): for each block key, the differences of the sorted times it was used."""
    uses: dict = {}
    for r in reqs:
        for k in dict.fromkeys(_keys(r, bs)):
            uses.setdefault(k, []).append((r.now, r.session))
    out = []
    for times in uses.values():
        for (t0, _), (t1, s) in zip(times, times[1:]):
            out.append((s, t1 - t0))
    return sorted(out)


def brute_stays(reqs, bs, cap, ttl):
    """Block stays in a plain LRU (an OrderedDict: the request's blocks touched tail first, then the
    least recent evicted), expiry strictly after ``ttl`` idle seconds, ending at last use + ttl."""
    od: OrderedDict = OrderedDict()
    start: dict = {}
    stays = []
    for r in reqs:
        keys = list(dict.fromkeys(_keys(r, bs)))
        if ttl is not None:
            for k in [k for k, t in od.items() if r.now - t > ttl]:
                stays.append((start.pop(k), od.pop(k) + ttl))
        for k in reversed(keys):
            if k not in od:
                start[k] = r.now
            od[k] = r.now
            od.move_to_end(k)
        while cap is not None and len(od) > cap:
            k, _ = od.popitem(last=False)
            stays.append((start.pop(k), r.now))
    stays += [(s, None) for s in start.values()]
    return sorted(stays, key=lambda x: (x[0], np.inf if x[1] is None else x[1]))


@pytest.mark.parametrize("path, bs, limit", [(CLAUDE, 16, 60), (MOONCAKE, 512, None)])
def test_reuse_gaps_equal_brute_force(path, bs, limit):
    reqs = _reqs(path, limit)
    bs = reqs[0].block_size or bs
    got = sorted((s, g) for _, s, g in reuse_gaps(reqs, bs))
    want = brute_gaps(reqs, bs)
    assert len(got) == len(want) > 100
    assert [s for s, _ in got] == [s for s, _ in want]
    assert np.allclose([g for _, g in got], [g for _, g in want])
    s = survival(reqs, bs, [])
    gaps = np.asarray([g for _, g in want])
    assert s.gaps[0].gaps_s.count == len(want)
    assert s.gaps[0].gaps_s.p50 == pytest.approx(float(np.percentile(gaps, 50)), abs=1e-6)
    for p in s.gaps[0].within:
        assert p.fraction == pytest.approx((gaps <= p.t_s).mean(), abs=1e-6)


@pytest.mark.parametrize("path, bs, limit, cap, ttl", [
    (CLAUDE, 16, 60, 600, None), (CLAUDE, 16, 60, 2000, 20.0), (MOONCAKE, 512, None, 500, None),
    (MOONCAKE, 512, None, None, 5.0)])
def test_residency_equals_brute_force(path, bs, limit, cap, ttl):
    reqs = _reqs(path, limit)
    bs = reqs[0].block_size or bs
    stays, end = residency(reqs, bs, cap, "lru", ttl)
    got = sorted(((s, e) for _, s, e in stays), key=lambda x: (x[0], np.inf if x[1] is None else x[1]))
    want = brute_stays(reqs, bs, cap, ttl)
    assert len(got) == len(want)
    assert [s for s, _ in got] == pytest.approx([s for s, _ in want])
    assert [np.inf if e is None else e for _, e in got] == pytest.approx([np.inf if e is None else e for _, e in want])
    assert any(e is not None for _, e in want)  # something was evicted: the case is not trivial
    curve = survival_curve(stays, end)
    for p in curve:  # S(t) from the brute-force stays, directly
        risk = [(s, e) for s, e in want if s <= end - p.t_s]
        alive = sum(e is None or e - s > p.t_s for s, e in risk)
        assert p.blocks == len(risk)
        assert p.fraction == (pytest.approx(alive / len(risk), abs=1e-6) if risk else None)


def test_unbounded_cache_without_ttl_keeps_everything():
    reqs = _reqs(CLAUDE, 40)
    s = survival(reqs, 16, [("unbounded", None)])
    row = s.residency[0]
    assert row.kind == "all" and row.evicted_s.count == 0 and row.still_cached_blocks == row.stored_blocks
    assert all(p.fraction in (1.0, None) for p in row.survival)
    assert [p.t_s for p in row.survival] == list(T_POINTS)
    kinds = {r.kind for r in s.residency}
    assert {"system", "history"} <= kinds  # per segment kind, from the prompt's spans
    assert sum(r.stored_blocks for r in s.residency if r.kind != "all") == row.stored_blocks


def test_block_hashes_are_the_brute_force_keys():
    """The simulator's chain is a chained hash: equal chains ⇔ equal prefixes on this sample."""
    reqs = _reqs(CLAUDE, 10)
    chains = {tuple(r.chain(16)[:5]) for r in reqs}
    prefixes = {tuple(_keys(r, 16)[:5]) for r in reqs}
    assert len(chains) == len(prefixes)
    assert list(hash_blocks(list(reqs[0].tokens), 16)) == list(reqs[0].chain(16))


def test_block_kinds_by_brute_force_tool_outputs_included():
    """Each block's kind is the group of the span holding its last token, ``tool_outputs`` inside a
    tool-result message (Claude Code's tool results), checked token by token."""
    from prefixcache.analyzer.cache.simulate.survival import block_kinds

    reqs = _reqs(CLAUDE, 40)
    assert any(r.tool_spans for r in reqs)
    for r in reqs[::7]:
        n = r.num_tokens // 16
        want = []
        for k in range(n):
            last = (k + 1) * 16 - 1
            if any(a <= last < b for a, b in r.tool_spans):
                want.append("tool_outputs")
                continue
            want.append(next((g for g, a, b in r.spans if a <= last < b), "other"))
        assert block_kinds(r, n, 16) == want
    s = survival(reqs, 16, [("unbounded", None)])
    assert "tool_outputs" in {g.kind for g in s.gaps} | {x.kind for x in s.residency}
