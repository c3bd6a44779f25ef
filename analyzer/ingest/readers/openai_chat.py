"""OpenAI Chat Completions request bodies (``POST /v1/chat/completions``).

Accepted layouts (see :func:`~.jsonio.iter_records`): JSONL with one body per
line, one JSON body, or a JSON list of bodies; each record is either a body
``{model, messages, tools, ...}`` or a request/response pair
``{"request": body, "response": {..., "usage": ...}}`` (usage and ``created``
come from the response). Field reference: OpenAI API reference "Create chat
completion"; DeepSeek adds ``reasoning_content`` and ``prompt_cache_*`` usage.

The message and tool converters here are shared by the LiteLLM and OpenHands
readers, which log the same OpenAI shapes.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import orjson

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, ToolCall, ToolDef
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import head_fields, is_array, reader
from prefixcache.analyzer.ingest.diagnostics import verdict
from prefixcache.analyzer.ingest.jsonio import FieldError, decode_error, expect, field, parse_time, parse_usage, read_records
from prefixcache.analyzer.ingest.jsonio import JSONDepthError, loads as json_loads
from prefixcache.analyzer.ingest.images import content_part

FORMAT = "openai-chat"

#: Body fields kept in ``Request.extra`` (routing / cache keys and prompt-shaping options).
EXTRA_KEYS = ("prompt_cache_key", "cache_salt", "user", "metadata", "safety_identifier",
              "prompt_cache_retention", "tool_choice", "parallel_tool_calls", "reasoning_effort",
              "response_format", "service_tier", "session_id", "prompt_cache_options")

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_TEXT_PARTS = {"text", "input_text", "output_text"}


def ttl(cc: Any, path: str) -> str | None:
    """Anthropic-style ``cache_control`` → its TTL (``"5m"`` default, or ``"1h"``); None if absent."""
    if cc is None:
        return None
    expect(cc, dict, path)
    return str(field(cc, "ttl", str, path, default="5m"))


def breakpoint_ttl(bp: Any, path: str) -> str | None:
    """OpenAI GPT-5.6+ ``prompt_cache_breakpoint`` (``true`` or ``{mode, ttl}``) → its TTL
    (``"30m"`` default, the request's ``prompt_cache_options.ttl`` otherwise unknown here); None if absent."""
    if bp is None or bp is False:
        return None
    if bp is True:
        return "30m"
    expect(bp, dict, path)
    return str(field(bp, "ttl", str, path, default="30m"))


def content_of(value: Any, path: str) -> tuple[str, tuple[str, ...] | None, tuple[ContentPart, ...], str | None]:
    """OpenAI message content → (text, text_blocks, parts, cache_control TTL).

    A string stays as is (``text_blocks`` None); a list of parts joins its text
    parts with ``"\\n"`` and keeps them in ``text_blocks``; other parts (images,
    audio, files) become :class:`ContentPart` (images by content: :func:`~.images.content_part`).
    """
    if value is None:
        return "", None, (), None
    if isinstance(value, str):
        return value, None, (), None
    expect(value, (str, list), path)
    texts: list[str] = []
    parts: list[ContentPart] = []
    cache: str | None = None
    for i, part in enumerate(value):
        where = f"{path}[{i}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        expect(part, dict, where)
        kind = field(part, "type", str, where, default="text")
        cache = ttl(part.get("cache_control"), f"{where}.cache_control") or cache
        cache = breakpoint_ttl(part.get("prompt_cache_breakpoint"), f"{where}.prompt_cache_breakpoint") or cache
        if kind in _TEXT_PARTS or kind == "refusal":
            texts.append(field(part, "text" if kind != "refusal" else "refusal", str, where, required=True))
        else:
            parts.append(content_part(kind, part))
    return "\n".join(texts), tuple(texts), tuple(parts), cache


def arguments_of(value: Any, path: str) -> tuple[str, bool]:
    """Raw tool-call arguments: the logged string, or an object serialized (``json.dumps``) and flagged."""
    if isinstance(value, str):
        return value, False
    if value is None:
        return "", False
    expect(value, (str, dict, list), path)
    return json.dumps(value), True


def tool_calls_of(msg: dict, path: str) -> tuple[ToolCall, ...]:
    """``tool_calls`` (and legacy ``function_call``) of an assistant message."""
    out: list[ToolCall] = []
    for j, tc in enumerate(field(msg, "tool_calls", list, path, default=[])):
        where = f"{path}.tool_calls[{j}]"
        expect(tc, dict, where)
        fn = field(tc, "function", dict, where, default={})
        args, inferred = arguments_of(fn.get("arguments"), f"{where}.function.arguments")
        out.append(ToolCall(field(tc, "id", str, where, default=""),
                            field(fn, "name", str, f"{where}.function", required=True),
                            args, inferred, field(tc, "type", str, where, default="function")))
    fc = field(msg, "function_call", dict, path)
    if fc is not None:
        args, inferred = arguments_of(fc.get("arguments"), f"{path}.function_call.arguments")
        out.append(ToolCall("", field(fc, "name", str, f"{path}.function_call", required=True), args, inferred))
    return tuple(out)


def message_of(msg: Any, path: str) -> Message:
    """One OpenAI chat message → :class:`Message` (legacy ``function`` role → ``tool``)."""
    expect(msg, dict, path)
    role = field(msg, "role", str, path, required=True)
    if role not in _ROLES:
        raise FieldError(f"{path}.role", f"unknown role {role!r}")
    text, blocks, parts, cache = content_of(msg.get("content"), f"{path}.content")
    reasoning = field(msg, "reasoning_content", str, path) or field(msg, "reasoning", str, path)
    return Message(
        role="tool" if role == "function" else role, content=text, text_blocks=blocks,
        tool_calls=tool_calls_of(msg, path) if role == "assistant" else (),
        tool_call_id=field(msg, "tool_call_id", str, path), name=field(msg, "name", str, path),
        reasoning=reasoning, parts=parts, cache_control=ttl(msg.get("cache_control"), f"{path}.cache_control") or cache
        or breakpoint_ttl(msg.get("prompt_cache_breakpoint"), f"{path}.prompt_cache_breakpoint"),
        path=path)


def messages_of(value: Any, path: str = "messages") -> tuple[Message, ...]:
    """A ``messages`` list → messages (paths ``messages[i]``)."""
    expect(value, list, path)
    return tuple(message_of(m, f"{path}[{i}]") for i, m in enumerate(value))


def tool_of(tool: Any, path: str) -> ToolDef:
    """One tool schema: nested ``{type:function, function:{...}}``, flat/legacy ``{name, parameters}``,
    or a built-in (``{type: "web_search"}``: named by its type)."""
    expect(tool, dict, path)
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = field(fn, "name", str, path) or field(tool, "type", str, path, required=True)
    params = field(fn, "parameters", dict, path, default={})
    return ToolDef(name, field(fn, "description", str, path, default=""), params, tool,
                   ttl(tool.get("cache_control"), f"{path}.cache_control"), path)


def tools_of(body: dict) -> tuple[ToolDef, ...]:
    """``tools`` (or legacy ``functions``) of a body."""
    key = "tools" if body.get("tools") is not None else "functions"
    return tuple(tool_of(t, f"{key}[{i}]") for i, t in enumerate(field(body, key, list, default=[])))


def _decoded(record: dict, key: str) -> Any:
    """``record[key]``, decoded when a proxy stored the body as JSON text."""
    value = record.get(key)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json_loads(value)
        except JSONDepthError as e:
            raise FieldError(f"{key}.{e.field}".rstrip("."), f"body text: {e.reason}") from None
        except orjson.JSONDecodeError as e:
            raise FieldError(key, f"body text is not JSON: {decode_error(e)}") from None
    return value


def unwrap(record: Any) -> tuple[dict, dict | None]:
    """(request body, response or None) of a body or a ``{request, response}`` pair.

    Pair members may be objects or JSON text (as proxies store bodies).
    """
    expect(record, dict, "")
    if "request" in record and "messages" not in record and "input" not in record:
        body = expect(_decoded(record, "request"), dict, "request")
        return body, expect(_decoded(record, "response"), (dict, type(None)), "response")
    return record, field(record, "response", dict)


def sniff_body(obj: dict[str, Any]) -> dict[str, Any]:
    """The request body of a sniffed record (the pair's ``request``, decoded if text), else the record."""
    if "request" in obj and "messages" not in obj and "input" not in obj:
        try:
            body = _decoded(obj, "request")
        except FieldError:
            return obj
        return body if isinstance(body, dict) else obj
    return obj


def common(body: dict, response: dict | None, record: dict) -> dict[str, Any]:
    """Model, timestamp, usage, extra and observed parts shared by the body formats."""
    resp = response or {}
    usage = parse_usage(resp.get("usage"), "response.usage") if response else None
    if usage is None and record.get("usage") is not None:
        usage = parse_usage(record["usage"], "usage")
    ts = None
    for obj, key, where in ((record, "timestamp", "timestamp"), (body, "timestamp", "timestamp"),
                            (resp, "created", "response.created"), (resp, "created_at", "response.created_at")):
        if obj.get(key) is not None:
            ts = parse_time(obj[key], where)
            break
    model = field(body, "model", str) or field(resp, "model", str, "response")
    observed = {"system", "tools", "messages", "cache_control"}
    observed |= {k for k, v in (("usage", usage), ("timestamp", ts), ("model", model)) if v is not None}
    extra = {k: body[k] for k in EXTRA_KEYS if body.get(k) is not None}
    if isinstance(body.get("cache_control"), dict):  # automatic caching (Anthropic; OpenRouter bodies for Claude)
        extra["cache_control"] = ttl(body["cache_control"], "cache_control")
    if (v := verdict(response)) is not None:  # Anthropic diagnostics / OpenAI prompt_cache_diagnostics
        extra["provider_diagnostics"] = v
    return dict(model=model, timestamp=ts, usage=usage, observed=frozenset(observed), extra=extra)


def notes_for(messages: tuple[Message, ...]) -> tuple[str, ...]:
    """Notes on inferred data: tool-call arguments that were objects and had to be serialized."""
    return tuple(f"{m.path}.tool_calls[{j}].arguments: logged as an object, serialized with json.dumps"
                 for m in messages for j, tc in enumerate(m.tool_calls) if tc.arguments_inferred)


@reader(priority=170)
class OpenAIChatReader:
    """Reader for OpenAI Chat Completions bodies (and request/response pairs)."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.5 for a body with ``model`` and a ``messages`` list (0.3 without ``model``); specific formats score higher."""
        obj = head_fields(head)
        body = sniff_body(obj)
        if not is_array(body.get("messages")):
            return 0.0
        if "system" in body or "anthropic_version" in body:
            return 0.1  # Anthropic Messages
        return 0.5 if isinstance(body.get("model"), str) or body is not obj else 0.3

    def parse(self, record: Any, prov: Provenance) -> Iterator[Request]:
        """One record → one request; :class:`FieldError` for a wrong shape."""
        body, response = unwrap(record)
        messages = messages_of(body.get("messages"), "messages")
        tools = tools_of(body)
        yield Request("", 0, FORMAT, prov, messages, tools, notes=notes_for(messages), **common(body, response, record))

    def read(self, source: Source) -> Iterator[Request | RecordsSeen]:
        return read_records(source, self.parse)
