"""vLLM (CPU build) in the loop, one server for the session (``conftest.py``).

Sequential replays are exact: every request's cached tokens = the simulator's prediction, in
--send tokens and --send chat, with a KV capacity that evicts; the cold pass is really cold after
each reset; /metrics deltas = the per-request sums. Under load (all shared cases interleaved by
session at --concurrency 8) the engine's own KV events account for every request's cached tokens,
and each difference from our model names the event behind it. A Poisson run sends at its rate.

Each replay covers every case file at once (one tokenizer load, one pair of /metrics scrapes per
pass): the same requests as one replay per file, in a fraction of the time."""

from __future__ import annotations

import json

import pytest

from prefixcache.replay import ReplayOptions, open_replay
from tests.helpers import CASES, SAMPLES

pytestmark = pytest.mark.engines
CASE_PATHS = sorted(CASES.glob("*.jsonl"))
#: How a difference from our model's prediction is explained by a KV event (replay/server/ledger.py).
NAMED = ("block removed before reuse", "a concurrent request registered first", "not registered yet",
         "kept by the engine")


def _run(url: str, paths, **kw):
    return open_replay([str(p) for p in paths], ReplayOptions(server=url, **kw)).run()


def _check(outcome, exact: bool = True):
    r = outcome.report
    assert r.stopped is None and r.findings == (), (r.stopped, r.findings)
    if exact:
        assert r.differences == (), r.differences
    for s in r.passes:
        assert s.failed == 0 and s.refused is None, s.failures
        if exact:
            assert s.reconciled == s.ok == s.requests, (s.pass_name, s.reconciled, s.ok)
        assert s.metrics["prefix_cache_hits"] == s.cached_tokens and s.metrics_equal is True
        assert s.metrics["prefix_cache_queries"] == s.engine_prompt_tokens
    return {s.pass_name: s for s in r.passes}


def test_cold_pass_is_really_cold(vllm_url):
    res = _run(vllm_url, CASE_PATHS[:2], send="tokens", passes=("cold",))
    p = _check(res)
    assert p["cold"].reset is True and p["cold"].requests > 5 and p["cold"].cached_tokens == 0
    assert all(r.engine_prompt_tokens == r.prompt_tokens for r in res.rows)


def test_cases_send_tokens_sequential_evicting(vllm_url):
    res = _run(vllm_url, CASE_PATHS, send="tokens", passes=("warm", "canonical"))
    assert res.report.engine.kind == "vllm" and res.report.engine.block_size == 32
    assert res.report.capacity_blocks == 255
    p = _check(res)
    assert p["warm"].evicted_blocks > 0  # the 255-block capacity evicted, and the prediction followed
    assert p["canonical"].cached_tokens > p["warm"].cached_tokens > 0
    assert all(r.engine_prompt_tokens == r.prompt_tokens for r in res.rows)


def test_cases_send_chat(vllm_url):
    _check(_run(vllm_url, CASE_PATHS, send="chat", passes=("warm",)))


def test_concurrency_8_accounted_by_kv_events(vllm_url, vllm_kv_events, tmp_path):
    """The Done-when of the load issue: sessions interleaved at --concurrency 8 keep ≥ 6 requests in
    flight for most sends, every request's cached tokens equal the resident prefix the engine's KV
    events give at its scheduling point (100% accounted), each difference from our model names its
    event, and /metrics deltas = the per-request sums."""
    out = tmp_path / "rows.jsonl"
    res = _run(vllm_url, CASE_PATHS, send="tokens", passes=("warm",), concurrency=8, kv_events=vllm_kv_events,
               out=out)
    p = _check(res, exact=False)["warm"]
    rows = [r for r in res.rows if r.ok]
    assert len(rows) == p.requests
    in_flight = [r.in_flight + 1 for r in rows]  # this request and the others in flight at its send
    assert sum(n >= 6 for n in in_flight) > len(rows) / 2, sorted(in_flight)
    kv = res.report.kv_events
    assert kv is not None and kv.missing_batches == 0 and kv.unmapped_blocks == 0
    assert kv.requests == len(rows) and kv.accounted == kv.requests, kv  # 100% accounted
    assert all(d.fact.startswith(NAMED) for d in res.report.differences), res.report.differences
    assert p.reconciled + len(res.report.differences) == p.requests
    # the events are recorded beside the rows, with the engine's and our timestamps
    lines = [json.loads(x) for x in (tmp_path / "rows.jsonl.kv-events.jsonl").read_text().splitlines()]
    assert len(lines) == kv.events and {e["type"] for e in lines} == {"stored", "removed", "cleared"}
    assert all(e["ts"] > 1e9 and e["t_recv"] > 0 for e in lines)
    # the engine's real residency: the 255-block pool evicted, each stay measured insert -> removal
    res_row = kv.survival.residency[0]
    assert res_row.capacity == "engine" and res_row.stored_blocks > 255 and res_row.evicted_s.count > 0
    assert kv.survival.gaps[0].gaps_s.count > 0


def test_poisson_rate_is_kept(vllm_url, tmp_path):
    """120 one-turn requests (no session waits on another) at a Poisson 4/s — about what this CPU
    server serves of them, so the run takes about 30 s: the measured arrival rate (sends − 1 over
    the first-to-last send span) is within 5% of the target, and each request went out when due."""
    n, rate = 120, 4.0
    log = tmp_path / "independent.jsonl"
    log.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"Request {i}: answer with one word."}]})
                           + "\n" for i in range(n)))
    res = _run(vllm_url, [log], send="tokens", passes=("warm",), rate=rate)
    _check(res, exact=False)
    rows = sorted((r for r in res.rows if r.ok), key=lambda r: r.t_send)
    assert len(rows) == n and len({r.session for r in rows}) == n
    measured = (n - 1) / (rows[-1].t_send - rows[0].t_send)
    assert abs(measured / rate - 1) <= 0.05, measured
    late = sorted(r.t_send - r.t_scheduled for r in rows)
    assert late[len(late) // 2] < 0.05, late  # the median request left within 50 ms of its due time


def test_claude_code_sample_bounded(vllm_url):
    sample = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
    res = _run(vllm_url, [sample], send="tokens", passes=("warm",), max_requests=12, max_prompt_tokens=3000,
               template="chatml_tools")
    p = _check(res)
    assert p["warm"].cached_tokens > 0
