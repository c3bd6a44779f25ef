"""Ingest end to end: input expansion, detection, the registry, cases and samples accounting."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest import Ingest, IngestSummary, formats
from prefixcache.analyzer.ingest.detect import reader_modules, registry
from tests.helpers import CASES, ROOT, existing

FIXTURES = ROOT / "tests" / "fixtures" / "ingest"

#: The format names agreed in notes/apis.md, every one of which must be registered.
AGREED = {"openai-chat", "openai-responses", "anthropic-messages", "litellm", "openhands-trajectory",
          "openhands-completions", "codex", "claude-code", "swe-agent", "mini-swe-agent", "mooncake", "bailian",
          "kvcache-tester",
          # the formats users bring (issue 15)
          "otel-genai", "openinference", "aider", "gemini-cli", "cline-task", "opencode", "vllm-log", "sglang-log",
          # ShareGPT datasets and plain prompt files (issue 22)
          "sharegpt", "prompt-text"}

#: What each real sample must be detected as (SOURCES.md).
SAMPLE_FORMATS = {
    "claude_code_session_v1.0.98_fe5e1c67.jsonl": "claude-code",
    "codex_rollout_synthetic_fixture_claude-code-log.jsonl": "codex",
    "kvcache_tester_claudecode_hashids64_trace_0001.json": "kvcache-tester",
    "mini_swe_agent_legacy_list_github_issue.traj.json": "mini-swe-agent",
    "mini_swe_agent_v1.1_deepseek_reasoner_pvlib-1606.traj.json": "mini-swe-agent",
    "mooncake_kvtrace_synthetic_trace.jsonl": "mooncake",
    "openhands_trajectory_events_basic_gui_mode.json": "openhands-trajectory",
    "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj": "swe-agent",
}


def _expected() -> dict:
    return json.loads((existing(CASES) / "expected.json").read_text())


def test_registry_holds_every_agreed_format() -> None:
    assert set(formats()) == AGREED
    modules = {type(r).__module__ for r in registry().values()}
    assert len(modules) == 18 and len(registry()) == 23 and modules <= set(reader_modules())


@pytest.mark.parametrize("name", sorted(json.loads((CASES / "expected.json").read_text())) if CASES.exists() else [])
def test_case_file_requests_sessions_format(name: str) -> None:
    exp = _expected()[name]
    reqs = list(ing := Ingest([str(CASES / name)]))
    assert len(reqs) == exp["requests"]
    assert {r.format for r in reqs} == {exp["format"]}
    sessions = Counter(r.session for r in reqs)
    assert len(sessions) == exp.get("sessions", 1)
    if name == "session_id_in_system.jsonl":
        assert sorted(sessions.values()) == [3, 3]
    for sid in sessions:  # indexes run 0..n-1 in file order within each session
        assert [r.index for r in reqs if r.session == sid] == list(range(sessions[sid]))
    assert [r.provenance.record for r in reqs] == list(range(1, exp["requests"] + 1))
    s = ing.summary
    assert (s.files, s.records, s.requests, s.sessions, s.skipped) == (1, exp["requests"], exp["requests"],
                                                                      len(sessions), ())


def test_whole_cases_dir_keeps_one_session_per_file() -> None:
    """Separate files are separate conversations, even though the cases share their messages."""
    exp = _expected()
    ing = Ingest([str(existing(CASES))])
    by_file: dict[str, set[str]] = {}
    for r in ing:
        by_file.setdefault(Path(r.provenance.source).name, set()).add(r.session)
    assert {k: len(v) for k, v in by_file.items()} == {k: v.get("sessions", 1) for k, v in exp.items()}
    s = ing.summary
    assert s.files == 10 and s.requests == sum(v["requests"] for v in exp.values())
    # in a directory walk, files that are not logs are notes naming them (record 0), not errors
    assert [(Path(k.source).name, k.record, k.bad) for k in s.skipped] == [
        ("README.md", 0, False), ("expected.json", 0, False)]
    assert "not a log file (suffix .md)" in s.skipped[0].reason and "unknown format" in s.skipped[1].reason


@pytest.mark.parametrize("name", sorted(SAMPLE_FORMATS))
def test_sample_detection(samples, name: str) -> None:
    ing = Ingest([str(samples / name)])
    first = next(iter(ing))
    assert first.format == SAMPLE_FORMATS[name]


def test_samples_dir_skips_non_logs(samples) -> None:
    ing = Ingest([str(samples)])
    assert len(ing.sources) == 8  # SOURCES.md is not a log file: a skipped note, never opened
    assert not any(s.name.endswith(".md") for s in ing.sources)
    assert [Path(s.source).name for s in ing.passed_over] == ["SOURCES.md"]


def test_openhands_sample_usage_only(samples) -> None:
    """SOURCES.md: 4 distinct LLM calls with cache usage; numbers read from the file."""
    ing = Ingest([str(samples / "openhands_trajectory_events_basic_gui_mode.json")])
    reqs = list(ing)
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens, r.usage.cache_write_tokens, r.usage.output_tokens)
            for r in reqs] == [(3439, 0, 3435, 104), (3601, 3435, 160, 1142), (4769, 3595, 1168, 693),
                               (5488, 4763, 719, 85)]
    assert all(r.messages == () and "messages" not in r.observed and "usage" in r.observed for r in reqs)
    assert {r.model for r in reqs} == {"claude-3-5-sonnet-20241022"}
    assert [r.timestamp for r in reqs] == [1737433775.0, 1737433788.0, 1737433796.0, 1737433799.0]
    assert [r.provenance.record for r in reqs] == [8, 10, 12, 14]
    assert reqs[0].extra["response_id"] == "chatcmpl-6bb9f175-c587-44b4-8c8d-f91fc4827590"
    assert len({r.session for r in reqs}) == 1 and [r.index for r in reqs] == [0, 1, 2, 3]
    s = ing.summary
    # 18 events: 4 calls, 4 later events of those calls, 9 user/environment events and observations,
    # and the agent's final "message" action, whose LLM call left no usage (a note)
    assert (s.records, s.requests) == (18, 4)
    assert [(k.record, k.field, k.bad) for k in s.skipped] == [(16, "tool_call_metadata", False)]
    assert s.skipped[0].reason.startswith("agent action 'message' has no tool_call_metadata")


def test_stdin_is_read_once_and_named_dash() -> None:
    data = (CASES / "clean_append_only.jsonl").read_bytes() if CASES.exists() else b""
    stream = io.BytesIO(data)
    ing = Ingest(["-"], stdin=stream)
    first = [r.session for r in ing]
    second = [r.session for r in ing]  # a second pass re-reads the buffered bytes
    assert first == second == ["stdin#1"] * 6
    assert next(iter(ing)).provenance.source == "-"


def test_glob_and_directory_and_dedup(cases) -> None:
    ing = Ingest([str(cases / "clean_*.jsonl"), str(cases / "clean_append_only.jsonl"), str(FIXTURES)])
    names = [Path(s.name).name for s in ing.sources]
    assert names[0] == "clean_append_only.jsonl" and names.count("clean_append_only.jsonl") == 1
    assert "anthropic__claude-3-5-sonnet-20241022-1737433788.456.json" in names  # recursive


def test_nonexistent_path_and_empty_glob_raise(tmp_path) -> None:
    with pytest.raises(InputError, match="no such file"):
        Ingest([str(tmp_path / "missing.jsonl")])
    with pytest.raises(InputError, match="glob matches no file"):
        Ingest([str(tmp_path / "*.jsonl")])
    with pytest.raises(InputError, match="no log files"):
        Ingest([str(tmp_path)])


def test_forced_format() -> None:
    with pytest.raises(ConfigError, match="unknown format 'nope'"):
        Ingest([str(FIXTURES / "chat_pairs.json")], format="nope")
    reqs = list(Ingest([str(FIXTURES / "anthropic_pair.json")], format="openai-chat"))
    assert reqs[0].format == "openai-chat"


def test_summary_without_iterating() -> None:
    s = Ingest([str(FIXTURES)]).summary
    assert isinstance(s, IngestSummary)
    assert (s.files, s.records, s.requests, s.sessions) == (7, 19, 12, 6)
    assert [(Path(k.source).name, k.record, k.field, k.bad) for k in s.skipped] == [
        ("litellm_payloads.jsonl", 3, "call_type", False), ("ui_messages.json", 8, "[7].text", False)]


_BIG = "x" * 100_000  # a first record longer than the 64 KiB detection head


@pytest.mark.parametrize("name, record, fmt", [
    ("chat.jsonl", {"model": "gpt-4o", "messages": [{"role": "system", "content": _BIG}, {"role": "user", "content": "hi"}]},
     "openai-chat"),
    ("msgs.jsonl", {"model": "claude-sonnet-4-5", "max_tokens": 9, "system": [{"type": "text", "text": _BIG}],
                    "messages": [{"role": "user", "content": "hi"}]}, "anthropic-messages"),
    ("resp.jsonl", {"model": "gpt-5", "instructions": _BIG, "input": "hi"}, "openai-responses"),
    ("ll.jsonl", {"id": "1", "call_type": "completion", "model_group": "g", "model": "gpt-4o",
                  "messages": [{"role": "user", "content": _BIG}], "model_parameters": {}}, "litellm"),
    ("completions/gpt-4o-1737433775.123.json", {"messages": [{"role": "user", "content": _BIG}], "response": {},
                                                "kwargs": {}, "timestamp": 1737433775.123}, "openhands-completions"),
])
def test_detection_when_first_record_exceeds_head(tmp_path, name, record, fmt) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2 if name.endswith(".json") else None) + "\n")
    (r,) = list(ing := Ingest([str(path)]))
    assert r.format == fmt and ing.summary.skipped == ()
    assert _BIG in "".join(m.content for m in r.messages)


def test_registration_refuses_a_shared_priority(monkeypatch) -> None:
    """The tie-break order is explicit: two readers with one priority are refused, not ordered by chance."""
    from prefixcache.analyzer.errors import ConfigError
    from prefixcache.analyzer.ingest import detect

    registry()  # every module imported and registered
    monkeypatch.setattr(detect, "_registered", dict(detect._registered))

    @detect.reader(priority=10)  # openhands-trajectory's
    class Twin:
        format = "twin"

    registry.cache_clear()
    try:
        with pytest.raises(ConfigError, match="share priority 10"):
            registry()
    finally:
        monkeypatch.undo()
        registry.cache_clear()
    assert "twin" not in registry()
