"""Request-body readers on hand-written fixtures (tests/fixtures/ingest) and the cases."""

from __future__ import annotations

import json

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Usage
from tests.helpers import CASES, ROOT, existing

FIXTURES = ROOT / "tests" / "fixtures" / "ingest"


def _reqs(*names: str, **kw):
    ing = Ingest([str(FIXTURES / n) for n in names], **kw)
    return list(ing), ing.summary


def test_openai_chat_pairs_list_with_deepseek_usage() -> None:
    (r0, r1), s = _reqs("chat_pairs.json")
    assert (r0.format, r0.provenance.record, r0.provenance.pointer) == ("openai-chat", 1, "[0]")
    assert r0.usage == Usage(1893, 1856, None, 77)
    assert r1.usage == Usage(2001, 1920, None, 5)  # prompt_cache_hit_tokens when details are absent
    assert (r0.timestamp, r1.timestamp) == (1767322800.0, 1767322860.0)  # response.created
    assert r1.messages[2].reasoning == "Greet back."
    assert r1.messages[3].content == "What is in this image?" and [p.type for p in r1.messages[3].parts] == ["image"]
    assert r1.messages[3].text_blocks == ("What is in this image?",)
    assert r0.extra == {"user": "u-42"} and r0.session == r1.session and (r0.index, r1.index) == (0, 1)
    assert {"usage", "timestamp", "model", "messages", "tools", "system", "cache_control"} == r1.observed
    assert s.records == 2 and s.skipped == ()


def test_cases_tool_call_arguments_stay_raw(cases) -> None:
    """toolcall_args_reserialized: request 4 logs the same call with different JSON text."""
    reqs = list(Ingest([str(cases / "toolcall_args_reserialized.jsonl")]))
    raw = [json.loads(line)["messages"][2]["tool_calls"][0]["function"]["arguments"]
           for line in (cases / "toolcall_args_reserialized.jsonl").read_text().splitlines()[1:]]
    got = [r.messages[2].tool_calls[0].arguments for r in reqs[1:]]
    assert got == raw and len(set(got)) == 2
    assert not any(tc.arguments_inferred for r in reqs for m in r.messages for tc in m.tool_calls)
    tools = reqs[0].tools
    assert tools[0].schema["type"] == "function" and tools[0].path == "tools[0]"
    assert list(tools[0].parameters) == list(json.loads((cases / "toolcall_args_reserialized.jsonl").read_text()
                                                        .splitlines()[0])["tools"][0]["function"]["parameters"])


def test_anthropic_cases_rolling_breakpoint(cases) -> None:
    reqs = list(Ingest([str(cases / "anthropic_rolling_breakpoint.jsonl")]))
    last = reqs[-1]
    assert [m.role for m in last.messages] == ["system", "user", "assistant", "tool", "user", "assistant", "tool",
                                               "user", "assistant", "tool", "user"]
    marked = [m.path for m in last.messages if m.cache_control]
    assert marked == ["system[0]", "messages[9]"]  # the rolling marker sits on the newest user turn only
    assert last.messages[3].tool_call_id == last.messages[2].tool_calls[0].id


def test_anthropic_pair_blocks_usage_and_cache_control() -> None:
    (r,), _ = _reqs("anthropic_pair.json")
    assert r.format == "anthropic-messages" and r.model == "claude-sonnet-4-20250514"
    assert r.usage == Usage(prompt_tokens=10 + 100 + 2000, cached_tokens=2000, cache_write_tokens=100, output_tokens=42)
    assert [(m.role, m.path, m.cache_control) for m in r.messages] == [
        ("system", "system[0]", "5m"), ("system", "system[1]", "1h"), ("user", "messages[0]", None),
        ("assistant", "messages[1]", None), ("tool", "messages[2].content[0]", "5m"), ("user", "messages[2]", None),
        ("assistant", "messages[3]", None), ("user", "messages[4]", None)]
    a = r.messages[3]
    assert (a.content, a.reasoning, a.tool_calls[0].arguments, a.tool_calls[0].arguments_inferred) == (
        "Let me look.", "User greets; list files.", '{"command": "ls"}', True)
    assert r.messages[6].reasoning_opaque and r.messages[6].content == "Two Python files."
    assert [p.type for p in r.messages[7].parts] == ["image"] and r.messages[7].content == "And this?"
    assert (r.tools[0].name, r.tools[0].cache_control, r.tools[0].parameters["required"]) == ("Bash", "5m", ["command"])
    assert r.extra["metadata"]["user_id"].endswith("session_0f1e")
    assert any("json.dumps" in n for n in r.notes)


def test_responses_items_and_pair_usage() -> None:
    (r0, r1), s = _reqs("responses_codex_like.jsonl")
    assert r0.format == r1.format == "openai-responses"
    assert r0.usage is None and r1.usage == Usage(5120, 4864, None, 210)
    assert r1.timestamp == 1767322800.0 and r1.model == "gpt-5-codex"
    assert [(m.role, m.path) for m in r1.messages] == [
        ("system", "instructions"), ("user", "input[0]"), ("user", "input[1]"), ("assistant", "input[2]"),
        ("tool", "input[4]"), ("assistant", "input[5]"), ("tool", "input[6]"), ("assistant", "input[7]"),
        ("user", "input[8]")]
    call = r1.messages[3]
    assert call.reasoning == "Look at the test first." and call.reasoning_opaque
    assert (call.tool_calls[0].id, call.tool_calls[0].arguments) == ("call_A", '{"command":["cat","tests/test_io.py"]}')
    patch = r1.messages[5].tool_calls[0]
    assert (patch.kind, patch.name, patch.arguments) == ("custom", "apply_patch", "*** Begin Patch\n*** End Patch")
    assert r1.messages[4].tool_call_id == "call_A" and r1.messages[6].content == "Done!"
    assert [t.name for t in r1.tools] == ["shell", "apply_patch", "web_search"]
    assert r1.tools[0].parameters["required"] == ["command"] and "format" in r1.tools[1].schema
    assert r0.extra["prompt_cache_key"] == "0199a1b2-thread" and r0.session == r1.session
    assert s.skipped == ()


def test_litellm_payloads() -> None:
    (r0, r1), s = _reqs("litellm_payloads.jsonl")
    assert r0.format == "litellm" and r0.model == "claude-3-5-sonnet-20241022"
    assert r0.usage == Usage(1500, 0, 1496, 20) and r1.usage == Usage(1560, 1496, 60, 30)
    assert (r0.timestamp, r1.timestamp) == (1737433775.25, 1737433779.5)
    assert [t.path for t in r1.tools] == ["model_parameters.tools[0]"] and r1.tools[0].name == "bash"
    assert r1.messages[2].tool_calls[0].arguments == '{"cmd": "ls"}' and r1.messages[3].role == "tool"
    assert r0.extra["user"] == "alice" and r0.extra["trace_id"] == "trace-1"
    (k,) = s.skipped
    assert (k.record, k.bad, k.reason) == (3, False, "not a chat call (call_type 'aembedding')")


def test_openhands_log_completions_chain_across_files() -> None:
    (r0, r1), s = _reqs("openhands_completions")
    assert r0.format == r1.format == "openhands-completions"
    assert r0.session == r1.session == "anthropic__claude-3-5-sonnet-20241022-1737433775.123#1"
    assert (r0.index, r1.index) == (0, 1)
    assert r0.usage == Usage(2100, 0, 2096, 50) and r1.usage == Usage(2180, 2096, 80, 12)
    assert (r0.timestamp, r1.timestamp) == (1737433775.123, 1737433788.456)
    assert [t.path for t in r1.tools] == ["kwargs.tools[0]"]
    assert [m.cache_control for m in r1.messages] == ["5m", "5m", None, "5m"]
    assert r1.messages[3].tool_call_id == "toolu_9" and r1.extra["cost"] == 0.0123
    assert s.records == 2 and s.files == 2


def test_cases_observed_and_no_usage(cases) -> None:
    (r, *_) = list(Ingest([str(existing(CASES) / "clean_append_only.jsonl")]))
    assert r.usage is None and r.timestamp is None and r.model == "gpt-4.1"
    assert r.observed == frozenset({"system", "tools", "messages", "model", "cache_control"})


def test_pairs_with_bodies_as_json_text(tmp_path) -> None:
    """Proxies store bodies as text: a pair whose request/response are JSON strings reads the same."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be terse.",
            "messages": [{"role": "user", "content": "hi"}]}
    resp = {"usage": {"input_tokens": 5, "cache_read_input_tokens": 1024, "output_tokens": 3}}
    path = tmp_path / "proxy.jsonl"
    path.write_text(json.dumps({"request": json.dumps(body), "response": json.dumps(resp)}) + "\n"
                    + json.dumps({"request": "{not json", "response": None}) + "\n")
    ing = Ingest([str(path)])
    (r,) = list(ing)
    assert r.format == "anthropic-messages" and r.usage == Usage(1029, 1024, None, 3)
    assert [m.role for m in r.messages] == ["system", "user"]
    (k,) = ing.summary.skipped
    assert (k.record, k.field, k.bad) == (2, "request", True) and k.reason.startswith("body text is not JSON")
