"""Reader for OpenInference LLM spans (Arize Phoenix, ``openinference-instrumentation-*``).

Spans come in the OTel containers of :mod:`.otel_spans` (OTLP/JSON, SDK span JSON).
Semantic conventions: Arize-ai/openinference ``spec/semantic_conventions.md``; attributes
are flattened with numeric indexes:

* ``openinference.span.kind`` = ``LLM`` marks a model call; other kinds (``CHAIN``,
  ``TOOL``, ``AGENT``, ``RETRIEVER``...) are context (``Skipped(bad=False)``).
* ``llm.input_messages.{i}.message.role|content|name|tool_call_id``,
  ``...message.contents.{j}.message_content.type|text|image.image.url``,
  ``...message.tool_calls.{j}.tool_call.id|function.name|function.arguments``
  (arguments are the JSON **string** as sent, so argument serialization is checkable).
* ``llm.tools.{i}.tool.json_schema`` (JSON text of the tool as sent).
* ``llm.token_count.prompt`` (whole prompt), ``...prompt_details.cache_read`` (cached),
  ``...prompt_details.cache_write``, ``llm.token_count.completion``.
* ``session.id`` names the session; ``user.id`` and ``llm.invocation_parameters`` go to
  ``extra``; ``llm.model_name`` is the model.

What it cannot know: the provider's rendering of the messages (as for any API log);
a system prompt the instrumented client adds outside ``llm.input_messages``.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import orjson

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, Skipped, ToolCall, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, digest, skip
from prefixcache.analyzer.ingest.readers.openai_chat import tool_of
from prefixcache.analyzer.ingest.readers.otel_spans import Item, iter_items, looks_like_otel
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

FORMAT = "openinference"
_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened ``prefix.{i}.rest`` attributes as a list (by index) of ``{rest: value}`` dicts."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            m = _INDEXED.match(key[len(prefix) + 1:])
            if m:
                out.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [out[i] for i in sorted(out)]


def message_of(m: dict[str, Any], path: str) -> Message:
    """One flattened ``message.*`` group → :class:`Message`."""
    role = str(m.get("message.role") or "user")
    role = role if role in ("system", "developer", "user", "assistant", "tool") else "user"
    texts: list[str] = []
    parts: list[ContentPart] = []
    if isinstance(m.get("message.content"), str):
        texts.append(m["message.content"])
    for c in indexed(m, "message.contents"):
        if c.get("message_content.type", "text") == "text":
            texts.append(str(c.get("message_content.text") or ""))
        else:
            parts.append(ContentPart(str(c.get("message_content.type")), digest(c)))
    calls = tuple(ToolCall(str(t.get("tool_call.id") or ""), str(t.get("tool_call.function.name") or ""),
                           _arguments(t.get("tool_call.function.arguments")))
                  for t in indexed(m, "message.tool_calls"))
    tcid = m.get("message.tool_call_id")
    return Message(role, "\n".join(texts), tuple(texts) if len(texts) > 1 else None, calls,  # type: ignore[arg-type]
                   tool_call_id=str(tcid) if tcid else None, name=m.get("message.name"), parts=tuple(parts), path=path)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value if value is not None else {}).decode()


def _tools(attrs: dict[str, Any]) -> tuple:
    out = []
    for i, t in enumerate(indexed(attrs, "llm.tools")):
        schema = t.get("tool.json_schema")
        if isinstance(schema, str):
            try:
                schema = json_loads(schema)
            except ValueError:
                raise FieldError(f"llm.tools.{i}.tool.json_schema", "not valid JSON") from None
        out.append(tool_of(schema, f"llm.tools.{i}.tool.json_schema"))
    return tuple(out)


def usage_of(a: dict[str, Any]) -> Usage | None:
    """``llm.token_count.*`` → :class:`Usage` (prompt = the whole prompt, cache_read = cached)."""
    def num(key: str) -> int | None:
        v = a.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    u = Usage(num("llm.token_count.prompt"), num("llm.token_count.prompt_details.cache_read"),
              num("llm.token_count.prompt_details.cache_write"), num("llm.token_count.completion"))
    return None if u == Usage() else u


@reader(priority=90)
class OpenInferenceReader:
    """OpenInference ``LLM`` spans, one request each."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.97 for an OTel container naming ``openinference.span.kind`` or ``llm.input_messages``."""
        if ('"openinference.span.kind"' in head or '"llm.input_messages.' in head) and looks_like_otel(
                head, first_object(head)):
            return 0.97
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        n = 0
        for rec in iter_items(source):
            n += 1
            if isinstance(rec, Skipped):
                yield rec
                continue
            for item in rec[1]:
                kind = item.attrs.get("openinference.span.kind")
                if kind != "LLM" and not (kind is None and "llm.input_messages.0.message.role" in item.attrs):
                    yield skip(source.name, item.record, f"{kind or 'unmarked'} span {item.name!r} is not a model "
                               "call (context)", field=item.pointer, bad=False)
                    continue
                try:
                    yield self.request(source.name, item)
                except FieldError as e:
                    yield skip(source.name, item.record, e.reason, field=e.field)
        yield RecordsSeen(source.name, n)

    def request(self, name: str, item: Item) -> Request:
        a = item.attrs
        messages = tuple(message_of(m, f"llm.input_messages.{i}") for i, m in enumerate(indexed(a, "llm.input_messages")))
        tools = _tools(a)
        usage = usage_of(a)
        model = a.get("llm.model_name")
        observed = {p for p, v in (("messages", messages), ("tools", tools), ("usage", usage), ("model", model),
                                   ("timestamp", item.start)) if v}
        observed |= {"system"} if any(m.role == "system" for m in messages) else set()
        extra: dict[str, Any] = {"trace_id": item.trace_id, "span_id": item.span_id}
        for key, out in (("user.id", "user"), ("llm.provider", "provider"), ("llm.invocation_parameters",
                                                                              "invocation_parameters")):
            if a.get(key) is not None:
                extra[out] = a[key]
        notes = () if messages else ("no llm.input_messages (content hidden): usage only",)
        return Request(str(a.get("session.id") or ""), 0, FORMAT, Provenance(name, item.record, item.pointer, item.line),
                       messages=messages, tools=tools, model=str(model) if model else None, timestamp=item.start,
                       usage=usage, observed=frozenset(observed), notes=notes, extra=extra)
