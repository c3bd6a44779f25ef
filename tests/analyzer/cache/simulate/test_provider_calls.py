"""Every provider call classified (exact, in band, provider-side, drift, above band) in calls, tokens and dollars.

Real log: the Gemini CLI sample (yoavf/ai-sessions, MIT, tests/fixtures/formats/samples). Codex: a
rollout built here in the shape of the real ones (madshn/localpush's gpt-5.3-codex rollouts, not
copied: they carry no licence): session_meta, turn_context, response_item messages and event_msg
token_count records whose usage follows what those rollouts show (the next call reads 128-token
steps of the previous prompt plus its output, or drops to 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from typer.testing import CliRunner

from prefixcache.analyzer.cache.provider.prices import price_for, price_warning, provider_of
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.cli.app import app

GEMINI = Path(__file__).parents[3] / "fixtures" / "formats" / "samples" / "gemini_cli_session_pomodoro_timer.json"
CLAUDE = Path(__file__).parents[3] / "fixtures" / "samples" / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
runner = CliRunner()


def _simulate(*args: str) -> dict:
    res = runner.invoke(app, ["simulate", "--json", *args])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)


def _rollout(tmp_path: Path, usage: list[tuple[int, int, int]], minutes: tuple[int, ...] = (0, 1, 2, 3, 4),
             switch: dict[int, str] | None = None) -> Path:
    """A Codex rollout in the real shape with one user message, one reply and one token_count per call
    (``switch``: call index → the model a turn_context names before it)."""
    recs = [{"timestamp": "2026-02-23T12:00:00.000Z", "type": "session_meta",
             "payload": {"id": "s1", "timestamp": "2026-02-23T12:00:00.000Z", "cwd": "/w", "originator": "codex_cli_rs",
                         "cli_version": "0.104.0", "model_provider": "openai",
                         "base_instructions": {"text": "You are Codex. " * 400}}},
            {"timestamp": "2026-02-23T12:00:00.100Z", "type": "turn_context",
             "payload": {"cwd": "/w", "model": "gpt-5.3-codex"}}]
    for k, (inp, cached, out) in enumerate(usage):
        t = f"2026-02-23T12:{minutes[k]:02d}:10.000Z"
        if k in (switch or {}):
            recs.append({"timestamp": t, "type": "turn_context", "payload": {"cwd": "/w", "model": switch[k]}})
        recs += [{"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                     {"type": "input_text", "text": f"step {k}: " + "please continue the work on the parser. " * 30}]}},
                 {"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [
                     {"type": "output_text", "text": f"done {k} " + "ok " * 100}]}},
                 {"timestamp": t, "type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": {
                     "input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
                     "reasoning_output_tokens": 0, "total_tokens": inp + out}}}}]
    path = tmp_path / "rollout-2026-02-23T12-00-00-s1.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return path


def test_codex_band_counts_the_previous_output_and_a_drop_is_provider_side(tmp_path: Path) -> None:
    # call 2 reads 3,072 of [1,024 + 128·⌊(3,000−1,024)/128⌋ = 2,944, steps(3,000 + 200) = 3,200]: in band;
    # call 3 reads 0 although its prompt extends call 2's: provider-side, expected steps(3,400 + 220) = 3,584;
    # call 4 reads steps(3,800 + 180) = 3,968 exactly; call 5 comes 9 min later (past OpenAI's usual 5 min, within
    # its 1 h) and reads 0: a TTL miss, inside the band [0, steps(4,200 + 150) = 4,224].
    path = _rollout(tmp_path, [(3000, 0, 200), (3400, 3072, 220), (3800, 0, 180), (4200, 3968, 150), (4600, 0, 100)],
                    (0, 1, 2, 3, 12))
    d = _simulate("--cache", "openai", str(path))
    bands = [(c["lagged_cached_tokens"], c["expected_cached_tokens"], c["rule"]) for c in d["calls"]]
    assert bands[1:] == [(2944, 3200, "in-thread"), (3328, 3584, "in-thread"), (3712, 3968, "in-thread"),
                         (4096, 4224, "in-thread-idle")]
    assert [c["inside_band"] for c in d["calls"]][1:] == [True, False, True, True]
    pc = d["analyses"]["provider_calls"]
    assert pc["classes"] == {"exact": 2, "in_band": 1, "provider_side": 1, "ttl": 1, "drift": 0, "above_band": 0,
                             "no_usage": 0}
    assert pc["lost_tokens"]["provider_side"] == 3584 and pc["lost_tokens"]["ttl"] == 4224
    # gpt-5.3-codex is priced by its own row: $1.75/MTok, reads 0.1×
    assert abs(pc["lost_dollars"]["provider_side"] - 3584 * 1.75e-6 * 0.9) < 1e-6
    assert abs(pc["dollars"]["provider_side"] - 3800 * 1.75e-6) < 1e-6
    assert pc["band_held"] == 1.0 and pc["models"] == {"gpt-5.3-codex": 5}


def test_gemini_sample_band_holds_on_the_calls_not_provider_side() -> None:
    d = _simulate("--cache", "gemini", str(GEMINI))
    pc = d["analyses"]["provider_calls"]
    assert pc["provider"] == "gemini" and pc["calls"] == 13
    # the three drops to an older prefix (5,673 after 7,210; 0; 5,837 after 8,735) are provider-side
    assert pc["classes"] == {"exact": 0, "in_band": 9, "provider_side": 3, "ttl": 0, "drift": 1, "above_band": 0,
                             "no_usage": 1}
    assert pc["band_held"] >= 0.9
    assert sum(pc["cached_tokens"].values()) == d["reported"]["cached_tokens"] == 86702
    # billed dollars of all classes = the reported usage's cost at gemini-2.5-pro's $1.25, reads 0.1×
    assert abs(sum(pc["dollars"].values()) - d["cost"]["reported_usd_with_cache"]) < 1e-5
    assert d["cost"]["price_input_per_mtok"] == 1.25 and d["cost"]["rule_set"] == "gemini-automatic"
    assert pc["band_anchor"] == "usage"


def test_cache_of_another_provider_is_warned() -> None:
    d = _simulate("--cache", "openai", str(GEMINI))
    assert any("--cache openai but 14 call(s) were made to 'gemini-2.5-pro', a gemini model" in w for w in d["warnings"])


def test_price_rows_lineup_and_newer_than_row_warning() -> None:
    assert (price_for("openai", "gpt-5.3-codex").input, price_for("openai", "gpt-5.1-codex-max").input) == (1.75, 1.25)
    assert price_for("openai", "gpt-6.1-sol").read == 0.05 and price_for("openai", "gpt-5.5").input == 5.0
    assert price_for("gemini", "gemini-2.5-flash").input == 0.30
    assert price_for("gemini", "gemini-2.5-flash-lite").input == 0.10
    assert rules_for("gemini", "gemini-2.5-flash").min_tokens == 1024
    assert rules_for("gemini", "gemini-3.1-pro-preview").min_tokens == 4096
    assert provider_of("gemini-2.5-pro") == "gemini" and provider_of("claude-opus-4-6") == "anthropic"
    assert price_warning("openai", "gpt-5.3-codex") is None
    assert "newer than any price row (newest listed: 6.1)" in price_warning("openai", "gpt-7.2")
    assert "gpt-[6-9]* row" in price_warning("openai", "gpt-7.2")
    assert "no gemini price row names model 'gemini-4-argon'" in price_warning("gemini", "gemini-4-argon")


def test_a_mixed_model_run_is_priced_per_call_by_each_model(tmp_path: Path) -> None:
    path = _rollout(tmp_path, [(3000, 0, 200), (3400, 3072, 220), (3800, 3584, 180)], switch={2: "gpt-5.5"})
    d = _simulate("--cache", "openai", str(path))
    by = {m["model"]: m for m in d["cost"]["by_model"]}
    assert set(by) == {"gpt-5.3-codex", "gpt-5.5"} and (by["gpt-5.3-codex"]["requests"], by["gpt-5.5"]["requests"]) == (2, 1)
    assert (by["gpt-5.3-codex"]["price_input_per_mtok"], by["gpt-5.5"]["price_input_per_mtok"]) == (1.75, 5.0)
    # reported: gpt-5.3-codex (3,000 + 328 + 307.2 token-equivalents) at $1.75, gpt-5.5 (216 + 358.4) at $5
    want_53 = (3000 + 3072 * 0.1 + 328) * 1.75e-6
    want_55 = (3584 * 0.1 + 216) * 5e-6
    assert abs(by["gpt-5.3-codex"]["reported_usd_with_cache"] - want_53) < 1e-6
    assert abs(by["gpt-5.5"]["reported_usd_with_cache"] - want_55) < 1e-6
    assert abs(d["cost"]["reported_usd_with_cache"] - (want_53 + want_55)) < 2e-6
    assert d["analyses"]["provider_calls"]["models"] == {"gpt-5.3-codex": 2, "gpt-5.5": 1}


def _chat_pairs(tmp_path: Path, retention: str | None) -> Path:
    """Two OpenAI Chat Completions request/response pairs of one conversation 2 h apart (the second
    extends the first); the second reads the first prompt plus its reply (a 24 h retention kept it)."""
    system = "You are a careful release assistant. Follow the checklist exactly. " * 120
    first = [{"role": "system", "content": system}, {"role": "user", "content": "Cut release 1.2."}]
    second = [*first, {"role": "assistant", "content": "Done: tagged v1.2."}, {"role": "user", "content": "Now 1.3."}]
    extra = {"prompt_cache_retention": retention} if retention else {}
    pairs = [{"request": {"model": "gpt-5.1", "messages": msgs, "prompt_cache_key": "release-bot", **extra},
              "response": {"created": created, "usage": {"prompt_tokens": prompt, "completion_tokens": 20,
                                                         "prompt_tokens_details": {"cached_tokens": cached}}}}
             for msgs, created, prompt, cached in ((first, 1_760_000_000, 1700, 0),
                                                   (second, 1_760_007_200, 1740, 1664))]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(pairs))
    return path


def test_logged_24h_retention_widens_the_band_window_and_keys_are_noted(tmp_path: Path) -> None:
    # with 24h logged, the call 2 h later is in-thread: band [steps(1,700) = 1,664, steps(1,720) = 1,664]: exact
    pc = _simulate("--cache", "openai", str(_chat_pairs(tmp_path, "24h")))["analyses"]["provider_calls"]
    assert pc["classes"]["exact"] == 2 and pc["band_held"] == 1.0
    assert any("2 calls carry a prompt_cache_key (1 distinct)" in n for n in pc["notes"])
    assert any("prompt_cache_retention logged (24h on 2 calls)" in n for n in pc["notes"])
    # without it, 2 h is past OpenAI's longest in-memory retention (1 h): the rule falls back to the
    # simulation, which expired the entry (predicts 0): the provider's read of 1,664 is above that band
    d = _simulate("--cache", "openai", str(_chat_pairs(tmp_path, None)))
    assert d["calls"][1]["rule"] == "simulated"
    assert d["analyses"]["provider_calls"]["classes"]["above_band"] == 1


def test_claude_code_sample_split_adds_up_to_the_billed_cost() -> None:
    d = _simulate("--cache", "anthropic", str(CLAUDE))
    pc = d["analyses"]["provider_calls"]
    assert (pc["calls"], pc["classes"]["exact"], pc["classes"]["in_band"], pc["classes"]["above_band"]) == (170, 167, 2, 1)
    assert pc["classes"]["provider_side"] == pc["classes"]["drift"] == 0
    # reads at 0.1× and the 137,976 written tokens at 1.25×: the classes' dollars are the reported cost
    assert abs(sum(pc["dollars"].values()) - d["cost"]["reported_usd_with_cache"]) < 1e-5
    assert pc["band_anchor"] == "usage"  # cl100k stands in for Claude's tokenizer: ours is off the bill by > 2%


GPT55 = Path(__file__).parents[3] / "fixtures" / "codex" / "codemie_gpt-5.5_rollout-2026-05-11T11-26-55-019e1625.jsonl.gz"


def test_gpt55_reads_come_in_512_token_steps_on_a_real_rollout() -> None:
    """codemie-ai/codemie-code's real gpt-5.5 rollout (Apache-2.0, tests/fixtures/codex/SOURCES.md): every
    non-zero read is 512·k − 128, so the band's ends are in that unit. Under the 128-token steps 30 of its
    calls read 1–3 steps below the lagged end and were classed provider-side; now 16 calls read 0 (a machine
    without the prefix) and 2 an older prefix: those 18 only are provider-side."""
    d = _simulate("--cache", "openai", str(GPT55))
    calls = d["calls"]
    reads = [c["reported_cached_tokens"] for c in calls if c["reported_cached_tokens"]]
    assert len(reads) == 48 and {n % 512 for n in reads} == {384}
    pc = d["analyses"]["provider_calls"]
    assert pc["classes"] == {"exact": 35, "in_band": 12, "provider_side": 18, "ttl": 1, "drift": 0,
                             "above_band": 0, "no_usage": 0}
    assert pc["band_held"] == 1.0
    side = [c for c in calls if c["rule"] != "simulated" and c["reported_cached_tokens"] < c["lagged_cached_tokens"]]
    assert sum(c["reported_cached_tokens"] == 0 for c in side) == 17  # 16 provider-side + record 24 (ttl)
    by = {c["record"]: c for c in calls}
    # record 13: the previous prompt is 18,703 tokens: 512·⌊18,831/512⌋ − 128 = 18,304, which it read
    # (the 128-token rule's lagged end, 18,688, was 3 steps above the read)
    assert (by[13]["lagged_cached_tokens"], by[13]["reported_cached_tokens"]) == (18304, 18304)
    assert (by[84]["lagged_cached_tokens"], by[84]["reported_cached_tokens"]) == (41344, 41344)
    # older prefixes (records 234, 245): reads of an earlier call's prompt, still provider-side
    assert by[234]["reported_cached_tokens"] < by[234]["lagged_cached_tokens"] and by[234]["reported_cached_tokens"]
    # the unit is gpt-5.5's alone: gpt-5.3-codex keeps 1,024 + 128-token steps
    assert (rules_for("openai", "gpt-5.5").read_unit, rules_for("openai", "gpt-5.3-codex").read_unit) == (512, 0)
