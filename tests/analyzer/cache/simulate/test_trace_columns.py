"""Issue 25: the columnar block-trace path of ``simulate`` (Mooncake traces under ``--cache blocks``, LRU /
Belady at finite capacities) gives the object path's document byte for byte — every request's figures,
sessions, drift extents and PC002 causes, every total, the warnings — on every shared Mooncake trace in
tests/fixtures, a copy whose times go backwards and a generated trace that is not prefix-chained (ids under
two parents, repeats inside a request, broken sessions, over 4,096 requests so the session index prunes);
its compiled pass (``_kernels.trace_drift``) equals its pure twin; inputs it does not read fall back to the
object path with the same result."""

from __future__ import annotations

import gzip
import random

import numpy as np
import orjson
import pytest

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.index import kernels
from prefixcache.analyzer.cache.index.trace_sessions import _trace_drift_py, trace_drift
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.ingest.readers.trace_columns import read_columns
from prefixcache.analyzer.lint import simulated
from tests.helpers import FIXTURES, SAMPLES

MOONCAKE = SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"
CONVERSATION = FIXTURES / "traces" / "mooncake_conversation_trace_head6000.jsonl.gz"


def _records(path) -> list[dict]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def _write(path, recs) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return str(path)


def _generated(n: int = 5000, seed: int = 7) -> list[dict]:
    """A sessionless trace that is not prefix-chained: conversations over two common heads, extended,
    cut and branched, some ids repeated inside a request or met under a second parent, times that go back."""
    rng = random.Random(seed)
    convs: list[list[int]] = []
    out, nid = [], 1000
    for i in range(n):
        if rng.random() < 0.3 or not convs:
            ids = ([0, 1, 2] if rng.random() < 0.7 else [0, 5]) + list(range(nid, nid + rng.randint(1, 20)))
            nid += 25
            convs.append(ids)
        else:
            c = rng.randrange(len(convs))
            ids = list(convs[c])
            if rng.random() < 0.2 and len(ids) > 3:
                ids = ids[:rng.randint(1, len(ids) - 1)] + [nid]
                nid += 1
            ids += list(range(nid, nid + rng.randint(0, 5)))
            nid += 6
            if rng.random() < 0.05:
                ids.append(ids[0])
            if rng.random() < 0.05:
                ids.insert(1, rng.randint(0, nid))
            convs[c] = ids
        out.append({"timestamp": i * 10 + rng.choice([0, 0, -15]), "input_length": len(ids) * 512 - rng.randint(0, 511),
                    "output_length": 10, "hash_ids": ids})
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("traces")
    moon = _records(MOONCAKE)
    rng = random.Random(1)
    back = [{**r, "timestamp": r["timestamp"] + rng.choice([0, 0, -500, 700])} for r in moon]
    return {"mooncake": str(MOONCAKE), "conversation_6000": _write(d / "conversation.jsonl", _records(CONVERSATION)),
            "times_go_back": _write(d / "back.jsonl", back), "generated": _write(d / "generated.jsonl", _generated())}


OPTIONS = [dict(policies=("lru", "belady"), capacities="5%,10%", per_request=True),
           dict(policies=("belady", "lru"), capacities="1%,25%,50%"),
           dict(policies=("lru",), capacities="1,100blocks", per_request=True)]


def _doc(monkeypatch, path: str, columnar: bool, **kw) -> bytes:
    kw = dict(kw)
    opts = SimulateOptions(cache="blocks", capacities=tuple(parse_capacities(kw.pop("capacities"))), **kw)
    monkeypatch.setenv("PREFIXCACHE_COLUMNAR", "1" if columnar else "0")
    return orjson.dumps(simulate([path], opts))


@pytest.mark.parametrize("opts", OPTIONS, ids=["lru_belady_rows", "belady_lru", "lru_tiny"])
@pytest.mark.parametrize("name", ["mooncake", "conversation_6000", "times_go_back", "generated"])
def test_columnar_equals_object_path(monkeypatch, traces, name, opts):
    calls = []
    real = simulated._read
    monkeypatch.setattr(simulated, "_read", lambda *a, **k: calls.append(1) or real(*a, **k))
    columnar = _doc(monkeypatch, traces[name], True, **opts)
    assert not calls, "the columnar path was not taken"
    objects = _doc(monkeypatch, traces[name], False, **opts)
    assert calls
    assert columnar == objects
    doc = orjson.loads(columnar)
    assert any(0 < r["hit_ratio_tokens"] < r["ideal_hit_ratio_tokens"] for r in doc["results"])
    if name != "mooncake":  # drift was found and named (the sample has sessions that only grow)
        assert doc["results"][0]["drift_by_rule"].get("PC002", 0) > 0


@pytest.mark.skipif(kernels._kernels is None, reason="the compiled core did not build (no C compiler?)")
@pytest.mark.parametrize("name", ["mooncake", "conversation_6000", "times_go_back", "generated"])
def test_compiled_drift_pass_equals_its_twin(monkeypatch, traces, name):
    monkeypatch.delenv("PREFIXCACHE_PURE", raising=False)
    t = read_columns(Ingest([traces[name]])).in_arrival_order()
    fast = trace_drift(t.offsets, t.ids, t.tokens, t.block_size, t.session)
    pure = _trace_drift_py(t.offsets, t.ids, t.tokens, t.block_size, t.session)
    for k in ("lcp", "overlap", "lost"):
        assert np.array_equal(getattr(fast, k), getattr(pure, k)), k
    assert fast.distinct == pure.distinct == len(np.unique(t.ids))
    assert (pure.overlap > 0).sum() > 0


def test_pure_twin_document(monkeypatch, traces):
    """With PREFIXCACHE_PURE=1 the columnar path runs the pure twins: the same document."""
    opts = OPTIONS[0]
    fast = _doc(monkeypatch, traces["generated"], True, **opts)
    monkeypatch.setenv("PREFIXCACHE_PURE", "1")
    assert _doc(monkeypatch, traces["generated"], True, **opts) == fast


@pytest.mark.parametrize("change", ["blank_line", "extra_key", "bool_id", "float_length", "empty_ids", "gz"])
def test_inputs_it_does_not_read_fall_back(monkeypatch, tmp_path, change):
    recs = _records(MOONCAKE)[:300]
    path = tmp_path / "t.jsonl"
    if change == "extra_key":
        recs[5] = {**recs[5], "chat_id": 3}
    elif change == "bool_id":
        recs[5] = {**recs[5], "hash_ids": [True, *recs[5]["hash_ids"][1:]]}
    elif change == "float_length":
        recs[5] = {**recs[5], "input_length": 12.5}
    elif change == "empty_ids":
        recs[5] = {**recs[5], "hash_ids": []}
    _write(path, recs)
    if change == "blank_line":
        path.write_bytes(path.read_bytes().replace(b"\n", b"\n\n", 3))
    if change == "gz":
        gz = tmp_path / "t.jsonl.gz"
        gz.write_bytes(gzip.compress(path.read_bytes()))
        path = gz
    assert read_columns(Ingest([str(path)])) is None
    opts = OPTIONS[0]
    assert _doc(monkeypatch, str(path), True, **opts) == _doc(monkeypatch, str(path), False, **opts)


def test_other_runs_take_the_object_path(monkeypatch, traces):
    calls = []
    real = simulated._read
    monkeypatch.setattr(simulated, "_read", lambda *a, **k: calls.append(1) or real(*a, **k))
    simulate([traces["mooncake"]], SimulateOptions(cache="vllm", capacities=tuple(parse_capacities("5%"))))
    simulate([traces["mooncake"]], SimulateOptions(cache="blocks", capacities=tuple(parse_capacities("5%")), ttl_s=60))
    simulate([traces["mooncake"]], SimulateOptions(cache="blocks"))  # unbounded
    assert len(calls) == 3
