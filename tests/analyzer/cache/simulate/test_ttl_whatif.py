"""TTL what-if (``simulate --ttl-whatif``): a hand-computed case, the default row is the result row, idle gaps are ``ttl``."""

from __future__ import annotations


import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.api import SimulateOptions, simulate
from prefixcache.analyzer.cache.models import CacheSpec
from prefixcache.analyzer.cache.provider.caches import Breakpoint
from prefixcache.analyzer.cache.simulate.simulator import baseline
from prefixcache.analyzer.cache.simulate.ttl_whatif import ttl_whatif
from prefixcache.analyzer.cache.workload import SimRequest
from prefixcache.cli.app import app
from tests.helpers import SAMPLES, existing, spaced_claude_session, validate

CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"


def _req(i: int, now: float, n: int = 2000) -> SimRequest:
    return SimRequest(order=i, session="s", index=i, source="hand", record=i, model="claude-sonnet-4", now=now,
                      num_tokens=n, tokens=tuple(range(n)), boundaries=(n,), breakpoints=(Breakpoint(n),))


def test_advice_arithmetic_by_hand():
    """Three calls of one 2,000-token prompt at 0 s, 100 s and 1,100 s on Sonnet ($3/MTok, read 0.1×).
    5 min: write 2,000 (1.25×), read 2,000, write again (idle 1,000 s > 300 s): 2,500 + 200 + 2,500 = 5,200
    token-equivalents = $0.0156. 1 h: write 2,000 at 2×, read, read: 4,000 + 200 + 200 = 4,400 = $0.0132.
    W = 2,000 × (2 − 1.25) × 3e-6 = $0.0045; S = $0.0156 − ($0.0132 − $0.0045) = $0.0069 (a 1.25× re-write
    replaced by a 0.1× read: 2,300 × 3e-6); net = S − W = $0.0024."""
    reqs = [_req(0, 0.0), _req(1, 100.0), _req(2, 1100.0)]
    spec = CacheSpec("anthropic", model="claude-sonnet-4")
    w = ttl_whatif(reqs, spec, ("unbounded", None), baseline(reqs), spec.provider_rules())
    five, hour = w.rows
    assert (five.label, five.ttl_s, hour.label, hour.ttl_s) == ("5m", 300.0, "1h", 3600.0)
    assert (five.cached_tokens, five.written_tokens, five.lost_ttl_tokens) == (2000, 4000, 2000)
    assert (hour.cached_tokens, hour.written_tokens, hour.lost_ttl_tokens) == (4000, 2000, 0)
    assert five.usd_total == pytest.approx(0.0156) and hour.usd_total == pytest.approx(0.0132)
    assert five.usd_writes == pytest.approx(0.015) and hour.usd_writes == pytest.approx(0.012)
    assert five.usd_reads + five.usd_writes + five.usd_uncached == pytest.approx(five.usd_total)
    (a,) = w.advice
    assert (a.misses_turned_hits, a.tokens_turned_hits) == (1, 2000)
    assert a.extra_write_usd == pytest.approx(0.0045)
    assert a.saved_read_usd == pytest.approx(0.0069)
    assert a.net_usd == pytest.approx(0.0024)
    assert a.advice == ("a 1h TTL turns 1 miss (2,000 tokens) into hits for $0.0045 more in writes and saves "
                        "$0.0069 in reads: net $+0.0024 against 5m (pays for itself)")


def test_engine_ttls_price_nothing_and_lose_to_ttl():
    reqs = [_req(0, 0.0), _req(1, 100.0), _req(2, 1100.0)]
    w = ttl_whatif(reqs, CacheSpec("vllm"), ("unbounded", None), baseline(reqs), None)
    rows = {r.label: r for r in w.rows}
    assert rows["run (--ttl none)"].cached_tokens == 2 * 1984  # ⌊(2000 − 1)/16⌋·16 per warm call
    assert rows["300s"].cached_tokens == 1984 and rows["300s"].lost_ttl_tokens == 1984
    assert rows["3600s"].cached_tokens == 2 * 1984 and rows["60s"].cached_tokens == 0
    assert w.advice == [] and all(r.usd_total is None for r in w.rows)


@pytest.mark.slow  # the 170-call Claude Code sample, simulated twice with the what-if (~15 s)
def test_default_row_is_the_result_row_and_idle_gaps_are_ttl(tmp_path):
    """On the real Claude Code session the 5 min row reproduces ``simulate``'s own figures; spacing its
    timestamps (every line from the middle on 20 min later) makes the calls after the gap lose to
    ``ttl``, which a 1 h TTL turns back into hits."""
    doc = simulate([str(existing(CLAUDE))], SimulateOptions(cache="anthropic", ttl_whatif=True))
    five = doc.analyses.ttl_whatif.rows[0]
    assert five.cached_tokens == doc.results[0].cached_tokens
    assert five.written_tokens == doc.results[0].written_tokens
    assert five.usd_total == pytest.approx(doc.cost.usd_with_cache, abs=1e-6)
    assert doc.results[0].lost_tokens_by_cause["ttl"] == 0  # no idle gap over 5 min in the real session

    path = spaced_claude_session(tmp_path, 1200.0)
    gap = simulate([str(path)], SimulateOptions(cache="anthropic", ttl_whatif=True, per_request=True))
    lost = gap.results[0].lost_tokens_by_cause
    assert lost["ttl"] > 0
    base = doc.results[0].lost_tokens_by_cause
    assert lost["drift"] == base["drift"] and lost["cold"] == base["cold"]  # drift and shrinkage untouched
    hit = [r for r in gap.requests if r.lost_tokens_by_cause.get("ttl")]
    assert 1 <= len(hit) <= 6  # the first call of each session after the gap
    five, hour = gap.analyses.ttl_whatif.rows
    assert five.lost_ttl_tokens == lost["ttl"] and hour.lost_ttl_tokens == 0
    (a,) = gap.analyses.ttl_whatif.advice
    assert a.misses_turned_hits == len(hit) and a.tokens_turned_hits == lost["ttl"]
    assert a.net_usd == pytest.approx(five.usd_total - hour.usd_total, abs=1e-6)


def test_cli_json_validates_against_the_schema():
    res = CliRunner().invoke(app, ["simulate", str(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")),
                                   "--cache", "blocks", "--capacity", "5%", "--survival", "--ttl-whatif",
                                   "--reuse", "prefix,chunks", "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    validate(doc, "simulate-analyses")
    a = doc["analyses"]
    assert a["chunks"]["chunk_ceiling_tokens"] >= a["chunks"]["prefix_ceiling_tokens"]
    assert a["ttl_whatif"]["rows"][0]["cached_tokens"] == doc["results"][0]["cached_tokens"]
    assert [r["capacity"] for r in a["survival"]["residency"]][0] == "5%"
    bad = CliRunner().invoke(app, ["simulate", str(existing(CLAUDE)), "--reuse", "prefix,blend"])
    assert bad.exit_code == 2 and "unknown --reuse 'blend'" in bad.output


def test_rich_output_shows_every_analysis():
    res = CliRunner().invoke(app, ["simulate", str(existing(SAMPLES.parent / "cases" / "clean_append_only.jsonl")),
                                   "--cache", "openai", "--survival", "--ttl-whatif", "--reuse", "prefix,chunks"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "reuse gaps" in out and "residency and survival" in out
    assert "TTL what-if · cache openai" in out and "in-memory" in out and "24h" in out
    assert "a 24h TTL turns" in out and "reuse ceilings (segments)" in out
    fleet = CliRunner().invoke(app, ["simulate", str(existing(CLAUDE)), "--replicas", "2", "--survival"])
    assert fleet.exit_code == 2 and "without --replicas" in fleet.output
