"""`replay --server` against a small OpenAI-compatible server on localhost (real HTTP, the
bench's stub): passes, prediction = engine on an independent cache rule, /metrics deltas,
--send chat PC504, faults as rows, server death, resume, load shapes, the CLI."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from bench.openai_stub import StubState, StubThread
from prefixcache.analyzer.errors import ConfigError
from prefixcache.cli.app import app
from prefixcache.replay.server.metrics import delta, histogram_quantile, parse_metrics
from prefixcache.replay.server.load import LoadShape
from prefixcache.analyzer.replay_rows import ServerRow, load_rows
from prefixcache.analyzer.stats import Distribution
from prefixcache.replay import ReplayOptions, open_replay
from prefixcache.replay.server.kinds import recognize
from tests.helpers import CASES

TOK = "smollm2"
TEMPLATE = "chatml_tools"
APPEND = str(CASES / "clean_append_only.jsonl")
WINDOW = str(CASES / "sliding_window.jsonl")


@pytest.fixture
def stub():
    s = StubThread(StubState(block_size=16))
    yield s
    s.stop()


def _run(url: str, paths=(APPEND,), **kw):
    opts = ReplayOptions(server=url, tokenizer=TOK, template=TEMPLATE, **kw)
    return open_replay(list(paths), opts).run()


def _passes(outcome) -> dict:
    return {p.pass_name: p for p in outcome.report.passes}


def test_tokens_sequential_reconciles_and_metrics_deltas(stub, tmp_path):
    out = tmp_path / "r.jsonl"
    res = _run(stub.url, out=out)
    p = _passes(res)
    assert res.report.engine.kind == "vllm" and res.report.block_size == 16
    assert res.report.capacity_blocks == 999  # num_gpu_blocks − the null block
    assert p["cold"].reset is True and p["cold"].cached_tokens == 0 and p["cold"].predicted_cached == 0
    warm = p["warm"]
    assert warm.cached_tokens > 0 and warm.differing == 0 and warm.reconciled == warm.ok == 6
    for s in p.values():  # /metrics deltas = the sum of the per-request figures
        assert s.metrics["prefix_cache_hits"] == s.cached_tokens and s.metrics_equal is True
        assert s.metrics["prefix_cache_queries"] == s.engine_prompt_tokens == s.prompt_tokens
        assert s.ttft.count == s.ok and s.ttft.p50 <= s.ttft.p95 <= s.ttft.p99
    rows = load_rows(out, ServerRow)
    assert len(rows) == 18 and all(r.ok and r.run == res.report.run for r in rows)
    assert res.report.differences == () and res.report.findings == ()
    doc = orjson.loads(orjson.dumps(res.report))
    assert list(doc)[:3] == ["engine", "send", "load"]


def test_concurrency_keeps_session_order_and_reconciles(stub):
    res = _run(stub.url, paths=(APPEND, WINDOW), passes=("warm",), concurrency=4)
    rows = sorted(res.rows, key=lambda r: r.position)
    assert len(rows) == 13
    assert max(r.in_flight for r in rows) >= 1  # two sessions overlapped
    # the two sessions share their system prompt and tools: a turn sent while the other session's request
    # holding that prefix is still in flight may miss (or take) it — a race, named as such, never unexplained
    diffs = res.report.differences
    assert res.report.passes[0].differing == len(diffs) and all("in flight" in d.fact for d in diffs)
    by_session: dict[str, list] = {}
    for r in rows:
        by_session.setdefault(r.session, []).append(r)
    for turns in by_session.values():
        for a, b in zip(turns, turns[1:]):
            assert b.t_send >= a.t_end  # turn k never before turn k−1's response


def test_chat_counts_compared_pc504(stub):
    res = _run(stub.url, send="chat", passes=("warm",))
    f = res.report.findings
    assert f and all(x.code == "PC504" and x.by == x.engine_prompt_tokens - x.prompt_tokens for x in f)
    assert all("PC504" in d.fact for d in res.report.differences)


def test_no_reset_refuses_cold(tmp_path):
    s = StubThread(StubState(reset_ok=False))
    try:
        res = _run(s.url)
    finally:
        s.stop()
    p = _passes(res)
    assert p["cold"].refused and "VLLM_SERVER_DEV_MODE=1" in p["cold"].refused and p["cold"].requests == 0
    assert p["warm"].reset is False and p["warm"].ok == 6


def test_faults_are_rows_and_retries_only_when_asked(tmp_path):
    s = StubThread(StubState(fail={1: "500", 3: "drop"}))
    try:
        res = _run(s.url, passes=("warm",))
        reasons = {r.position: r.reason for r in res.rows if not r.ok}
        assert reasons[1].startswith("HTTP 500: stub failure") and reasons[3].startswith("dropped stream")
        assert len(res.rows) == 6 and res.report.passes[0].failures == {"HTTP 500": 1, "dropped stream": 1}
        s.state.fail = {s.state.count: "500"}
        again = _run(s.url, passes=("warm",), retries=1)
        assert all(r.ok for r in again.rows) and again.rows[0].attempts == 2
    finally:
        s.stop()


def test_timeout_is_a_row():
    s = StubThread(StubState(fail={0: "slow"}, slow_s=3.0))
    try:
        res = _run(s.url, passes=("warm",), max_requests=1, timeout=0.5)
    finally:
        s.stop()
    assert res.rows[0].status == "error" and res.rows[0].reason == "timeout"


def test_server_dying_stops_cleanly_then_resume(tmp_path):
    out = tmp_path / "r.jsonl"
    s = StubThread()
    session = open_replay([APPEND], ReplayOptions(server=s.url, tokenizer=TOK, template=TEMPLATE, out=out,
                                               passes=("cold", "warm")))
    s.stop()
    res = session.run()
    assert res.report.stopped and "connection refused" in res.report.stopped
    assert len(res.rows) == 1 and load_rows(out, ServerRow)[0].reason.startswith("connection refused")
    s2 = StubThread()
    try:
        opts = ReplayOptions(server=s2.url, tokenizer=TOK, template=TEMPLATE, out=out, passes=("cold", "warm"),
                             resume=True)
        res2 = open_replay([APPEND], opts).run()
    finally:
        s2.stop()
    ok = [r for r in load_rows(out, ServerRow) if r.ok]
    assert len(ok) == 12 and res2.report.stopped is None


def test_resume_sends_no_cold_request_twice(stub, tmp_path):
    out = tmp_path / "r.jsonl"
    _run(stub.url, out=out, passes=("cold",))
    sent = stub.state.count
    res = _run(stub.url, out=out, passes=("cold",), resume=True)
    assert stub.state.count == sent and len(res.rows) == 6


def test_load_shapes():
    a = LoadShape(concurrency=None, rate=5.0, seed=3).offsets([0.0] * 2000)
    assert a == LoadShape(concurrency=None, rate=5.0, seed=3).offsets([0.0] * 2000)
    assert abs(a[-1] / 1999 - 0.2) < 0.02 and a[0] == 0.0
    assert LoadShape(schedule="logged", time_scale=0.1).offsets([100.0, 110.0, 130.0]) == pytest.approx([0.0, 1.0, 3.0])
    assert LoadShape().name == "sequential" and LoadShape(concurrency=4).name == "concurrency 4"
    for bad in (dict(concurrency=0), dict(rate=0.0), dict(schedule="x"), dict(rate=1.0, schedule="logged"),
                dict(time_scale=0), dict(users=2, rate=1.0), dict(think_time=1.0), dict(burstiness=0),
                dict(duration=0), dict(burstiness=0.5), dict(time_scale=0.5)):
        with pytest.raises(ConfigError):
            LoadShape(**bad)


def test_metrics_parsing_and_detection():
    snap = parse_metrics(StubState(block_size=128, num_blocks=7).metrics())
    assert snap.labels("vllm:cache_config_info")["block_size"] == "128"
    after = parse_metrics(StubState(hits=256, queries=1000, prompt_total=1000).metrics())
    assert delta("vllm", snap, after) == {"prompt_tokens": 1000, "prefix_cache_queries": 1000, "prefix_cache_hits": 256}
    assert histogram_quantile([(0.1, 5), (0.2, 10), (float("inf"), 10)], 0.5) == pytest.approx(0.1)
    names = " ".join(snap.samples)
    assert recognize("", {"/props": {"total_slots": 4}}, "").name == "llamacpp"
    assert recognize("", {"/get_server_info": {"page_size": 1}}, "").name == "sglang"
    assert recognize("", {}, names).name == "vllm" and recognize("openai", {}, "").name == "generic"
    d = Distribution.of([0.1, None, 0.3])
    assert d.count == 2 and d.p50 == pytest.approx(0.2) and Distribution.of([]).p50 is None


def test_cli_server_json_and_usage_errors(stub):
    runner = CliRunner()
    res = runner.invoke(app, ["replay", APPEND, "--server", stub.url, "--tokenizer", TOK, "--template", TEMPLATE,
                              "--pass", "cold,warm", "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout.strip().splitlines()[-1])
    assert doc["engine"]["kind"] == "vllm" and [p["pass_name"] for p in doc["passes"]] == ["cold", "warm"]
    assert doc["passes"][1]["ttft"]["count"] == 6
    res = runner.invoke(app, ["replay", APPEND, "--concurrency", "2"])
    assert res.exit_code == 2 and "need --server" in res.output
    res = runner.invoke(app, ["replay", APPEND, "--server", "http://127.0.0.1:9", "--tokenizer", TOK])
    assert res.exit_code == 2 and "no OpenAI-compatible server" in res.output
    res = runner.invoke(app, ["replay", APPEND, "--server", stub.url, "--tokenizer", TOK, "--send", "x"])
    assert res.exit_code == 2


def test_predictors():
    from prefixcache.replay.server.predict import BlockPredictor, LlamaCppPredictor

    b = BlockPredictor(4, None)
    hit, h = b.send(list(range(10)))
    assert hit == 0
    b.done(h, list(range(10)), [10, 11, 12])  # prompt + outputs but the last: 12 tokens, 3 full blocks
    assert b.send(list(range(13)))[0] == 12
    assert b.send(list(range(12)))[0] == 8  # capped at ⌊(n−1)/B⌋·B
    small = BlockPredictor(4, 2)
    _, h = small.send(list(range(12)))
    small.done(h, list(range(12)), [0])
    assert small.evicted >= 1
    s = LlamaCppPredictor(1)
    assert s.send([1, 2, 3])[0] == 0
    s.done(0, [1, 2, 3], [4])
    assert s.send([1, 2, 3, 4, 5])[0] == 4 and s.model.slots[0].busy
