"""canonicalize on every shared case: full reuse where the cause is fixable, reports otherwise,
and the meaning of each request preserved."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from prefixcache.analyzer.canonical.causes import canonicalize_explained
from prefixcache.analyzer.canonical.rewrite import (
    CanonicalOptions, SessionMemory, canonical_arguments, canonicalize, canonicalize_all, canonicalize_requests,
    sort_keys,
)
from prefixcache.analyzer.cache.simulate.reuse import reuse
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.volatile import find_volatile
from tests.helpers import CASES, existing

EXPECTED = json.loads((CASES / "expected.json").read_text()) if (CASES / "expected.json").exists() else {}
FIXABLE = {"volatile-timestamp", "volatile-id", "tool-order", "schema-key-order", "args-serialization", "whitespace"}
REPORTED = {"history-truncated": "PC403"}


def load(case: str):
    return list(Ingest([str(existing(CASES) / case)]))


def sessions(reqs) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, r in enumerate(reqs):
        out.setdefault(r.session, []).append(i)
    return out


def full_reuse(reqs, figures) -> bool:
    """Every request of a session reuses the whole previous prompt of that session."""
    for idx in sessions(reqs).values():
        for prev, cur in zip(idx, idx[1:]):
            if figures[cur].reusable_tokens < figures[prev].prompt_tokens:
                return False
    return True


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_case_reuse_restored_or_reported(case: str) -> None:
    exp = EXPECTED[case]
    reqs = load(case)
    assert len(reqs) == exp["requests"]
    results = canonicalize_explained(reqs)
    before, after = reuse(reqs), reuse([c.request for c in results])
    causes = {b["cause"] for b in exp["breaks"]}
    if exp.get("cross_session"):
        causes.add(exp["cross_session"]["cause"])
    reported = {(i, t.code) for i, c in enumerate(results) for t in c.transformations if not t.applied}
    if causes <= FIXABLE:
        assert full_reuse(reqs, after), [(a.reusable_tokens, a.prompt_tokens) for a in after]
        assert not reported, reported
        if exp["breaks"]:
            assert not full_reuse(reqs, before)  # the case really was broken
            assert sum(a.reusable_tokens for a in after) > sum(b.reusable_tokens for b in before)
    else:
        for brk in exp["breaks"]:
            assert (brk["request"], REPORTED[brk["cause"]]) in reported
        def frac(figs):
            return sum(f.reusable_tokens for f in figs) / sum(f.prompt_tokens for f in figs)
        assert frac(after) >= frac(before) - 0.01  # not made worse (the canonical prompt is a little shorter)


def test_cross_session_prefix_shared_after_moving_the_session_id() -> None:
    reqs = load("session_id_in_system.jsonl")
    assert len(sessions(reqs)) == 2
    canon = canonicalize_requests(reqs)
    before, after = reuse(reqs), reuse(canon)
    first_of_second = sessions(reqs)[reqs[3].session][0]
    # the system prompt and tools are now identical across sessions ...
    assert canon[0].messages[0].content == canon[first_of_second].messages[0].content
    assert [t.schema for t in canon[0].tools] == [t.schema for t in canon[first_of_second].tools]
    # ... so the second session's first request reuses them (it reused far less before)
    assert after[first_of_second].reusable_tokens > before[first_of_second].reusable_tokens + 300


def _without_moved(text: str, moved: list[str]) -> str:
    for line in moved:
        text = text.replace("\n\n" + line, "", 1)
    return text


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_meaning_preserved(case: str) -> None:
    """Decoded tool sets equal; message texts equal once the moved values are taken out."""
    reqs = load(case)
    for c in canonicalize_all(reqs):
        o, n = c.original, c.request
        def tools(r):
            return sorted((t.name, t.description.replace("\r\n", "\n"), json.dumps(sort_keys(t.parameters)))
                          for t in r.tools)
        assert tools(o) == tools(n)
        moved = [line for m in o.system_messages for line in m.content.replace("\r\n", "\n").splitlines()
                 if find_volatile(line)]
        assert len(o.messages) == len(n.messages)
        for a, b in zip(o.messages, n.messages):
            norm = "\n".join(x.rstrip(" \t") for x in a.content.replace("\r\n", "\n").split("\n"))
            if a.role == "system":
                norm = "\n".join(x for x in norm.split("\n") if x not in moved)
            assert _without_moved(b.content, moved) == norm or _without_moved(b.content, _all_moved(reqs)) == norm
            assert [json.loads(x.arguments) for x in a.tool_calls] == [json.loads(x.arguments) for x in b.tool_calls]
            assert (a.role, a.tool_call_id, a.reasoning) == (b.role, b.tool_call_id, b.reasoning)


def _all_moved(reqs) -> list[str]:
    return [line for r in reqs for m in r.system_messages for line in m.content.splitlines() if find_volatile(line)]


def test_moved_timestamp_stays_with_its_turn() -> None:
    """The value moved into request k's newest turn is still there when that turn is history."""
    reqs = load("timestamp_in_system.jsonl")
    canon = canonicalize_requests(reqs)
    assert not find_volatile(canon[2].messages[0].content)
    assert canon[0].messages[-1].content.endswith("\n\nCurrent time: 2026-03-02 10:31:02 UTC")
    assert canon[1].messages[1].content == canon[0].messages[1].content
    assert canon[1].messages[-1].content.endswith("Current time: 2026-03-02 10:31:40 UTC")
    assert canon[4].messages[: len(canon[3].messages)] == canon[3].messages[: len(canon[3].messages)] or all(
        replace(a, path="") == replace(b, path="") for a, b in zip(canon[3].messages, canon[4].messages))


def test_options_only_skip_and_strip() -> None:
    reqs = load("timestamp_in_system.jsonl")
    only = canonicalize_all(reqs, CanonicalOptions(only=frozenset({"PC201"}), normalize=True))
    assert {t.code for c in only for t in c.transformations if t.applied} == {"PC201"}
    assert only[0].request.messages[0].content == reqs[0].messages[0].content
    skipped = canonicalize_all(reqs, CanonicalOptions(skip=frozenset({"PC101"})))
    assert "2026-03-02 10:31:02" in skipped[0].request.messages[0].content
    stripped = canonicalize_requests(reqs, CanonicalOptions(strip_volatile=True))
    assert all(not find_volatile(m.content) for r in stripped for m in r.messages)
    assert stripped[0].messages[-1].content == reqs[0].messages[-1].content


def test_arguments_canonical_form() -> None:
    assert canonical_arguments('{"path": "a.py", "end_line": 40}') == '{"end_line":40,"path":"a.py"}'
    assert canonical_arguments('{"b": {"y": 1, "x": "é"}}') == '{"b":{"x":"é","y":1}}'
    assert canonical_arguments("not json") is None
    assert canonical_arguments('{"b": 1, "a": 2}', inferred=True) == '{"a": 2, "b": 1}'


def test_single_request_is_pure_and_trace_untouched(samples) -> None:
    reqs = load("tool_order_shuffle.jsonl")
    assert canonicalize(reqs[3]) == (reqs[3], [])  # a request alone has drifted from nothing
    norm = CanonicalOptions(normalize=True)
    a, log_a = canonicalize(reqs[3], norm)
    b, log_b = canonicalize(reqs[3], norm, memory=SessionMemory())
    assert a == b and log_a == log_b
    assert [t.name for t in a.tools] == sorted(t.name for t in reqs[3].tools)
    assert any(t.code == "PC201" and t.json_path == "tools" for t in log_a)
    trace = next(iter(Ingest([str(samples / "mooncake_kvtrace_synthetic_trace.jsonl")])))
    assert canonicalize(trace) == (trace, [])


def test_history_rewrite_reported_on_real_swe_agent(samples) -> None:
    """SWE-agent elides old observations from step 5 on (SOURCES.md): reported, not undone."""
    path = samples / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj"
    reqs = list(Ingest([str(path)]))
    results = canonicalize_explained(reqs)
    reported = [(i, t.code) for i, c in enumerate(results) for t in c.transformations if not t.applied]
    assert reported and all(code == "PC404" for _, code in reported)
    assert min(i for i, _ in reported) >= 5  # steps 0-4 grow append-only
    for c in results:
        for a, b in zip(c.original.messages, c.request.messages):
            assert "Old environment output" not in b.content or "Old environment output" in a.content


def _req(messages, index=0, session="s", fmt="openai-chat", tools=()):
    from prefixcache.analyzer.model import Provenance, Request
    return Request(session, index, fmt, Provenance("x.jsonl", index + 1), tuple(messages), tuple(tools))


def test_string_vs_one_text_block_is_not_a_history_rewrite() -> None:
    """Review 1 bug 7: what the model is told decides, not the logged form."""
    from prefixcache.analyzer.model import Message
    a = [Message("user", "fix the bug", path="messages[0]"), Message("assistant", "done", path="messages[1]")]
    b = [Message("user", "fix the bug", text_blocks=("fix the bug",), path="messages[0]"),
         Message("assistant", "done", path="messages[1]", cache_control="5m"), Message("user", "thanks")]
    results = canonicalize_all([_req(a), _req(b, 1)])
    assert [t for c in results for t in c.transformations] == []
    edited = [replace(b[0], content="fix the bugs", text_blocks=("fix the bugs",)), *b[1:]]
    log = canonicalize_explained([_req(a), _req(edited, 1)])[1].transformations
    assert [(t.code, t.json_path) for t in log] == [("PC404", "messages[0].content")]
    two_blocks = [replace(b[0], text_blocks=("fix", "the bug"), content="fix\nthe bug"), *b[1:]]
    # a space that became a line break: lint's own call (issue 24: one vocabulary), reported, not rewritten
    log = canonicalize_explained([_req(a), _req(two_blocks, 1)])[1].transformations
    assert [(t.code, t.applied) for t in log] == [("PC302", False)]


def test_anthropic_system_block_path_is_text() -> None:
    from prefixcache.analyzer.model import Message
    msgs = [Message("system", "You are Claude.\nCurrent time: 2026-03-02 10:31:02 UTC", path="system[0]"),
            Message("user", "hi", path="messages[0]")]
    log = canonicalize(_req(msgs, fmt="anthropic-messages"))[1]
    assert [(t.code, t.json_path) for t in log] == [("PC101", "system[0].text")]
    drift = [replace(msgs[0], content="You are Claude.\r\n"), msgs[1]]
    first = [replace(msgs[0], content="You are Claude.\n"), msgs[1]]
    res = canonicalize_all([_req(first, 0, "a", "anthropic-messages"), _req(drift, 0, "b", "anthropic-messages")])
    assert [(t.code, t.json_path) for t in res[1].transformations] == [("PC302", "system[0].text")]
    assert res[1].request.messages[0].content == "You are Claude.\n"  # the form first sent (other session)


def test_whitespace_that_is_content_is_never_touched() -> None:
    """Indentation, blank lines in code, trailing spaces in a diff, CRLF in a tool output: kept."""
    from prefixcache.analyzer.model import Message, ToolCall
    patch = "--- a/x.py\r\n+++ b/x.py\r\n@@ -1,2 +1,2 @@\r\n-def f():  \r\n+def f():\r\n \r\n     return 1\t\r\n"
    code = "```python\ndef f():\n\n    return 1   \n```\n\n"
    msgs = [Message("system", "You are a coding agent.  \n\n"),
            Message("user", code),
            Message("assistant", "", tool_calls=(ToolCall("c1", "diff", "{}"),)),
            Message("tool", patch, tool_call_id="c1")]
    reqs = [_req(msgs[:2]), _req(msgs, 1)]
    results = canonicalize_all(reqs)
    assert not [t for c in results for t in c.transformations if t.code == "PC302"]
    assert results[1].request.messages == reqs[1].messages


def test_whitespace_drift_restores_the_first_form() -> None:
    reqs = load("whitespace_drift.jsonl")
    results = canonicalize_all(reqs)
    fixed = [(i, t.json_path) for i, c in enumerate(results) for t in c.transformations if t.code == "PC302"]
    assert fixed == [(2, "messages[0].content"), (3, "messages[0].content")]
    assert "\r" in reqs[2].messages[0].content
    assert results[2].request.messages[0] == reqs[0].messages[0]
    assert all([m.content for m in c.request.messages[1:]] == [m.content for m in c.original.messages[1:]]
               for c in results)


def test_drift_restored_inside_its_block_keeps_parts() -> None:
    from prefixcache.analyzer.model import ContentPart, Message
    first = Message("user", "look at this\nand this", text_blocks=("look at this", "and this"),
                    parts=(ContentPart("image_url", "d1"),), path="messages[0]")
    drifted = replace(first, content="look at this  \r\nand this", text_blocks=("look at this  \r", "and this"))
    res = canonicalize_all([_req([first]), _req([drifted], 1)])
    m = res[1].request.messages[0]
    assert (m.content, m.text_blocks, m.parts) == (first.content, first.text_blocks, first.parts)
    assert [t.code for t in res[1].transformations] == ["PC302"]
