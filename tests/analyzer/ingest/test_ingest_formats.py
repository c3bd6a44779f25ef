"""Readers of the formats users bring: OTel GenAI, OpenInference, Cline, Aider, Gemini CLI, opencode,
vLLM / SGLang request logs (real samples where public, documented-schema fixtures otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.ingest.readers.otel import NOTE_ARGS
from prefixcache.analyzer.ingest.readers.server_logs import block_hashes
from tests.helpers import FIXTURES, existing

F = FIXTURES / "formats"
S = FIXTURES / "formats" / "samples"
OTEL = S / "otel_genai_session_a"
#: What the llama.cpp server reported for the 7 calls of session a: (prompt, cached) tokens.
SERVER = [(389, 0), (509, 436), (901, 556), (1130, 948), (1357, 1177), (1560, 1404), (1777, 1607)]


def ingest(*paths: Path) -> tuple[list, Ingest]:
    ing = Ingest([str(existing(p)) for p in paths])
    return list(ing), ing


def accounted(ing: Ingest) -> None:
    """Every record is a request, a skip or context; no error."""
    assert not ing.summary.bad, ing.summary.bad


@pytest.mark.parametrize("path,fmt,requests", [
    (OTEL / "otel_session_a.jsonl", "otel-genai", 7), (OTEL / "otel_session_a.otlp.jsonl", "otel-genai", 7),
    (OTEL / "otel_session_a.events.jsonl", "otel-genai", 7), (OTEL / "otel_openllmetry_session_a.jsonl", "otel-genai", 7),
    (OTEL / "otel_openllmetry_session_a.otlp.jsonl", "otel-genai", 7), (F / "openinference_spans.jsonl", "openinference", 3),
    (S / "gemini_cli_session_pomodoro_timer.json", "gemini-cli", 14),
    (S / "aider_llm_history_friendly_names_first6.aider.llm.history", "aider", 6),
    (F / "cline_task" / "api_conversation_history.json", "cline-task", 3),
    (F / "vllm_enable_log_requests.log", "vllm-log", 3), (F / "sglang_log_requests.log", "sglang-log", 3),
])
def test_detected_and_read(path: Path, fmt: str, requests: int) -> None:
    reqs, ing = ingest(path)
    assert {r.format for r in reqs} == {fmt} and len(reqs) == requests
    accounted(ing)


def test_otel_openllmetry_usage_is_the_server_ground_truth() -> None:
    for name in ("otel_openllmetry_session_a.jsonl", "otel_openllmetry_session_a.otlp.jsonl"):
        reqs, ing = ingest(OTEL / name)
        assert [(r.usage.prompt_tokens, r.usage.cached_tokens) for r in reqs] == SERVER
        assert {r.session for r in reqs} == {"newfmt-session-a"}  # from the invoke_agent root span
        assert [len(r.tools) for r in reqs] == [3] * 7 and "tools" in reqs[0].observed
        assert [len(r.messages) for r in reqs] == [2, 4, 6, 8, 10, 12, 15]
        assert not ing.summary.skipped and ing.summary.records == 8  # the invoke_agent root span is context


def test_otel_messages_match_the_request_bodies_sent() -> None:
    """The messages read from the spans are the bodies the client sent (roles, text, tool ids)."""
    bodies = [json.loads(line) for line in (OTEL / "requests_session_a.jsonl").read_text().splitlines()]
    reqs, _ = ingest(OTEL / "otel_session_a.jsonl")
    for req, body in zip(reqs, bodies, strict=True):
        sent = body["messages"]
        assert [m.role for m in req.messages] == [m["role"] for m in sent]
        assert [m.content for m in req.messages] == [m.get("content") or "" for m in sent]
        assert [m.tool_call_id for m in req.messages] == [m.get("tool_call_id") for m in sent]
    last = reqs[-1]
    calls = [c for m in last.messages for c in m.tool_calls]
    assert calls[0].arguments == '{"path":".","recursive":true}' and calls[0].arguments_inferred
    assert NOTE_ARGS in last.notes and "not checkable from OTel" in NOTE_ARGS


def test_otel_official_spans_have_no_tools_so_a_hidden_prefix() -> None:
    reqs, ing = ingest(OTEL / "otel_session_a.otlp.jsonl")
    assert [r.usage.prompt_tokens for r in reqs] == [p for p, _ in SERVER]
    assert all(r.usage.cached_tokens is None and r.extra["opaque_prefix_key"] == "otel:openai:tools" for r in reqs)
    assert "tools" not in reqs[0].observed and reqs[0].timestamp == pytest.approx(1796113090.659625)
    # 6 execute_tool spans and the invoke_agent root are context (no note each)
    assert ing.summary.records == 14 and not ing.summary.skipped


def test_otel_events_read_like_spans() -> None:
    spans, _ = ingest(OTEL / "otel_session_a.jsonl")
    events, _ = ingest(OTEL / "otel_session_a.events.jsonl")
    assert [r.messages for r in events] == [r.messages for r in spans]


def test_otel_content_absent_is_usage_only(tmp_path: Path) -> None:
    line = {"name": "chat m", "context": {"trace_id": "0x1", "span_id": "0x2"}, "start_time": "2025-01-01T00:00:00Z",
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                           "gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_read.input_tokens": 64}}
    p = tmp_path / "spans.jsonl"
    p.write_text(json.dumps(line) + "\n")
    [req], ing = ingest(p)
    assert not req.messages and (req.usage.prompt_tokens, req.usage.cached_tokens) == (100, 64)
    assert any("content not captured" in n for n in req.notes)


def test_otel_other_spans_are_notes(tmp_path: Path) -> None:
    line = {"name": "embeddings m", "context": {"trace_id": "0x1", "span_id": "0x3"}, "start_time": "2025-01-01T00:00:00Z",
            "attributes": {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "m"}}
    p = tmp_path / "spans.jsonl"
    p.write_text(json.dumps(line) + "\n")
    reqs, ing = ingest(p)
    assert not reqs and [s.reason for s in ing.summary.skipped] == ["span 'embeddings' is not a model call (context)"]


def test_aider_call_without_reply_is_noted(tmp_path: Path) -> None:
    p = tmp_path / ".aider.llm.history"
    p.write_text("TO LLM 2025-01-31T11:21:36\n-------\nSYSTEM be brief\n-------\nUSER hi\n"
                 "TO LLM 2025-01-31T11:22:00\n-------\nSYSTEM be brief\n-------\nUSER hi again\n"
                 "LLM RESPONSE 2025-01-31T11:22:05\nASSISTANT hello\n")
    reqs, ing = ingest(p)
    assert [len(r.messages) for r in reqs] == [2, 2] and ing.summary.records == 3
    assert any("no LLM RESPONSE" in n for n in reqs[0].notes) and reqs[1].extra["response_line"] == 11


def test_openinference_spans() -> None:
    reqs, ing = ingest(F / "openinference_spans.jsonl")
    assert {r.session for r in reqs} == {"oi-session-1"}
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens) for r in reqs] == [(412, 0), (455, 384), (489, 448)]
    assert reqs[0].tools[0].name == "get_weather" and reqs[0].messages[0].role == "system"
    # arguments are logged as the string sent: the re-serialization between calls 2 and 3 is visible
    a2 = reqs[1].messages[2].tool_calls[0]
    a3 = reqs[2].messages[2].tool_calls[0]
    assert (a2.arguments, a3.arguments) == ('{"city": "Paris"}', '{"city":"Paris"}') and not a3.arguments_inferred
    assert reqs[1].messages[3].tool_call_id == "call_1"
    assert [s.reason for s in ing.summary.skipped] == ["TOOL span 'get_weather' is not a model call (context)"]


def test_cline_task_folder() -> None:
    reqs, ing = ingest(F / "cline_task")
    assert [r.format for r in reqs] == ["cline-task"] * 3 and {r.session for r in reqs} == {"cline:cline_task"}
    # Anthropic semantics: prompt = tokensIn + cacheWrites + cacheReads
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens, r.usage.cache_write_tokens) for r in reqs] == [
        (11844, 0, 11840), (12004, 11840, 160), (12194, 12000, 190)]
    assert [len(r.messages) for r in reqs] == [1, 3, 5] and reqs[0].model == "claude-sonnet-4-20250514"
    assert all(r.extra["opaque_prefix_key"] == "cline" for r in reqs)
    assert "Current Time" in reqs[0].messages[0].content
    assert sorted(Path(s.source).name for s in ing.summary.skipped) == ["task_metadata.json", "ui_messages.json"]
    accounted(ing)


def test_aider_history_excerpt() -> None:
    reqs, ing = ingest(S / "aider_llm_history_friendly_names_first6.aider.llm.history")
    first = reqs[0]
    assert first.messages[0].role == "system" and first.messages[0].content.startswith("Act as an expert code analyst.")
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert first.timestamp == pytest.approx(1738322496.0) and first.provenance.record == 1
    assert any("Current date: 2025-01-31" in m.content for r in reqs for m in r.system_messages)
    assert not ing.summary.skipped and ing.summary.records == 12  # 6 calls + their 6 replies
    assert first.extra["response_line"] == 124 and not any("no LLM RESPONSE" in n for n in first.notes)
    # "SYSTEM " lines of an empty line keep the blank line
    assert "\n\nDescribe code changes" in first.messages[0].content


def test_gemini_cli_session() -> None:
    reqs, ing = ingest(S / "gemini_cli_session_pomodoro_timer.json")
    assert {r.session for r in reqs} == {"0b23371a-ce2e-4b1c-81a0-44af5d94d9ce"}
    assert reqs[0].usage is None and "opaque_prefix_key" not in reqs[0].extra  # tokens all 0
    assert (reqs[1].usage.prompt_tokens, reqs[1].usage.cached_tokens) == (7269, 5811)
    assert [m.role for m in reqs[1].messages] == ["user", "assistant", "tool", "tool", "tool"]
    assert reqs[1].messages[1].tool_calls[0].name == "write_file"
    assert sum(1 for r in reqs if r.usage and r.usage.cached_tokens) == 12
    assert ing.summary.records == 19 and not ing.summary.skipped


def test_opencode_storage_folder() -> None:
    reqs, ing = ingest(F / "opencode_storage")
    assert [r.format for r in reqs] == ["opencode"] * 3 and ing.summary.records == 18
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens) for r in reqs] == [(10954, 0), (11136, 10950), (11174, 11130)]
    # step 2's prompt holds step 1's text + tool call and the tool result
    assert [m.role for m in reqs[1].messages] == ["user", "assistant", "tool"]
    assert reqs[1].messages[1].tool_calls[0].name == "read" and reqs[1].messages[1].content == "Reading the file first."
    assert [m.role for m in reqs[2].messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert not ing.summary.skipped


def test_vllm_log() -> None:
    reqs, ing = ingest(F / "vllm_enable_log_requests.log")
    assert [r.trace.input_length for r in reqs] == [103, 117, 105] and {r.trace.block_size for r in reqs} == {16}
    assert reqs[0].trace.hash_ids[:6] == reqs[1].trace.hash_ids[:6] and reqs[0].usage is None
    reasons = [s.reason for s in ing.summary.skipped]
    assert sum("sampling parameters" in r for r in reasons) == 2 and "2 line(s) are not request lines" in reasons[-1]


def test_vllm_params_without_details_is_a_note(tmp_path: Path) -> None:
    p = tmp_path / "server.log"
    p.write_text("INFO 06-01 10:00:09 [logger.py:72] Received request chatcmpl-x: params: SamplingParams(n=1), "
                 "lora_request: None.\n")
    reqs, ing = ingest(p)
    assert not reqs and any("not logged" in s.reason for s in ing.summary.skipped) and not ing.summary.bad


def test_sglang_log_usage_and_trace() -> None:
    reqs, _ = ingest(F / "sglang_log_requests.log")
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens) for r in reqs] == [(103, 0), (117, 103), (105, 103)]
    assert reqs[1].trace.block_size == 1 and reqs[1].trace.input_length == 117


def test_block_hashes_chain() -> None:
    a, b = block_hashes(list(range(40)), 16), block_hashes(list(range(32)) + [7] * 8, 16)
    assert len(a) == 3 and a[:2] == b[:2] and a[2] != b[2]
    assert block_hashes([1, 2], 16) != block_hashes([9, 1, 2], 16)[1:]


def test_otel_console_exporter_output(tmp_path: Path) -> None:
    """The SDK console exporter writes pretty-printed span documents one after another."""
    spans = [json.loads(line) for line in (OTEL / "otel_openllmetry_session_a.jsonl").read_text().splitlines()]
    p = tmp_path / "console.json"
    p.write_text("".join(json.dumps(s, indent=4) + "\n" for s in spans))
    reqs, ing = ingest(p)
    assert [r.usage.cached_tokens for r in reqs] == [c for _, c in SERVER] and ing.summary.records == 8
    assert {r.session for r in reqs} == {"newfmt-session-a"}
    p.write_text(p.read_text()[:-200])  # cut inside the last document: the first 7 are kept
    reqs, ing = ingest(p)
    assert len(reqs) == 7 and [s.record for s in ing.summary.bad] == [8]


def test_otel_legacy_message_events_join_their_span(tmp_path: Path) -> None:
    """Conventions ≤ v1.36: one log event per message, grouped by span id into the chat span's prompt."""
    def event(name: str, body: dict, span: str = "0x00000000000000aa") -> dict:
        return {"body": body, "attributes": {"gen_ai.system": "openai", "event.name": name},
                "timestamp": "2025-01-01T00:00:01Z", "trace_id": "0x01", "span_id": span}
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
    lines = [
        event("gen_ai.system.message", {"content": "be brief"}),
        event("gen_ai.user.message", {"content": "list files"}),
        event("gen_ai.assistant.message", {"tool_calls": [call]}),
        event("gen_ai.tool.message", {"content": "a.py", "id": "call_1"}),
        event("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"content": "a.py"}}),
        {"name": "chat gpt-4o", "context": {"trace_id": "0x01", "span_id": "0x00000000000000aa"},
         "start_time": "2025-01-01T00:00:00Z",
         "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 3}},
        event("gen_ai.user.message", {"content": "orphan"}, span="0x00000000000000bb"),
    ]
    p = tmp_path / "otel.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    reqs, ing = ingest(p)
    assert [r.format for r in reqs] == ["otel-genai"] * 2 and ing.summary.records == 7 and not ing.summary.skipped
    chat = next(r for r in reqs if r.model == "gpt-4o")
    assert [m.role for m in chat.messages] == ["system", "user", "assistant", "tool"]
    assert chat.messages[2].tool_calls[0].arguments == '{"path":"."}' and chat.messages[3].tool_call_id == "call_1"
    assert chat.usage.prompt_tokens == 50
    orphan = next(r for r in reqs if r is not chat)
    assert [m.content for m in orphan.messages] == ["orphan"] and orphan.usage is None
