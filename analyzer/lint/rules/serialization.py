"""PC3xx: the same content re-serialized differently (tool-call arguments, whitespace).

Both rules look at the part holding the first differing character and decide
whether the two versions are equal once decoded (JSON) or once whitespace is
ignored — the content is the same, only its bytes moved.
"""

from __future__ import annotations


from prefixcache.analyzer.model import Message
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, whitespace_only
from prefixcache.analyzer.ingest.jsonio import loads as json_loads


def _decode(text: str) -> object:
    try:
        return json_loads(text)
    except ValueError:
        return _INVALID


_INVALID = object()


def _keys(obj: object) -> list:
    if isinstance(obj, dict):
        return [(k, _keys(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [_keys(v) for v in obj]
    return []


def reserialized_call(new: Message, old: Message) -> tuple[int, str] | None:
    """(k, how) for the first tool call whose arguments text differs while the
    decoded JSON is equal; ``how`` names what changed (key order / spacing or
    escaping)."""
    if len(new.tool_calls) != len(old.tool_calls):
        return None
    for k, (a, b) in enumerate(zip(new.tool_calls, old.tool_calls)):
        if a.name != b.name or a.arguments == b.arguments:
            continue
        da, db = _decode(a.arguments), _decode(b.arguments)
        if da is _INVALID or db is _INVALID or da != db:
            continue
        return k, ("key order" if _keys(da) != _keys(db) else "spacing or escaping")
    return None


class ArgsSerialization(Rule):
    """Tool-call arguments of an earlier assistant turn were re-serialized.

    What it does:
        When the first difference lies in an earlier assistant message, compares
        its tool calls with the same message in the previous request: the
        ``arguments`` text differs but decodes to the same JSON (key order,
        spacing, unicode escaping or number formatting changed).
    Why it breaks caching:
        The model generated the arguments as one exact string, and the cache holds
        the KV of exactly those tokens. A client that parses the arguments into an
        object and dumps it again (another JSON library, sorted keys, no spaces)
        sends different tokens for the same call, so that turn and everything after
        it miss.
    Example:
        turn 3: "arguments": "{\\"path\\": \\"app/x.py\\", \\"start_line\\": 1}"
        turn 4: "arguments": "{\\"start_line\\":1,\\"path\\":\\"app/x.py\\"}"
    Use instead:
        Store and resend the arguments string exactly as the model produced it
        (keep the raw string next to the parsed object).
    Fix safety:
        Safe: the decoded arguments are identical.
    """

    code, name, group, severity = "PC301", "args-serialization", "serialization", "error"
    parts = frozenset({"message"})
    order = 30
    fix = "Resend tool-call arguments as the exact string the model generated; never re-dump the parsed object."

    def check(self, ctx: PairContext) -> Finding | None:
        new, old = ctx.r_msg(), ctx.s_msg()
        if new is None or old is None or new.role != old.role:
            return None
        found = reserialized_call(new, old)
        if found is None:
            return None
        k, how = found
        path = f"{new.path or f'messages[{ctx.div.ref}]'}.tool_calls[{k}].function.arguments"
        msg = f"arguments of tool call {new.tool_calls[k].name!r} re-serialized ({how}); same JSON value"
        return ctx.finding(self, msg, json_path=path)


class Whitespace(Rule):
    """Only whitespace or line endings changed in a part of the prefix.

    What it does:
        Compares the text of the part holding the first difference (system prompt,
        message content or tool description) in both requests: it differs, but is
        identical once all whitespace is removed (CRLF vs LF, trailing spaces,
        re-indentation, collapsed blank lines).
    Why it breaks caching:
        Whitespace is tokenized like any other text: a changed newline or trailing
        space changes the tokens from that point on and the rest of the prompt is
        re-prefilled, although nothing meaningful changed.
    Example:
        turn 2: "tools.\\n\\n## Rules\\n"
        turn 3: "tools.\\r\\n\\r\\n## Rules \\r\\n"
    Use instead:
        Normalize line endings and strip trailing whitespace once, when the prompt
        text is loaded, not per request; read prompt files in the same mode every time.
    Fix safety:
        Safe unless whitespace is semantic (code blocks, diff hunks): normalize line
        endings, not indentation, inside code.
    """

    code, name, group, severity = "PC302", "whitespace", "serialization", "warning"
    parts = frozenset({"system", "message", "tool"})
    order = 31
    fix = "Normalize line endings and trailing whitespace once at load time so every request sends the same bytes."

    def check(self, ctx: PairContext) -> Finding | None:
        div = ctx.div
        if div.kind == "tool":
            if not (0 <= div.ref < len(ctx.rq.tools) and div.ref < len(ctx.sq.tools)):
                return None
            a, b = ctx.rq.tools[div.ref].description, ctx.sq.tools[div.ref].description
        else:
            new, old = ctx.r_msg(), ctx.s_msg()
            if new is None or old is None or new.role != old.role:
                return None
            a, b = new.content, old.content
        if not whitespace_only(a, b):
            return None
        kinds = []
        if ("\r\n" in a) != ("\r\n" in b):
            kinds.append("line endings (CRLF/LF)")
        if any(ln != ln.rstrip() for ln in a.splitlines()) != any(ln != ln.rstrip() for ln in b.splitlines()):
            kinds.append("trailing spaces")
        what = ", ".join(kinds) or "spacing"
        return ctx.finding(self, f"whitespace-only change in {div.segment}: {what}")


RULES = [ArgsSerialization(), Whitespace()]
