"""The report's first screen without a browser: which cache ``--cache auto`` picks, which row it quotes,
and the answers' figures against the commands' JSON on real samples (the browser reads them in
``test_report_answers_browser.py``)."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.html import content
from prefixcache.analyzer.html.answers import headline_row, usd_per_token
from prefixcache.analyzer.html.content import ReportOptions, gather
from prefixcache.analyzer.errors import ConfigError
from tests.analyzer.html.test_report_html import run_json
from tests.helpers import SAMPLES, existing

DEEPSEEK = SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
SWE = SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"


def test_auto_cache_is_the_provider_of_most_requests() -> None:
    auto = ReportOptions()
    assert auto.cache_for(["claude-sonnet-4-20250514"] * 3 + ["gpt-5.3-codex"])[0] == "anthropic"
    assert auto.cache_for(["deepseek-reasoner", None])[0] == "deepseek"
    assert auto.cache_for(["gemini-2.5-pro"])[0] == "gemini"
    assert auto.cache_for([None, "SmolLM2-135M-Instruct"]) == ("vllm", "no hosted model in the log, so a self-hosted vLLM cache")
    assert ReportOptions(cache="sglang").cache_for(["claude-sonnet-4"])[0] == "sglang"
    assert auto.cache_for(["claude-opus-4-5"], traced=True)[0] == "vllm"  # a block trace: no tokens for the rules
    assert ReportOptions().capacity_for("deepseek") is None and ReportOptions().capacity_for("vllm") == content.DEFAULT_CAPACITY
    with pytest.raises(ConfigError, match="unknown --cache 'nope'"):
        ReportOptions(cache="nope")


def test_the_quoted_row_is_never_a_5_percent_row_unless_asked() -> None:
    rows = [{"policy": p, "capacity": c} for p in ("lru", "belady") for c in ("5%", "10%", "100%")]
    assert headline_row({"results": rows, "cost": None}, user_capacity=False) == 2  # lru at 100%
    assert headline_row({"results": rows, "cost": None}, user_capacity=True) == 0  # the user's first capacity
    assert headline_row({"results": [{"policy": "lru", "capacity": "unbounded"}], "cost": {}}, False) == 0
    assert headline_row(None, False) is None


def test_deepseek_answers_are_the_commands_figures() -> None:
    log = str(existing(DEEPSEEK))
    docs = gather([log], ReportOptions())
    a = docs.answers
    sim = run_json(["simulate", log, "--cache", "deepseek", "--policy", "lru", "--kv-model", "llama-3-8b",
                    "--sizing", "0.9", "--json"])
    assert a["cache"] == docs.simulate["cache"] == "deepseek" and a["hosted"] and a["row"] == 0
    assert a["reuse"]["reported"] == sim["reported"] and a["reuse"]["cost"] == sim["cost"]
    assert a["reuse"]["cost"]["reported_usd_with_cache"] == 0.000922  # what the log's usage implies: 4 calls
    assert a["sizing"]["capacity_blocks"] == sim["analyses"]["sizing"]["capacity_blocks"] == 242
    assert docs.canonicalize == run_json(["canonicalize", log, "--review", "--to", "openai", "--json"])
    per_token = usd_per_token("deepseek", [("deepseek-reasoner", 1)])
    assert per_token == pytest.approx(0.28e-6 * 0.9)  # $0.28/MTok less the 0.1× read
    assert a["usd_per_token"] == pytest.approx(per_token)


def test_canonicalize_is_left_to_its_command_above_the_bound(monkeypatch) -> None:
    monkeypatch.setattr(content, "CANONICALIZE_MAX_TOKENS", 1000)
    docs = gather([str(existing(SWE))], ReportOptions())
    assert docs.canonicalize is None and docs.answers["fix"]["before"] is None
    assert any(w.startswith("canonicalize: not run here on 50,239 prompt tokens") for w in docs.answers["warnings"])
    assert docs.answers["fix"]["manual"] == [{"code": "PC404", "changes": 0, "tokens": 15912, "usd": None}]


def test_the_rules_worth_adds_up_to_what_canonicalize_recovers() -> None:
    """tool_order_shuffle: three requests' PC201 rewrites. Each rule row's own figure also counts what
    earlier requests' rewrites change (1,427 + 1,634 + 1,841 = 4,902 summed), so the first screen shares
    out each request's after − before instead: the rule rows add up to after − before (1,427)."""
    from tests.helpers import CASES

    docs = gather([str(existing(CASES / "tool_order_shuffle.jsonl"))], ReportOptions())
    fix = docs.answers["fix"]
    rows = [t for t in docs.canonicalize["transformations"] if t["applied"]]
    assert sum(t["recovered_tokens"] for t in rows) > fix["recovered"]  # the per-rule probes overlap
    assert fix["recovered"] == fix["after"] - fix["before"] == 1427
    assert [r["code"] for r in fix["rules"]] == ["PC201"] and sum(r["tokens"] for r in fix["rules"]) == 1427


def test_shared_out_keeps_the_request_total() -> None:
    from prefixcache.analyzer.html.answers import _shared_out

    assert _shared_out(100, {"PC201": 30, "PC203": 10}) == {"PC201": 75, "PC203": 25}
    assert _shared_out(7, {"PC101": 0, "PC102": -5}) == {"PC101": 4, "PC102": 3}
    assert sum(_shared_out(-13, {"a": 2, "b": 1}).values()) == -13


def test_served_above_reusable_is_explained_on_the_deepseek_sample(tmp_path) -> None:
    """A fresh user's trip (stop 33): the DeepSeek first screen showed served 15,616 (90.0%) above reusable
    12,324 (71.0%) with no word why. Call 1 was served 3,392 tokens from a cache warm before the log began
    (simulate's calls[].warm_before_log, class above_band); the other calls were served 12,224 ≤ 12,324."""
    from prefixcache.cli.app import app
    from typer.testing import CliRunner

    log = str(existing(DEEPSEEK))
    b = gather([log], ReportOptions()).answers["reuse"]["beyond"]
    sim = run_json(["simulate", log, "--cache", "deepseek", "--json"])
    warm = [c for c in sim["calls"] if c["warm_before_log"]]
    assert [c["record"] for c in warm] == [3] and sim["analyses"]["provider_calls"]["classes"]["above_band"] == 1
    assert (b["warm_calls"], b["warm_tokens"], b["above_calls"], b["above_tokens"], b["rest_tokens"]) == \
        (1, warm[0]["reported_cached_tokens"], 1, 3392, 15616 - 3392)
    assert b["line"].startswith("Served is above reusable: 1 call (3,392 tokens) served from a cache warm before")
    assert b["line"].endswith("The other calls were served 12,224 tokens, within the 12,324 reusable.")
    page = tmp_path / "ds.html"
    assert CliRunner().invoke(app, ["report", log, "-o", str(page)]).exit_code == 0
    assert 'data-answer="reuse.beyond.line"' in page.read_text() and "warm before the log began" in page.read_text()


def test_nothing_to_explain_without_reported_usage() -> None:
    from prefixcache.analyzer.html.answers import served_beyond

    assert served_beyond(None, 10, 20) is None
    assert served_beyond({"reported": {"cached_tokens": 5, "prompt_tokens": 20}, "calls": []}, 10, 20) is None


def test_the_cross_session_prefix_loss_is_on_the_first_screen() -> None:
    """session_id_in_system: a per-session id in the system prompt breaks the prefix the sessions share.
    lint names it PC602 (cross-session prefix) with its lost tokens; simulate judges drift within a session,
    so panel 2 shows lint's figure on a row of its own, its source lint's summary."""
    from tests.helpers import CASES

    log = str(existing(CASES / "session_id_in_system.jsonl"))
    docs = gather([log], ReportOptions())
    lint = run_json(["lint", log, "--json"])
    lost = lint["summary"]["lost_tokens_by_code"]["PC602"]
    assert lost > 0 and docs.lint["summary"]["lost_tokens_by_code"]["PC602"] == lost
    rows = [row for row in docs.answers["losses"] if "PC602" in row["cause"]]
    assert rows == [{"cause": "cross-session prefix · PC602 (lint)", "tokens": lost, "usd": rows[0]["usd"],
                     "source": "lint summary.lost_tokens_by_code.PC602", "note": rows[0]["note"]}]
    assert not any(row["cause"] == "drift · PC602" for row in docs.answers["losses"])
