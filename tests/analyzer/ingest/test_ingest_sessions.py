"""Session grouping rules (analyzer/ingest/sessions.py), one test per rule and per hard case."""

from __future__ import annotations

from prefixcache.analyzer.model import Message, Provenance, Request, ToolCall
from prefixcache.analyzer.identity import chaining_key
from prefixcache.analyzer.ingest.sessions import SessionGrouper, routing_key


def _req(*contents: str, system: str = "sys", source: str = "logs/run.jsonl", session: str = "", extra=None,
         record: int = 1) -> Request:
    roles = ["user", "assistant"]
    msgs = [Message("system", system)] + [Message(roles[i % 2], c) for i, c in enumerate(contents)]
    return Request(session, 0, "openai-chat", Provenance(source, record), tuple(msgs), extra=extra or {})


def _assign(reqs: list[Request], scope: str | None = None) -> list[tuple[str, int]]:
    g = SessionGrouper()
    return [(r.session, r.index) for r in (g.assign(q, scope) for q in reqs)]


def test_append_only_chain_ignores_system_drift() -> None:
    out = _assign([_req("u1", system="t=1"), _req("u1", "a1", "u2", system="t=2"), _req("u1", "a1", "u2", "a2", "u3")])
    assert out == [("run#1", 0), ("run#1", 1), ("run#1", 2)]


def test_two_conversations_interleaved() -> None:
    out = _assign([_req("fix bug"), _req("write docs"), _req("fix bug", "ok", "more"), _req("write docs", "ok", "more")])
    assert out == [("run#1", 0), ("run#2", 0), ("run#1", 1), ("run#2", 1)]


def test_edited_middle_message_still_joins() -> None:
    """A re-serialized tool call or edited turn keeps the shared leading run (≥ 1 message)."""
    out = _assign([_req("u1", "a1", "u2"), _req("u1", "a1-edited", "u2", "a2", "u3")])
    assert out == [("run#1", 0), ("run#1", 1)]


def test_sliding_window_continuation() -> None:
    first = _req("u1", "a1", "u2", "a2", "u3")
    window = _req("u2", "a2", "u3", "a3", "u4")  # the two oldest messages dropped
    g = SessionGrouper()
    g.assign(first)
    r = g.assign(window)
    assert (r.session, r.index) == ("run#1", 1)
    assert r.notes[-1] == "session: continues run#1 (sliding window, drops 2 leading messages)"


def test_strict_prefix_is_a_new_run() -> None:
    out = _assign([_req("task", "a1", "u2"), _req("task")])
    assert out == [("run#1", 0), ("run#2", 0)]


def test_identical_resend_joins() -> None:
    assert _assign([_req("task", "a1", "u2"), _req("task", "a1", "u2")]) == [("run#1", 0), ("run#1", 1)]


def test_best_match_wins_over_weaker_prefix() -> None:
    out = _assign([_req("task", "x1", "u2"), _req("task", "y1", "u2"), _req("task", "y1", "u2", "y2", "u3")])
    assert out == [("run#1", 0), ("run#1", 1), ("run#1", 2)]
    # second request shares one message with run#1's latest: same run; third extends it
    out = _assign([_req("task", "a", "b"), _req("other"), _req("other", "a", "b")])
    assert out == [("run#1", 0), ("run#2", 0), ("run#2", 1)]


def test_explicit_session_wins() -> None:
    out = _assign([_req("u1", session="sess-A"), _req("u1", "a1", "u2", session="sess-B"), _req("u1", session="sess-A")])
    assert out == [("sess-A", 0), ("sess-B", 0), ("sess-A", 1)]


def test_routing_keys_in_priority_order() -> None:
    assert routing_key({"prompt_cache_key": "k", "user": "u"}) == ("prompt_cache_key", "k")
    assert routing_key({"user": "u", "metadata": {"user_id": "m"}}) == ("user", "u")
    assert routing_key({"metadata": {"user_id": "m"}}) == ("metadata.user_id", "m")
    assert routing_key({"user": ""}) is None and routing_key({}) is None
    reqs = [_req("same", extra={"prompt_cache_key": "A"}), _req("same", extra={"prompt_cache_key": "B"}),
            _req("same", "a", "b", extra={"prompt_cache_key": "A"})]
    assert _assign(reqs) == [("run#1", 0), ("run#2", 0), ("run#1", 1)]


def test_scope_is_the_file_unless_given() -> None:
    a, b = _req("u1", source="x/a.jsonl"), _req("u1", "a1", "u2", source="x/b.jsonl")
    assert _assign([a, b]) == [("a#1", 0), ("b#1", 0)]
    assert _assign([a, b], scope="x") == [("a#1", 0), ("a#1", 1)]


def test_requests_without_messages_group_per_file() -> None:
    empty = [Request("", 0, "openhands-trajectory", Provenance(f, 1)) for f in ("t/one.json", "t/one.json", "t/two.json")]
    assert _assign(empty) == [("one#1", 0), ("one#1", 1), ("two#1", 0)]


def test_stdin_stem_and_session_count() -> None:
    g = SessionGrouper()
    r = g.assign(_req("u", source="-"))
    assert r.session == "stdin#1" and g.sessions == 1


def test_chaining_key_loose_on_whitespace_and_arguments_strict_on_ids() -> None:
    call = ToolCall("call_1", "read", '{"a": 1}')
    base = chaining_key(Message("assistant", "ok  done", tool_calls=(call,)))
    assert base == chaining_key(Message("assistant", "ok done\n", tool_calls=(ToolCall("call_1", "read", '{"a":1}'),),
                                       cache_control="5m", path="messages[9]"))
    assert base != chaining_key(Message("assistant", "ok done", tool_calls=(ToolCall("call_2", "read", '{"a": 1}'),)))
    assert base != chaining_key(Message("user", "ok done"))
