"""Issue 25 item 1: the compiled core (analyzer/cache/index/_kernels.c) gives the same figures as its
pure-Python twins (``PREFIXCACHE_PURE=1``), on every shared trace and agent log in tests/fixtures: the
whole ``simulate`` document (every request's hit tokens, every total, every loss cause) byte for byte,
LRU (one-pass stack sweep, with vLLM's scratch block) and Belady pinned and unpinned, at capacities that
evict; plus the kernels alone on random inputs against their twins and a plain reference."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from prefixcache.analyzer.api import SimulateOptions, parse_capacities, simulate
from prefixcache.analyzer.cache.index import kernels
from prefixcache.analyzer.cache.simulate.bounds import belady_hits, min_plan
from prefixcache.analyzer.cache.simulate.stack_profile import ChainRequest, stack_profile
from tests.helpers import FIXTURES, SAMPLES

built = pytest.mark.skipif(kernels._kernels is None, reason="the compiled core did not build (no C compiler?)")

TRACES = [SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl",
          SAMPLES / "kvcache_tester_claudecode_hashids64_trace_0001.json",
          pytest.param(FIXTURES / "traces" / "mooncake_conversation_trace_head6000.jsonl.gz", marks=pytest.mark.slow)]
LOGS = [SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl",
        SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"]


def _both(monkeypatch, path, **kw) -> tuple[bytes, bytes]:
    opts = SimulateOptions(per_request=True, policies=("lru", "belady"),
                           capacities=tuple(parse_capacities("1%,5%,25%")), **kw)
    monkeypatch.delenv("PREFIXCACHE_PURE", raising=False)
    assert kernels.compiled()
    fast = orjson.dumps(simulate([str(path)], opts))
    monkeypatch.setenv("PREFIXCACHE_PURE", "1")
    assert not kernels.compiled()
    return fast, orjson.dumps(simulate([str(path)], opts))


@built
@pytest.mark.parametrize("cache", ["vllm", "blocks"])
@pytest.mark.parametrize("path", TRACES, ids=["mooncake", "kvcache_tester", "mooncake_conversation_6000"])
def test_traces_identical_documents(monkeypatch, path, cache):
    fast, pure = _both(monkeypatch, path, cache=cache)
    doc = orjson.loads(fast)
    assert len(doc["requests"]) > 40 and any(0 < r["hit_ratio_tokens"] < 1 for r in doc["results"])
    assert fast == pure


@built
@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_agent_logs_identical_documents(monkeypatch, path):
    fast, pure = _both(monkeypatch, path)
    assert orjson.loads(fast)["requests"] and fast == pure


def _random_chains(rng: random.Random, n: int) -> list[ChainRequest]:
    out = []
    for _ in range(n):
        root = rng.randrange(4)
        hashes = [root * 1000 + i if rng.random() < 0.7 else rng.randrange(40) for i in range(rng.randint(0, 12))]
        out.append(ChainRequest(hashes, 4 * len(hashes) - rng.randrange(4) if hashes else 0, 4,
                                rng.choice([None, None, 0, 2]), rng.choice([0, 0, 1])))
    return out


@built
def test_kernels_equal_their_twins_on_random_inputs(monkeypatch):
    monkeypatch.delenv("PREFIXCACHE_PURE", raising=False)  # the compiled kernel, whatever the suite runs under
    assert kernels.compiled()
    rng = random.Random(25)
    for _ in range(40):
        n = rng.randint(0, 300)
        prev1 = np.array([rng.randint(0, t) for t in range(n)], dtype=np.int64)  # prev + 1 ≤ t
        L = np.array([rng.randint(-1, n + 2) for _ in range(rng.randint(0, 50))], dtype=np.int64)
        q1 = np.array([rng.randint(-1, n + 2) for _ in range(len(L))], dtype=np.int64)
        plain = [sum(1 for t in range(min(max(e, 0), n)) if prev1[t] <= q) for e, q in zip(L, q1)]
        assert kernels.dominance_le(prev1, L, q1).tolist() == plain
        if len(L) and (L >= 0).all() and (L <= n).all() and (q1 >= 0).all() and (q1 <= n).all():  # the twin's domain
            assert kernels._dominance_le_numpy(prev1, L, q1).tolist() == plain
    for _ in range(30):
        reqs = _random_chains(rng, rng.randint(1, 40))
        plan = min_plan(reqs)
        runs = {}
        for pure in ("", "1"):
            monkeypatch.setenv("PREFIXCACHE_PURE", pure)
            prof = stack_profile(reqs)
            runs[pure] = (prof.m.tolist(), [belady_hits(reqs, c, p, plan).tolist() for c in range(0, 30, 3)
                                             for p in (True, False)])
        assert runs[""] == runs["1"]
