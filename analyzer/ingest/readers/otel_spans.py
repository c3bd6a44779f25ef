"""OpenTelemetry containers: spans and log-record events in the shapes exporters write.

Three layouts, each JSONL (one value per line), one JSON document, or a JSON list:

* **OTLP/JSON** (the OTLP file exporter, collector ``file`` exporter): ``{"resourceSpans":
  [{resource, scopeSpans: [{scope, spans: [...]}]}]}`` per line, span fields
  ``traceId, spanId, parentSpanId, name, startTimeUnixNano, endTimeUnixNano,
  attributes: [{key, value: {stringValue|intValue|doubleValue|boolValue|arrayValue|
  kvlistValue|bytesValue}}], events``; logs are ``{"resourceLogs": [{scopeLogs:
  [{logRecords: [...]}]}]}`` with ``eventName``, ``timeUnixNano``, ``body``.
  Source: opentelemetry-proto ``opentelemetry/proto/trace/v1/trace.proto`` and its JSON
  mapping (64-bit ints are strings).
* **SDK span JSON** (``ReadableSpan.to_json()``, the console exporter, which writes pretty-printed
  documents one after another): ``{name,
  context: {trace_id, span_id}, parent_id, start_time (ISO), end_time, attributes:
  {key: value}, events: [{name, timestamp, attributes}], resource}``.
* **SDK log-record JSON** (``LogRecord.to_json()``): ``{body, attributes, timestamp,
  observed_timestamp, trace_id, span_id, event_name}``.

:func:`iter_items` turns any of them into :class:`Item` s (one per span or log
record, with plain attribute dicts) tagged with the input record (line or list
item) they came from, which is the unit ``Provenance.record`` counts in.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Iterator

from prefixcache.analyzer.model import Skipped
from prefixcache.analyzer.ingest.base import Source
from prefixcache.analyzer.ingest.jsonio import (FIRST_LINE_BYTES, FieldError, JSONDepthError, document_bytes, expect,
                                                 first_lines, is_json_value, iter_records, parse_time, raw_decode)



@dataclass(frozen=True)
class Item:
    """One span or log record: ``kind`` ``span`` or ``event``; ``attrs`` decoded to plain values;
    times in UNIX seconds (None when not logged); ``events`` the span's events as
    ``(name, attrs)``; ``record`` / ``pointer`` / ``line`` where it sits in the file."""

    kind: str
    name: str
    attrs: dict[str, Any]
    record: int
    pointer: str
    line: int | None
    start: float | None = None
    end: float | None = None
    trace_id: str = ""
    span_id: str = ""
    parent_id: str = ""
    events: tuple[tuple[str, dict[str, Any]], ...] = field(default_factory=tuple)
    body: Any = None


def any_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": ...}`` etc.) as a plain value; ints from strings."""
    if not isinstance(v, dict) or not v:
        return None
    key, val = next(iter(v.items()))
    if key == "intValue":
        return int(val)
    if key == "doubleValue":
        return float(val)
    if key == "arrayValue":
        return [any_value(x) for x in (val or {}).get("values", [])]
    if key == "kvlistValue":
        return kv_list((val or {}).get("values", []))
    if key == "bytesValue":
        return base64.b64decode(val).hex() if isinstance(val, str) else val
    return val


def kv_list(items: Any) -> dict[str, Any]:
    """An OTLP ``[{key, value}]`` attribute list as a dict (later keys win)."""
    out: dict[str, Any] = {}
    for kv in items or ():
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def _nanos(value: Any) -> float | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n / 1e9 if n else None


def _hex(value: Any) -> str:
    text = str(value or "")
    return text[2:] if text.startswith("0x") else text


def _otlp(rec: dict[str, Any], record: int, ptr: str, line: int | None) -> Iterator[Item]:
    ptr = f"{ptr}." if ptr else ""
    for i, rs in enumerate(rec.get("resourceSpans") or ()):
        for j, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ()):
            for k, sp in enumerate(ss.get("spans") or ()):
                yield Item("span", str(sp.get("name") or ""), kv_list(sp.get("attributes")), record,
                           f"{ptr}resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", line,
                           _nanos(sp.get("startTimeUnixNano")), _nanos(sp.get("endTimeUnixNano")),
                           _hex(sp.get("traceId")), _hex(sp.get("spanId")), _hex(sp.get("parentSpanId")),
                           tuple((str(e.get("name") or ""), kv_list(e.get("attributes")))
                                 for e in sp.get("events") or () if isinstance(e, dict)))
    for i, rl in enumerate(rec.get("resourceLogs") or ()):
        for j, sl in enumerate(rl.get("scopeLogs") or ()):
            for k, lr in enumerate(sl.get("logRecords") or ()):
                attrs = kv_list(lr.get("attributes"))
                name = str(lr.get("eventName") or attrs.get("event.name") or "")
                t = _nanos(lr.get("timeUnixNano")) or _nanos(lr.get("observedTimeUnixNano"))
                yield Item("event", name, attrs, record, f"{ptr}resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]",
                           line, t, t, _hex(lr.get("traceId")), _hex(lr.get("spanId")),
                           body=any_value(lr.get("body")))


def _time(value: Any) -> float | None:
    try:
        return parse_time(value)
    except FieldError:
        return None


def _sdk(rec: dict[str, Any], record: int, ptr: str, line: int | None) -> Iterator[Item]:
    attrs = rec.get("attributes") if isinstance(rec.get("attributes"), dict) else {}
    if "context" in rec or "start_time" in rec:
        ctx = rec.get("context") if isinstance(rec.get("context"), dict) else {}
        events = tuple((str(e.get("name") or ""), e.get("attributes") if isinstance(e.get("attributes"), dict) else {})
                       for e in rec.get("events") or () if isinstance(e, dict))
        yield Item("span", str(rec.get("name") or ""), dict(attrs), record, ptr, line, _time(rec.get("start_time")),
                   _time(rec.get("end_time")), _hex(ctx.get("trace_id")), _hex(ctx.get("span_id")),
                   _hex(rec.get("parent_id")), events)
        return
    t = _time(rec.get("timestamp")) or _time(rec.get("observed_timestamp"))
    name = str(rec.get("event_name") or attrs.get("event.name") or "")
    yield Item("event", name, dict(attrs), record, ptr, line, t, t, _hex(rec.get("trace_id")),
               _hex(rec.get("span_id")), body=rec.get("body"))


def items_of(rec: Any, record: int, ptr: str, line: int | None) -> Iterator[Item]:
    """The spans / log records of one input record (see the module docstring for shapes).

    Raises :class:`FieldError` when the record is not an object.
    """
    expect(rec, dict, "")
    if "resourceSpans" in rec or "resourceLogs" in rec:
        yield from _otlp(rec, record, ptr, line)
    else:
        yield from _sdk(rec, record, ptr, line)


def _concatenated(source: Source) -> Iterator[tuple[int, str, Any] | Skipped]:
    """Pretty-printed JSON documents one after another (the SDK console exporter's output):
    ``(record, "", value)`` each, record = its 1-based position. A syntax error ends the file
    with a bad :class:`Skipped` (the documents before it are kept)."""
    with source.open() as f:
        text = document_bytes(f, source.name).decode("utf-8", errors="replace")
    pos, n = 0, 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        n += 1
        try:
            value, pos = raw_decode(text, pos)
        except JSONDepthError as e:
            yield Skipped(source.name, n, e.reason, e.field, True)
            return
        except ValueError as e:
            yield Skipped(source.name, n, f"invalid JSON document: {e.msg} at line {e.lineno}", "", True)
            return
        yield n, "", value


def iter_items(source: Source) -> Iterator[tuple[int, list[Item]] | Skipped]:
    """``(record, items)`` per input record of the file (JSONL line, list item, one document, or
    each of several concatenated pretty-printed documents); undecodable lines pass through as
    bad :class:`Skipped`."""
    first = next(iter(first_lines(source, 1)), b"")
    concatenated = first.lstrip().startswith(b"{") and len(first) < FIRST_LINE_BYTES and not is_json_value(first)
    for rec in _concatenated(source) if concatenated else iter_records(source):
        if isinstance(rec, Skipped):
            yield rec
            continue
        record, ptr, value = rec
        line = record if not ptr else None
        try:
            yield record, list(items_of(value, record, ptr, line))
        except FieldError as e:
            yield Skipped(source.name, record, e.reason, e.field, True)


def looks_like_otel(head: str, obj: dict[str, Any] | None) -> bool:
    """True when the head's first record is an OTel container (OTLP, SDK span or log record JSON)."""
    if obj is not None:
        if "resourceSpans" in obj or "resourceLogs" in obj:
            return True
        if isinstance(obj.get("attributes"), dict) and (
                "context" in obj or "observed_timestamp" in obj or "event_name" in obj
                or ("body" in obj and "trace_id" in obj)):
            return True
        return False
    return any(k in head[:4096] for k in ('"resourceSpans"', '"resourceLogs"', '"context": {"trace_id"',
                                         '"observed_timestamp"'))
