"""vLLM (CPU build) in the loop: every request's cached tokens = the simulator's prediction,
in --send tokens and --send chat, sequential and at concurrency 4 with a KV capacity that
evicts; the cold pass is really cold after each reset; /metrics deltas = the per-request sums."""

from __future__ import annotations

import pytest

from prefixcache.replay import ReplayOptions, open_replay
from tests.helpers import CASES

pytestmark = pytest.mark.engines
CASE_FILES = sorted(p.name for p in CASES.glob("*.jsonl"))


def _run(url: str, paths, **kw):
    return open_replay([str(p) for p in paths], ReplayOptions(server=url, **kw)).run()


def _check(outcome):
    r = outcome.report
    assert r.stopped is None and r.findings == (), (r.stopped, r.findings)
    assert r.differences == (), r.differences
    for s in r.passes:
        assert s.failed == 0 and s.refused is None, s.failures
        assert s.reconciled == s.ok == s.requests, (s.pass_name, s.reconciled, s.ok)
        assert s.metrics["prefix_cache_hits"] == s.cached_tokens and s.metrics_equal is True
        assert s.metrics["prefix_cache_queries"] == s.engine_prompt_tokens
    return {s.pass_name: s for s in r.passes}


@pytest.mark.parametrize("case", CASE_FILES)
def test_cases_send_tokens(vllm_url, case):
    res = _run(vllm_url, [CASES / case], send="tokens", passes=("cold", "warm", "canonical"))
    assert res.report.engine.kind == "vllm" and res.report.engine.block_size == 32
    assert res.report.capacity_blocks == 255
    p = _check(res)
    assert p["cold"].reset is True and p["cold"].cached_tokens == 0  # really cold after each reset
    assert all(r.engine_prompt_tokens == r.prompt_tokens for r in res.rows)


@pytest.mark.parametrize("case", CASE_FILES)
def test_cases_send_chat(vllm_url, case):
    res = _run(vllm_url, [CASES / case], send="chat", passes=("warm",))
    _check(res)


def test_all_cases_concurrency_4_evicting(vllm_url):
    res = _run(vllm_url, [CASES / c for c in CASE_FILES], send="tokens", passes=("warm",),
               concurrency=4)
    p = _check(res)
    assert p["warm"].evicted_blocks > 0  # the 255-block capacity evicted
    assert max(r.in_flight for r in res.rows) >= 1


def test_claude_code_sample_bounded(vllm_url):
    from tests.helpers import SAMPLES

    sample = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
    res = _run(vllm_url, [sample], send="tokens", passes=("warm",), max_requests=12, max_prompt_tokens=3000,
               template="chatml_tools")
    p = _check(res)
    assert p["warm"].cached_tokens > 0
