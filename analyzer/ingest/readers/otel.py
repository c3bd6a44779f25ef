"""Reader for OpenTelemetry GenAI telemetry (``gen_ai.*`` spans and events).

Containers (OTLP/JSON, SDK span JSON lines, SDK log-record JSON lines) are read by
:mod:`.otel_spans`. Semantic conventions: open-telemetry/semantic-conventions
``docs/gen-ai`` (``gen-ai-spans.md``, ``gen-ai-events.md``; the JSON schemas of
``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``).

One request per *inference* span or event: ``gen_ai.operation.name`` ``chat``,
``text_completion`` or ``generate_content`` (or a ``gen_ai.client.inference.operation.details``
event). Agent and tool spans (``execute_tool``, ``invoke_agent``, ``create_agent``) are read
as context (conversation id, tool-call arguments); other spans (``embeddings``, plain HTTP
spans, ...) are each a ``Skipped(bad=False)`` note. What is read:

* ``gen_ai.system_instructions`` (parts) → a leading system message; ``gen_ai.input.messages``
  (``{role, parts: [text | tool_call | tool_call_response | reasoning | blob | uri | file]}``)
  → messages. Older OpenLLMetry flattening ``gen_ai.prompt.{i}.role|content`` is read too.
  Attribute values may be JSON text (spans) or already objects (events). Conventions up to
  v1.36 logged one event per message (``gen_ai.system|user|assistant|tool.message`` with a
  ``{content, tool_calls, id}`` body, and ``gen_ai.choice`` for the reply): they are grouped
  by span id into the span's prompt (or a request of their own when the span is elsewhere).
* ``gen_ai.tool.definitions`` → tools (flat ``{type, name, description, parameters}``).
* ``gen_ai.usage.input_tokens`` (includes cached, per the conventions) → prompt;
  ``gen_ai.usage.cache_read.input_tokens`` → cached; ``...cache_creation.input_tokens``
  → written; ``gen_ai.usage.output_tokens``. OpenLLMetry's older ``gen_ai.usage.prompt_tokens``
  / ``cache_read_input_tokens`` spellings are accepted.
* Session: ``gen_ai.conversation.id`` of the span, else of any span of the same trace
  (agent frameworks set it on the ``invoke_agent`` root); else message chaining.
* Time: the span's start (an event's timestamp, else its observed time).

What it cannot know: tool-call arguments are logged as **objects**, so the exact bytes
the client sent are unknown: they are serialized compactly (or taken from the
``execute_tool`` span's ``gen_ai.tool.call.arguments`` string of the same call id),
marked ``arguments_inferred``, and rules that judge argument serialization (PC301) are
not checkable from OTel (a note on every such request). When ``gen_ai.tool.definitions``
is not logged (the official openai-v2 instrumentation never logs it), tools become a
hidden prefix sized from usage (``extra["opaque_prefix_key"]``), as for Claude Code.
Content capture is opt-in: a span without messages is usage-only.
"""

from __future__ import annotations

from typing import Any, Iterator

import orjson

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, Skipped, ToolCall, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.images import content_part
from prefixcache.analyzer.ingest.jsonio import FieldError, skip
from prefixcache.analyzer.ingest.readers.openai_chat import tool_of
from prefixcache.analyzer.ingest.readers.otel_spans import Item, iter_items, looks_like_otel
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

FORMAT = "otel-genai"
INFERENCE_OPS = frozenset({"chat", "text_completion", "generate_content"})
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: GenAI conventions ≤ v1.36: one log event per input message (body ``{content, tool_calls, id}``).
LEGACY_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                 "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
#: Agent and tool spans: read as context (conversation id, tool-call arguments), no note each.
CONTEXT_OPS = frozenset({"execute_tool", "invoke_agent", "create_agent"})
NOTE_ARGS = ("tool-call arguments are logged as objects: argument serialization (PC301) is not checkable from "
             "OTel; the arguments were serialized compactly")
NOTE_TOOLS = ("gen_ai.tool.definitions not logged: tools (if any) are a hidden prefix sized from usage "
              "(extra.opaque_prefix_key)")
_EXTRA = ("gen_ai.response.id", "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.system",
          "gen_ai.response.finish_reasons", "gen_ai.response.time_to_first_chunk", "server.address")


def decoded(value: Any) -> Any:
    """An attribute that holds JSON text (span attributes are strings) decoded; objects as they are."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json_loads(value)
        except ValueError:
            raise FieldError("", f"attribute is not valid JSON: {value[:40]!r}") from None
    return value


def _args(value: Any, call_id: str, known: dict[str, str]) -> str:
    if isinstance(value, str):
        return value
    if call_id in known:
        return known[call_id]
    return orjson.dumps(value if value is not None else {}).decode()


def message_of(msg: Any, path: str, known: dict[str, str]) -> list[Message]:
    """One ``{role, parts}`` message → messages (each ``tool_call_response`` part its own tool message)."""
    if not isinstance(msg, dict):
        raise FieldError(path, "expected an object with role and parts")
    role = str(msg.get("role") or "user")
    role = role if role in ("system", "developer", "user", "assistant", "tool") else "user"
    parts = msg.get("parts")
    if parts is None and isinstance(msg.get("content"), str):
        parts = [{"type": "text", "content": msg["content"]}]
    texts: list[str] = []
    calls: list[ToolCall] = []
    other: list[ContentPart] = []
    reasoning: list[str] = []
    tools: list[Message] = []
    for k, part in enumerate(parts or ()):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "tool_call":
            cid = str(part.get("id") or "")
            calls.append(ToolCall(cid, str(part.get("name") or ""), _args(part.get("arguments"), cid, known), True))
        elif kind == "tool_call_response":
            resp = part.get("response")
            text = resp if isinstance(resp, str) else orjson.dumps(resp).decode()
            tools.append(Message("tool", text, tool_call_id=str(part.get("id") or ""), path=f"{path}.parts[{k}]"))
        elif kind == "reasoning":
            reasoning.append(str(part.get("content") or ""))
        else:
            other.append(content_part(str(kind or "unknown"), part))
    if tools and not (texts or calls or other):
        return tools
    out = tools + [Message(role, "\n".join(texts), tuple(texts) if len(texts) > 1 else None, tuple(calls),  # type: ignore[arg-type]
                           reasoning="\n".join(reasoning) if reasoning else None, parts=tuple(other), path=path)]
    return out


def legacy_message(role: str, body: Any, path: str) -> Message:
    """A ≤ v1.36 message event body (``{content, tool_calls: [{id, function: {name, arguments}}], id}``)."""
    body = decoded(body) if isinstance(body, str) and body[:1] in "[{" else body
    body = body if isinstance(body, dict) else {"content": body}
    content = body.get("content")
    text = content if isinstance(content, str) else "" if content is None else orjson.dumps(content).decode()
    calls = []
    for tc in body.get("tool_calls") or ():
        fn = tc.get("function") if isinstance(tc, dict) and isinstance(tc.get("function"), dict) else {}
        args = fn.get("arguments")
        calls.append(ToolCall(str(tc.get("id") or ""), str(fn.get("name") or ""),
                              args if isinstance(args, str) else orjson.dumps(args or {}).decode(), not isinstance(args, str)))
    return Message(role, text, tool_calls=tuple(calls),  # type: ignore[arg-type]
                   tool_call_id=str(body["id"]) if role == "tool" and body.get("id") else None, path=path)


def _flat_prompt(attrs: dict[str, Any]) -> list[Any]:
    """Older OpenLLMetry ``gen_ai.prompt.{i}.role|content`` attributes as ``{role, content}`` messages."""
    out = []
    i = 0
    while f"gen_ai.prompt.{i}.role" in attrs or f"gen_ai.prompt.{i}.content" in attrs:
        out.append({"role": attrs.get(f"gen_ai.prompt.{i}.role"), "content": str(attrs.get(f"gen_ai.prompt.{i}.content") or "")})
        i += 1
    return out


def _int(attrs: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        v = attrs.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v)
    return None


def usage_of(attrs: dict[str, Any]) -> Usage | None:
    """``gen_ai.usage.*`` → :class:`Usage` (input tokens include cached ones, per the conventions)."""
    u = Usage(_int(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
              _int(attrs, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
              _int(attrs, "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"),
              _int(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"))
    return None if u == Usage() else u


def is_inference(item: Item) -> bool:
    """True for a GenAI inference span / event (see the module docstring)."""
    op = item.attrs.get("gen_ai.operation.name")
    return op in INFERENCE_OPS or item.name == DETAILS_EVENT or (
        op is None and ("gen_ai.input.messages" in item.attrs or "gen_ai.prompt.0.role" in item.attrs))


@reader(priority=80)
class OtelGenAIReader:
    """OpenTelemetry GenAI inference spans / events, one request each."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.95 for an OTel container whose head names ``gen_ai.`` attributes."""
        if '"gen_ai.' not in head or not looks_like_otel(head, first_object(head)):
            return 0.0
        return 0.95

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """Every record's items; requests are held to the file's end (conversation ids come from root spans)."""
        held: list[Item] = []
        conv: dict[str, str] = {}
        args: dict[str, str] = {}
        legacy: dict[str, list[Item]] = {}  # span id → its ≤ v1.36 message events, in order
        n = 0
        for rec in iter_items(source):
            n += 1
            if isinstance(rec, Skipped):
                yield rec
                continue
            for item in rec[1]:
                if item.kind == "event" and (item.name in LEGACY_EVENTS or item.name == "gen_ai.choice"):
                    if item.name != "gen_ai.choice":  # the choice is the reply: context
                        legacy.setdefault(item.span_id or f"record {item.record}", []).append(item)
                    continue
                cid = item.attrs.get("gen_ai.conversation.id")
                if cid and item.trace_id:
                    conv.setdefault(item.trace_id, str(cid))
                if is_inference(item):
                    held.append(item)
                    continue
                call = item.attrs.get("gen_ai.tool.call.id")
                if call and isinstance(item.attrs.get("gen_ai.tool.call.arguments"), str):
                    args[str(call)] = item.attrs["gen_ai.tool.call.arguments"]
                op = item.attrs.get("gen_ai.operation.name") or item.name or "unnamed"
                if op in CONTEXT_OPS:
                    continue  # read: conversation ids and tool-call arguments come from these spans
                yield skip(source.name, item.record, f"{item.kind} {op!r} is not a model call (context)",
                           field=item.pointer, bad=False)
        spans = {item.span_id for item in held}
        for sid, events in legacy.items():  # message events of a span not in this file: a request of their own
            if sid not in spans:
                first = events[0]
                held.append(Item("event", first.name, {k: v for k, v in first.attrs.items() if k.startswith("gen_ai.")
                                                        and k != "gen_ai.event.name"}, first.record, first.pointer,
                                 first.line, first.start, first.end, first.trace_id, sid))
        held.sort(key=lambda it: it.record)
        for item in held:
            events = legacy.get(item.span_id) if item.span_id else None
            try:
                yield self.request(source.name, item, conv, args, events)
            except FieldError as e:
                yield skip(source.name, item.record, e.reason, field=f"{item.pointer} {e.field}".strip())
        yield RecordsSeen(source.name, n)

    def request(self, name: str, item: Item, conv: dict[str, str], known: dict[str, str],
                events: list[Item] | None = None) -> Request:
        """One inference item → :class:`Request` (FieldError on a malformed messages attribute).

        ``events`` are the span's ≤ v1.36 message events, used when it has no ``gen_ai.input.messages``.
        """
        a = item.attrs
        messages: list[Message] = []
        system = decoded(a.get("gen_ai.system_instructions"))
        if system:
            parts = system if isinstance(system, list) else [{"type": "text", "content": str(system)}]
            messages += message_of({"role": "system", "parts": parts}, "gen_ai.system_instructions", known)
        raw = decoded(a.get("gen_ai.input.messages")) or _flat_prompt(a)
        if not isinstance(raw, list):
            raise FieldError("gen_ai.input.messages", "expected a list of messages")
        for i, m in enumerate(raw):
            messages += message_of(m, f"gen_ai.input.messages[{i}]", known)
        if not raw and events:
            messages += [legacy_message(LEGACY_EVENTS[e.name], e.body, e.pointer or f"record {e.record}") for e in events]
        tools_raw = decoded(a.get("gen_ai.tool.definitions"))
        tools = tuple(tool_of(t, f"gen_ai.tool.definitions[{i}]") for i, t in enumerate(tools_raw or ()))
        usage = usage_of(a)
        model = a.get("gen_ai.request.model") or a.get("gen_ai.response.model")
        observed = {"timestamp"} if item.start is not None else set()
        observed |= {"messages"} if messages else set()
        observed |= {"system"} if any(m.role == "system" for m in messages) else set()
        observed |= {"tools"} if tools_raw is not None else set()
        observed |= {"usage"} if usage else set()
        observed |= {"model"} if model else set()
        notes: tuple[str, ...] = ()
        extra: dict[str, Any] = {k: a[k] for k in _EXTRA if k in a}
        if any(m.tool_calls for m in messages):
            notes += (NOTE_ARGS,)
        if not messages:
            notes += ("content not captured (opt-in): usage only",)
        elif tools_raw is None:
            notes += (NOTE_TOOLS,)
            extra["opaque_prefix_key"] = f"otel:{a.get('gen_ai.provider.name') or a.get('gen_ai.system') or ''}:tools"
        session = str(a.get("gen_ai.conversation.id") or conv.get(item.trace_id) or "")
        extra.update({"trace_id": item.trace_id, "span_id": item.span_id})
        return Request(session, 0, FORMAT, Provenance(name, item.record, item.pointer, item.line),
                       messages=tuple(messages), tools=tools, model=str(model) if model else None,
                       timestamp=item.start, usage=usage, observed=frozenset(observed), notes=notes, extra=extra)
