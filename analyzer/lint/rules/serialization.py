"""PC3xx: the same content re-serialized differently (tool-call arguments, whitespace).

Both rules look at the part holding the first differing character and decide
whether the two versions are equal once decoded (JSON) or once whitespace is
ignored — the content is the same, only its bytes moved.
"""

from __future__ import annotations

import re
import unicodedata

import orjson

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


def part_texts(ctx: PairContext) -> tuple[str, str] | None:
    """(this request's, the earlier request's) text of the part holding the divergence: a
    tool's description, or a message of the same role; None for any other part."""
    div = ctx.div
    if div.kind == "tool":
        if not (0 <= div.ref < len(ctx.rq.tools) and div.ref < len(ctx.sq.tools)):
            return None
        return ctx.rq.tools[div.ref].description, ctx.sq.tools[div.ref].description
    new, old = ctx.r_msg(), ctx.s_msg()
    if new is None or old is None or new.role != old.role:
        return None
    return new.content, old.content


#: A JSON object written inside a text (one level of nesting; enough for inline configs).
_INLINE_JSON = re.compile(r"\{(?:[^{}]|\{[^{}]*\})*\}")


def _json_objects(text: str) -> list[tuple[int, int, object]]:
    """(start, end, value) of every JSON object inside ``text`` that decodes."""
    out = []
    for m in _INLINE_JSON.finditer(text):
        value = _decode(m.group())
        if isinstance(value, dict) and value:
            out.append((m.start(), m.end(), value))
    return out


def sorted_json_text(text: str, objs: list[tuple[int, int, object]] | None = None) -> str:
    """``text`` with every JSON object inside it written with sorted keys (compact)."""
    for start, end, value in reversed(_json_objects(text) if objs is None else objs):
        text = text[:start] + orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() + text[end:]
    return text


def json_key_order(new: str, old: str) -> str | None:
    """The keys of the first JSON object inside a text whose key order alone changed (the
    texts equal once each such object is replaced by its sorted form), or None."""
    a, b = _json_objects(new), _json_objects(old)
    if not a or len(a) != len(b) or sorted_json_text(new, a) != sorted_json_text(old, b):
        return None
    for (_, _, va), (_, _, vb) in zip(a, b):
        if _keys(va) != _keys(vb):
            return ", ".join(map(str, va))
    return None


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
        texts = part_texts(ctx)
        if texts is None or not whitespace_only(*texts):
            return None
        a, b = texts
        kinds = []
        if ("\r\n" in a) != ("\r\n" in b):
            kinds.append("line endings (CRLF/LF)")
        if any(ln != ln.rstrip() for ln in a.splitlines()) != any(ln != ln.rstrip() for ln in b.splitlines()):
            kinds.append("trailing spaces")
        what = ", ".join(kinds) or "spacing"
        return ctx.finding(self, f"whitespace-only change in {div.segment}: {what}")


class UnicodeNormalization(Rule):
    """The same text was sent in another Unicode normalization form (NFC vs NFD).

    What it does:
        When the part holding the first difference (a message, the system prompt or a
        tool description) is the same text in both requests once normalized to NFC,
        reports the drift: composed characters (``é``, U+00E9) in one request,
        decomposed ones (``e`` + U+0301) in the other.
    Why it breaks caching:
        The two forms look identical but are different code points, so they tokenize
        to different ids: everything after the first such character misses.
        Typical source: text read from macOS file names or pasted from another app.
    Example:
        turn 1: "Résumé rules" (NFC); turn 2: "Résumé rules" (NFD).
    Use instead:
        Normalize prompt text once to NFC when it is loaded (``unicodedata.normalize``).
    Fix safety:
        Safe: the text reads the same; ``canonicalize`` restores the form first sent.
    """

    code, name, group, severity = "PC303", "unicode-normalization", "serialization", "warning"
    parts = frozenset({"system", "message", "tool"})
    order = 32
    fix = "Normalize prompt text to NFC once when it is loaded, so every request sends the same code points."

    def check(self, ctx: PairContext) -> Finding | None:
        texts = part_texts(ctx)
        if texts is None or texts[0] == texts[1]:
            return None
        a, b = texts
        if unicodedata.normalize("NFC", a) != unicodedata.normalize("NFC", b):
            return None
        form = "NFD" if unicodedata.is_normalized("NFD", a) and not unicodedata.is_normalized("NFC", a) else "NFC"
        return ctx.finding(self, f"{ctx.div.segment} is the same text in another Unicode normalization form "
                           f"(now {form})")


class JsonKeyOrderInText(Rule):
    """A JSON object written inside a message or the system prompt came back with its keys reordered.

    What it does:
        When the part holding the first difference is the same text once every JSON
        object inside it is written with sorted keys, and one object's keys are in
        another order, reports it (tool schemas are PC203, tool-call arguments PC301).
    Why it breaks caching:
        The client builds the text from a map (a dict dumped per request, a Go map):
        the same value serializes in another order, so the tokens from that object on
        differ.
    Example:
        turn 1: 'config {"alpha": 1, "beta": 2}'; turn 2: 'config {"beta": 2, "alpha": 1}'.
    Use instead:
        Serialize with sorted keys (``json.dumps(..., sort_keys=True)``) or from an
        ordered structure, once.
    Fix safety:
        Safe: the value is the same; ``canonicalize`` restores the form first sent.
    """

    code, name, group, severity = "PC304", "json-key-order-in-text", "serialization", "warning"
    parts = frozenset({"system", "message"})
    order = 33
    fix = "Serialize JSON written into prompt text with sorted keys (or from an ordered structure)."

    def check(self, ctx: PairContext) -> Finding | None:
        texts = part_texts(ctx)
        if texts is None or texts[0] == texts[1]:
            return None
        keys = json_key_order(*texts)
        if keys is None:
            return None
        return ctx.finding(self, f"a JSON object in {ctx.div.segment} has the same value with its keys in another "
                           f"order (now {keys})")


RULES = [ArgsSerialization(), Whitespace(), UnicodeNormalization(), JsonKeyOrderInText()]
