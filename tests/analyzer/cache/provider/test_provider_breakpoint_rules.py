"""Anthropic's documented breakpoint rules on requests built as the docs describe them (issue 23, item 2):
no ``cache_control`` → no write and no read; automatic caching (a top-level ``cache_control``) → one
breakpoint on the last block; entries per model (a switch reads nothing) and per thinking setting for
message entries; the 20-block lookback counted in content blocks; the 4 slots; the minimums by model."""

from __future__ import annotations

import json

from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint, Scope
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.cache.workload import request_marks
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.prepare import prepare
from tests.helpers import SAMPLES
from tests.test_doc_figures import run_json

CLAUDE = SAMPLES / "claude_code_session_v1.0.98_fe5e1c67.jsonl"
SYSTEM = "You are a careful reviewer of pull requests. Explain each finding with the file and line. " * 80
T0 = 1_790_000_000.0


def _body(turns: int, *, model: str = "claude-sonnet-4-5", system_mark: bool = False, last_mark: bool = False,
          top_level: bool = False, **extra) -> dict:
    msgs = []
    for i in range(turns):
        msgs += [{"role": "user", "content": [{"type": "text", "text": f"question {i}"}]},
                 {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}]
    last = {"type": "text", "text": f"question {turns}", **({"cache_control": {"type": "ephemeral"}} if last_mark else {})}
    msgs.append({"role": "user", "content": [last]})
    sys_block = {"type": "text", "text": SYSTEM, **({"cache_control": {"type": "ephemeral"}} if system_mark else {})}
    out = {"model": model, "max_tokens": 512, "system": [sys_block], "messages": msgs, **extra}
    if top_level:
        out["cache_control"] = {"type": "ephemeral"}
    return out


def _log(tmp_path, bodies: list[dict], name: str = "log.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"timestamp": T0 + 10 * i, "request": b}) + "\n" for i, b in enumerate(bodies)))
    return str(path)


def _predicted(tmp_path, bodies: list[dict]) -> list[int]:
    doc = run_json(["simulate", _log(tmp_path, bodies), "--cache", "anthropic", "--per-request"])
    return [r["cached_tokens"] for r in doc["requests"]]


def test_no_cache_control_means_no_write_and_no_read(tmp_path):
    assert _predicted(tmp_path, [_body(0), _body(1), _body(2)]) == [0, 0, 0]
    doc = run_json(["simulate", _log(tmp_path, [_body(0), _body(1)]), "--cache", "anthropic"])
    assert any("set no cache_control" in w and "PC603" in w for w in doc["warnings"])


def test_automatic_caching_reads_the_previous_prompt(tmp_path):
    got = _predicted(tmp_path, [_body(0, top_level=True), _body(1, top_level=True)])
    marked = _predicted(tmp_path, [_body(0, last_mark=True), _body(1, last_mark=True)])
    assert got[0] == 0 and got[1] > 1000 and got == marked  # the automatic mark is the last block's


def test_a_model_switch_is_a_new_cache(tmp_path):
    a, b = _body(0, system_mark=True, last_mark=True), _body(1, system_mark=True, last_mark=True)
    switched = _predicted(tmp_path, [a, b | {"model": "claude-opus-4-1"}, _body(2, system_mark=True, last_mark=True)])
    assert switched[1] == 0  # nothing the other model wrote is read
    assert switched[2] > 1000  # the first model's entries are still there 20 s later


def test_thinking_switch_keeps_tools_and_system(tmp_path):
    a, b = _body(0, system_mark=True, last_mark=True), _body(1, system_mark=True, last_mark=True)
    same = _predicted(tmp_path, [a, b])
    thinking = _predicted(tmp_path, [a, b | {"thinking": {"type": "enabled", "budget_tokens": 2048}}])
    assert 1000 < thinking[1] < same[1]  # the system entry, not the conversation entry


def test_marks_from_the_log_and_slots(tmp_path):
    body = _body(1, system_mark=True, last_mark=True, top_level=True,
                 tools=[{"name": n, "description": "d", "input_schema": {}, "cache_control": {"type": "ephemeral"}}
                        for n in "abc"])
    (p,) = prepare(Ingest([_log(tmp_path, [body])]))
    marks = request_marks(p.request, p.tokens.segments)
    assert (marks.source, marks.slots) == ("logged", 6)  # 3 tools + system + newest turn + automatic
    ends = [bp.end for bp in marks.breakpoints]
    assert ends == sorted(ends) and ends[-1] == max(s.end for s in p.tokens.segments if s.kind == "message")


def test_agent_logs_keep_the_agents_placement():
    """Claude Code transcripts log no request body: their marks are the agent's placement, and the
    simulation of the real sample is unchanged (167/170 exact, 169/170 in band)."""
    doc = run_json(["simulate", str(CLAUDE), "--cache", "anthropic"])
    a = doc["agreement"]
    assert (a["calls"], a["expected_exact"], a["inside_band"], a["in_thread_exact"]) == (170, 167, 169, 164)
    assert any(w.startswith("breakpoints not in the log for 170 of 170") for w in doc["warnings"])


def test_lookback_counts_content_blocks_not_messages():
    rules = rules_for("anthropic", "claude-sonnet-4-5")
    toks = list(range(6000))
    # 3 parts: the entry at 2000, then one message of 25 blocks (parallel tool calls) ending at 3000
    bounds = [2000, 3000]
    cache = AnthropicCache(rules)
    cache.step(toks, bounds, [Breakpoint(2000)], 0)
    assert cache.lookup(toks, bounds, [Breakpoint(3000)], 1) == 2000  # one boundary back: found
    assert cache.lookup(toks, bounds, [Breakpoint(3000)], 1, blocks={2000: 1, 3000: 26}) == 0  # 25 blocks back
    assert cache.lookup(toks, bounds, [Breakpoint(3000)], 1, blocks={2000: 1, 3000: 21}) == 2000  # exactly 20
    assert cache.reachable(2000, bounds, [Breakpoint(3000)], 6000, {2000: 1, 3000: 21})
    assert not cache.reachable(2000, bounds, [Breakpoint(3000)], 6000, {2000: 1, 3000: 22})
    assert not cache.reachable(2000, bounds, [], 6000)  # no breakpoint, no read


def test_entries_are_scoped():
    rules = rules_for("anthropic", "claude-sonnet-4-5")
    toks = list(range(4000))
    cache = AnthropicCache(rules)
    opus = Scope("opus", "opus|t", head_end=1500)
    cache.step(toks, [1500, 4000], [Breakpoint(1500), Breakpoint(4000)], 0, scope=opus)
    assert cache.lookup(toks, [1500, 4000], [Breakpoint(4000)], 1, scope=opus) == 4000
    assert cache.lookup(toks, [1500, 4000], [Breakpoint(4000)], 1, scope=Scope("sonnet", "sonnet|t", 1500)) == 0
    assert cache.lookup(toks, [1500, 4000], [Breakpoint(4000)], 1, scope=Scope("opus", "opus|x", 1500)) == 1500


def test_minimums_by_model():
    mins = {m: rules_for("anthropic", m).min_tokens for m in (
        "claude-opus-4-6", "claude-opus-4-5-20251101", "claude-haiku-4-5", "claude-opus-4-7", "claude-opus-4-8",
        "claude-sonnet-4-6", "claude-sonnet-4-5", "claude-3-5-haiku-20241022", "claude-opus-5", "claude-opus-5-5",
        "claude-fable-5-1", "claude-sonnet-5", "claude-sonnet-5-5", "claude-haiku-5-5")}
    assert mins == {"claude-opus-4-6": 4096, "claude-opus-4-5-20251101": 4096, "claude-haiku-4-5": 4096,
                    "claude-opus-4-7": 2048, "claude-opus-4-8": 1024, "claude-sonnet-4-6": 1024,
                    "claude-sonnet-4-5": 1024, "claude-3-5-haiku-20241022": 2048, "claude-opus-5": 512,
                    "claude-opus-5-5": 512, "claude-fable-5-1": 512, "claude-sonnet-5": 1024,
                    "claude-sonnet-5-5": 1024, "claude-haiku-5-5": 1024}


def test_openai_chat_body_for_a_claude_model_reads_top_level_automatic_caching(tmp_path):
    """An OpenAI-style body for a Claude model (OpenRouter) with a top-level cache_control is automatic
    caching; the same body for an OpenAI model is a what-if whose placement is assumed and said."""
    def chat(model: str, n: int, auto: bool) -> dict:
        msgs = [{"role": "system", "content": SYSTEM}]
        for i in range(n):
            msgs += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        msgs.append({"role": "user", "content": f"question {n}"})
        return {"model": model, "messages": msgs, **({"cache_control": {"type": "ephemeral"}} if auto else {})}

    claude = "anthropic/claude-sonnet-4.5"
    assert _predicted(tmp_path, [chat(claude, 0, True), chat(claude, 1, True)])[1] > 1000
    assert _predicted(tmp_path, [chat(claude, 0, False), chat(claude, 1, False)]) == [0, 0]
    doc = run_json(["simulate", _log(tmp_path, [chat("gpt-4.1", 0, False), chat("gpt-4.1", 1, False)]),
                    "--cache", "anthropic", "--per-request"])
    assert doc["requests"][1]["cached_tokens"] > 1000
    assert any("went to another provider's model" in w for w in doc["warnings"])
