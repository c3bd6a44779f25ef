"""Anthropic Messages request bodies (``POST /v1/messages``).

Same layouts as the OpenAI reader (JSONL, one JSON body, a JSON list, or
``{"request", "response"}`` pairs). Mapping to the request model (model.py
conventions; field reference: Anthropic API "Messages", "Prompt caching"):

* top-level ``system`` (string or text blocks) → one ``system`` message per block
  (``path`` ``system[i]``), ``cache_control`` kept as its TTL; a top-level ``cache_control``
  (automatic caching) → ``extra["cache_control"]`` (its TTL, read by ``common``), the number of marked blocks →
  ``extra["cache_control_blocks"]``; ``thinking`` / ``speed`` → ``extra`` (they scope the cache);
* a user message's ``tool_result`` blocks → one ``tool`` message each
  (``tool_call_id`` = ``tool_use_id``), then one ``user`` message with the
  remaining blocks, if any;
* assistant ``tool_use`` → :class:`ToolCall` with ``input`` serialized by
  ``json.dumps`` (as the Python SDK sends it; ``arguments_inferred``),
  ``thinking`` → ``reasoning``, ``redacted_thinking`` → ``reasoning_opaque``;
* ``image`` / ``document`` / server-tool result blocks → :class:`ContentPart`;
* ``tools[].input_schema`` → ``ToolDef.parameters``; usage: prompt = input +
  cache_creation + cache_read (see :func:`~.jsonio.parse_usage`).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, ToolCall, ToolDef
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import head_fields, is_array, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, read_records
from prefixcache.analyzer.ingest.images import content_part
from prefixcache.analyzer.ingest.readers.openai_chat import common, sniff_body, ttl, unwrap

FORMAT = "anthropic-messages"
_TEXTLIKE = {"text"}
_ANTHROPIC_BLOCKS = ('"tool_use"', '"tool_result"', '"thinking"', '"input_schema"')


class _Blocks:
    """Accumulates the blocks of one Anthropic message into Message fields."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.parts: list[ContentPart] = []
        self.reasoning: list[str] = []
        self.opaque = False
        self.cache: str | None = None

    def add(self, block: Any, where: str) -> None:
        if isinstance(block, str):
            self.texts.append(block)
            return
        expect(block, dict, where)
        kind = field(block, "type", str, where, required=True)
        self.cache = ttl(block.get("cache_control"), f"{where}.cache_control") or self.cache
        if kind in _TEXTLIKE:
            self.texts.append(field(block, "text", str, where, required=True))
        elif kind in ("tool_use", "server_tool_use"):
            args = json.dumps(field(block, "input", (dict, list), where, default={}))
            self.calls.append(ToolCall(field(block, "id", str, where, required=True),
                                       field(block, "name", str, where, required=True), args, True,
                                       "function" if kind == "tool_use" else "server"))
        elif kind == "thinking":
            self.reasoning.append(field(block, "thinking", str, where, required=True))
        elif kind == "redacted_thinking":
            self.opaque = True
        else:
            self.parts.append(content_part(kind, block))

    def message(self, role: str, path: str, *, as_list: bool, tool_call_id: str | None = None) -> Message:
        return Message(role=role, content="\n".join(self.texts),
                       text_blocks=tuple(self.texts) if as_list else None, tool_calls=tuple(self.calls),
                       tool_call_id=tool_call_id, reasoning="\n".join(self.reasoning) if self.reasoning else None,
                       reasoning_opaque=self.opaque, parts=tuple(self.parts), cache_control=self.cache, path=path)


def system_of(value: Any) -> list[Message]:
    """Top-level ``system`` → system messages (one per text block)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role="system", content=value, path="system")]
    expect(value, (str, list), "system")
    out = []
    for i, block in enumerate(value):
        b = _Blocks()
        b.add(block, f"system[{i}]")
        out.append(b.message("system", f"system[{i}]", as_list=False))
    return out


def _tool_result(block: dict, where: str) -> Message:
    """A ``tool_result`` block → a ``tool`` message (its content: string or blocks)."""
    b = _Blocks()
    content = block.get("content")
    if isinstance(content, str) or content is None:
        b.texts.append(content or "")
    else:
        for k, inner in enumerate(expect(content, list, f"{where}.content")):
            b.add(inner, f"{where}.content[{k}]")
    b.cache = ttl(block.get("cache_control"), f"{where}.cache_control") or b.cache
    return b.message("tool", where, as_list=isinstance(content, list),
                     tool_call_id=field(block, "tool_use_id", str, where, required=True))


def message_of(msg: Any, path: str) -> list[Message]:
    """One Anthropic message → one message, or tool messages + a user message (tool results)."""
    expect(msg, dict, path)
    role = field(msg, "role", str, path, required=True)
    if role not in ("user", "assistant"):
        raise FieldError(f"{path}.role", f"expected 'user' or 'assistant', got {role!r}")
    content = msg.get("content")
    if isinstance(content, str):
        return [Message(role=role, content=content, path=path)]
    expect(content, (str, list), f"{path}.content")
    out: list[Message] = []
    rest = _Blocks()
    for j, block in enumerate(content):
        where = f"{path}.content[{j}]"
        if isinstance(block, dict) and block.get("type") == "tool_result" and role == "user":
            out.append(_tool_result(block, where))
        else:
            rest.add(block, where)
    if not out or rest.texts or rest.parts or rest.calls:
        out.append(rest.message(role, path, as_list=True))
    return out


def tool_of(tool: Any, path: str) -> ToolDef:
    """``{name, description, input_schema, cache_control}`` (or a server tool ``{type, name}``)."""
    expect(tool, dict, path)
    return ToolDef(field(tool, "name", str, path, required=True), field(tool, "description", str, path, default=""),
                   field(tool, "input_schema", dict, path, default={}), tool,
                   ttl(tool.get("cache_control"), f"{path}.cache_control"), path)


def _marked_blocks(body: dict) -> int:
    """How many blocks of ``body`` carry a ``cache_control`` mark (tools, system blocks, message content
    blocks and the blocks inside ``tool_result`` content): the explicit breakpoint slots it uses."""
    def marked(block: Any) -> int:
        if not isinstance(block, dict):
            return 0
        inner = block.get("content") if block.get("type") == "tool_result" else None
        return int(block.get("cache_control") is not None) + (marked_all(inner) if isinstance(inner, list) else 0)

    def marked_all(blocks: Any) -> int:
        return sum(marked(b) for b in blocks) if isinstance(blocks, list) else 0

    return marked_all(body.get("tools")) + marked_all(body.get("system")) + sum(
        marked_all(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))


@reader(priority=160)
class AnthropicReader:
    """Reader for Anthropic Messages bodies (and request/response pairs)."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.7 for a body with ``messages`` and Anthropic cues (top-level ``system``,
        ``anthropic_version``, a ``claude`` model with ``max_tokens``, Anthropic block types)."""
        body = sniff_body(head_fields(head))
        # a huge system prompt may cut the head before ``messages``
        if not (is_array(body.get("messages")) or ("messages" not in body and "system" in body)):
            return 0.0
        model = body.get("model") if isinstance(body.get("model"), str) else ""
        cues = ("system" in body or "anthropic_version" in body
                or ("max_tokens" in body and model.startswith("claude"))
                or any(b in head for b in _ANTHROPIC_BLOCKS))
        return 0.7 if cues else 0.0

    def parse(self, record: Any, prov: Provenance) -> Iterator[Request]:
        body, response = unwrap(record)
        messages = system_of(body.get("system"))
        for i, m in enumerate(expect(body.get("messages"), list, "messages")):
            messages.extend(message_of(m, f"messages[{i}]"))
        tools = tuple(tool_of(t, f"tools[{i}]") for i, t in enumerate(field(body, "tools", list, default=[])))
        info = common(body, response, record)
        for key in ("thinking", "anthropic_version", "anthropic_beta", "speed"):
            if body.get(key) is not None:
                info["extra"][key] = body[key]
        marks = _marked_blocks(body)
        if marks:
            info["extra"]["cache_control_blocks"] = marks
        notes = ()
        if any(tc.arguments_inferred for m in messages for tc in m.tool_calls):
            notes = ("tool_use inputs are objects: arguments serialized with json.dumps, as the Anthropic SDK sends them",)
        yield Request("", 0, FORMAT, prov, tuple(messages), tools, notes=notes, **info)

    def read(self, source: Source) -> Iterator[Request | RecordsSeen]:
        return read_records(source, self.parse)
