"""OpenAI Responses API request bodies (``POST /v1/responses``).

Same layouts as the Chat reader (JSONL, one body, a list, request/response pairs).
Mapping (OpenAI API reference "Create a model response"; Codex
``ResponsesApiRequest``):

* ``instructions`` → a leading ``system`` message (path ``instructions``);
* ``input`` string → one user message; ``input`` items:
  ``message`` → a message of its role (``input_text``/``output_text`` parts are
  text, images and files are :class:`ContentPart`); ``reasoning`` → the
  ``reasoning`` of the next assistant message (summary text; ``encrypted_content``
  makes it opaque); ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` → tool calls of one assistant message (consecutive calls,
  and the assistant text right before them, are merged: one model turn);
  ``*_output`` items → ``tool`` messages; other items (``web_search_call``,
  ``item_reference``...) → opaque parts, with a note;
* tools are flat ``{type, name, description, parameters}`` (custom tools keep
  their ``format`` in the schema); usage from ``response.usage``
  (``input_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, ToolCall
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import head_fields, is_array, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, digest, expect, field, read_records
from prefixcache.analyzer.ingest.readers.openai_chat import EXTRA_KEYS, common, content_of, sniff_body, tool_of, unwrap

FORMAT = "openai-responses"
_EXTRA = EXTRA_KEYS + ("previous_response_id", "conversation", "store", "include", "reasoning", "text", "truncation")
_CALLS = {"function_call": "function", "custom_tool_call": "custom", "local_shell_call": "local_shell"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "computer_call_output"}
_ROLES = {"system", "developer", "user", "assistant"}


def _call_of(item: dict, kind: str, where: str) -> ToolCall:
    """A call item → :class:`ToolCall` (custom calls log ``input``, shell calls an ``action`` object)."""
    call_id = field(item, "call_id", str, where) or field(item, "id", str, where, default="")
    if kind == "custom":
        return ToolCall(call_id, field(item, "name", str, where, required=True),
                        field(item, "input", str, where, default=""), False, "custom")
    if kind == "local_shell":
        return ToolCall(call_id, "local_shell", json.dumps(field(item, "action", dict, where, default={})), True, kind)
    args = item.get("arguments")
    return ToolCall(call_id, field(item, "name", str, where, required=True),
                    args if isinstance(args, str) else json.dumps(args or {}), not isinstance(args, str))


def _output_text(value: Any, where: str) -> tuple[str, tuple[ContentPart, ...]]:
    if isinstance(value, str) or value is None:
        return value or "", ()
    text, _, parts, _ = content_of(expect(value, (str, list), where), where)
    return text, parts


class _Builder:
    """Folds Responses items into chat-style messages (one assistant message per model turn)."""

    def __init__(self) -> None:
        self.out: list[Message] = []
        self.turn: dict[str, Any] | None = None  # the open assistant turn
        self.reasoning: list[str] = []
        self.opaque = False
        self.notes: list[str] = []

    def _open(self, path: str) -> dict[str, Any]:
        if self.turn is None:
            self.turn = {"path": path, "texts": [], "calls": [], "parts": []}
        return self.turn

    def close(self) -> None:
        t, self.turn = self.turn, None
        if t is None and not (self.reasoning or self.opaque):
            return
        t = t or {"path": "", "texts": [], "calls": [], "parts": []}
        self.out.append(Message(role="assistant", content="\n".join(t["texts"]),
                                text_blocks=tuple(t["texts"]) if t["texts"] else None,
                                tool_calls=tuple(t["calls"]), reasoning="\n".join(self.reasoning) or None,
                                reasoning_opaque=self.opaque, parts=tuple(t["parts"]), path=t["path"]))
        self.reasoning, self.opaque = [], False

    def item(self, item: Any, where: str) -> None:
        expect(item, dict, where)
        kind = field(item, "type", str, where) or ("message" if "role" in item else None)
        if kind is None:
            raise FieldError(f"{where}.type", "missing item type")
        if kind == "message":
            role = field(item, "role", str, where, required=True)
            if role not in _ROLES:
                raise FieldError(f"{where}.role", f"unknown role {role!r}")
            text, blocks, parts, _ = content_of(item.get("content"), f"{where}.content")
            if role == "assistant":
                t = self._open(where)
                t["texts"].extend(blocks if blocks is not None else [text])
                t["parts"].extend(parts)
                return
            self.close()
            self.out.append(Message(role=role, content=text, text_blocks=blocks, parts=parts, path=where))
        elif kind == "reasoning":
            if self.turn is not None and (self.turn["texts"] or self.turn["calls"]):
                self.close()
            for k, s in enumerate(field(item, "summary", list, where, default=[])):
                self.reasoning.append(field(expect(s, dict, f"{where}.summary[{k}]"), "text", str,
                                            f"{where}.summary[{k}]", default=""))
            self.opaque = self.opaque or bool(item.get("encrypted_content"))
            self._open(where)
        elif kind in _CALLS:
            self._open(where)["calls"].append(_call_of(item, _CALLS[kind], where))
        elif kind in _OUTPUTS:
            self.close()
            text, parts = _output_text(item.get("output"), f"{where}.output")
            self.out.append(Message(role="tool", content=text, parts=parts,
                                    tool_call_id=field(item, "call_id", str, where, default=""), path=where))
        else:
            self._open(where)["parts"].append(ContentPart(kind, digest(item)))
            self.notes.append(f"{where}: item type {kind!r} kept as an opaque part of the assistant turn")


def messages_of(body: dict) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    """``instructions`` + ``input`` → (messages, notes)."""
    b = _Builder()
    instructions = field(body, "instructions", str)
    if instructions is not None:
        b.out.append(Message(role="system", content=instructions, path="instructions"))
    value = body.get("input")
    if isinstance(value, str):
        b.out.append(Message(role="user", content=value, path="input"))
    else:
        for i, item in enumerate(expect(value, (str, list), "input")):
            b.item(item, f"input[{i}]")
        b.close()
    if body.get("previous_response_id"):
        b.notes.append("previous_response_id: earlier turns are held server-side and are not in this body")
    return tuple(b.out), tuple(b.notes)


@reader(priority=150)
class OpenAIResponsesReader:
    """Reader for OpenAI Responses API bodies (and request/response pairs)."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.7 for a body with ``input`` (string or items) and no ``messages``."""
        body = sniff_body(head_fields(head))
        if "messages" in body or not (isinstance(body.get("input"), str) or is_array(body.get("input"))
                                      or ("instructions" in body and "input" not in body)):
            return 0.0
        return 0.7 if ("model" in body or "instructions" in body) else 0.3

    def parse(self, record: Any, prov: Provenance) -> Iterator[Request]:
        body, response = unwrap(record)
        messages, notes = messages_of(body)
        tools = tuple(tool_of(t, f"tools[{i}]") for i, t in enumerate(field(body, "tools", list, default=[])))
        info = common(body, response, record)
        info["extra"].update({k: body[k] for k in _EXTRA if body.get(k) is not None})
        yield Request("", 0, FORMAT, prov, messages, tools, notes=notes, **info)

    def read(self, source: Source) -> Iterator[Request | RecordsSeen]:
        return read_records(source, self.parse)
