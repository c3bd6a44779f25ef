"""Reader for Gemini CLI chat recordings (``~/.gemini/tmp/<project hash>/chats/session-*.json``).

Layout (google-gemini/gemini-cli ``packages/core/src/services/chatRecordingService.ts``,
``ConversationRecord``): ``{sessionId, projectHash, startTime, lastUpdated, messages:
[{id, timestamp, type, content, thoughts?, tokens?, model?, toolCalls?}]}``; ``type`` is
``user``, ``gemini``, ``info``, ``error`` or ``warning``. A ``gemini`` message is one
model response: ``tokens{input, output, cached, thoughts, tool, total}`` (``input`` is
the whole prompt incl. cached, ``cached`` the cached part), ``toolCalls[{id, name,
args, result: [{functionResponse: {id, name, response}}], status}]``.

One request per ``gemini`` message. Its prompt is the conversation before it: user
messages, earlier responses (text + tool calls) and their tool results (one ``tool``
message per ``functionResponse``). ``thoughts`` are not sent back and are left out.
``info`` / ``error`` / ``warning`` messages are never sent to the model
(``Skipped(bad=False)``). A response whose ``tokens`` are all 0 has no usage.

What it cannot know: the system prompt (Gemini CLI's core prompt + ``GEMINI.md``
memory) and the tool declarations are not recorded: a hidden prefix sized from usage
(``extra["opaque_prefix_key"] = "gemini-cli"``, set only on responses with usage, since the
first request of a key sizes it), as for Claude Code. Tool-call
``args`` are objects (serialized compactly, ``arguments_inferred``). Gemini's own
layout of ``Content``/``Part`` objects is not public, so token counts are approximate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import orjson

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, Skipped, ToolCall, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import head_fields, is_array, reader
from prefixcache.analyzer.ingest.images import gemini_part
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, load_json, parse_time, type_name

FORMAT = "gemini-cli"
NOTE_HIDDEN = ("system prompt and tool declarations are not recorded: an opaque shared prefix "
               "(extra.opaque_prefix_key) sized from usage")
NOTE_ARGS = "tool-call args are logged as objects: serialized compactly (argument serialization is not checkable)"


def _text(content: Any) -> str:
    """``content``: a string, or a list of ``{text}`` parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _images(parts: Any) -> tuple[ContentPart, ...]:
    """The image parts (:func:`gemini_part`) of a ``content`` / ``result`` value: a Part or a list of them."""
    items = parts if isinstance(parts, list) else [parts]
    return tuple(p for p in map(gemini_part, items) if p is not None)


def _usage(tokens: Any, path: str) -> Usage | None:
    if tokens is None:
        return None
    expect(tokens, dict, path)
    inp = field(tokens, "input", int, path)
    if not inp:
        return None
    return Usage(inp, field(tokens, "cached", int, path), None, field(tokens, "output", int, path))


def _response(msg: dict[str, Any], path: str) -> list[Message]:
    """A ``gemini`` message as sent back later: the assistant turn, then its tool results."""
    calls, results = [], []
    for k, tc in enumerate(field(msg, "toolCalls", list, path, default=[])):
        where = f"{path}.toolCalls[{k}]"
        expect(tc, dict, where)
        cid, name = str(tc.get("id") or ""), str(tc.get("name") or "")
        calls.append(ToolCall(cid, name, orjson.dumps(tc.get("args") or {}).decode(), True))
        for r in tc.get("result") or ():
            fr = r.get("functionResponse") if isinstance(r, dict) else None
            if isinstance(fr, dict):
                resp = fr.get("response")
                results.append(Message("tool", resp if isinstance(resp, str) else orjson.dumps(resp).decode(),
                                       tool_call_id=str(fr.get("id") or cid), name=name,
                                       parts=_images(fr.get("parts") or []), path=f"{where}.result"))
            elif results and (pics := _images(r)):  # a picture sent after its function response
                results[-1] = dataclasses.replace(results[-1], parts=results[-1].parts + pics)
    return [Message("assistant", _text(msg.get("content")), tool_calls=tuple(calls), path=path), *results]


@reader(priority=110)
class GeminiCliReader:
    """Gemini CLI ``chats/session-*.json`` recordings: one request per model response."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.95 for ``{sessionId, projectHash, ..., messages: [...]}``."""
        f = head_fields(head)
        if "sessionId" in f and "projectHash" in f and ("messages" not in f or is_array(f["messages"])):
            return 0.95
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        doc = load_json(source)
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise FieldError("messages", f"expected a ConversationRecord with a messages list, got {type_name(doc)}")
        sid = str(doc.get("sessionId") or "")
        history: list[Message] = []
        index = 0
        for i, msg in enumerate(doc["messages"]):
            path = f"messages[{i}]"
            try:
                expect(msg, dict, path)
                mtype = field(msg, "type", str, path, required=True)
                if mtype == "user":
                    content = msg.get("content")
                    history.append(Message("user", _text(content), parts=_images(content), path=path))
                    continue
                if mtype != "gemini":
                    yield Skipped(source.name, i + 1, f"{mtype!r} message: shown to the user, not sent to the model",
                                  f"{path}.type", False)
                    continue
                yield self._request(source.name, sid, i, msg, tuple(history), index)
                index += 1
                history.extend(_response(msg, path))
            except FieldError as e:
                yield Skipped(source.name, i + 1, e.reason, e.field, True)
        yield RecordsSeen(source.name, len(doc["messages"]))

    def _request(self, name: str, sid: str, i: int, msg: dict, history: tuple[Message, ...], index: int) -> Request:
        path = f"messages[{i}]"
        usage = _usage(msg.get("tokens"), f"{path}.tokens")
        ts = parse_time(msg.get("timestamp"), f"{path}.timestamp")
        model = field(msg, "model", str, path)
        notes = (NOTE_HIDDEN,) + ((NOTE_ARGS,) if any(m.tool_calls for m in history) else ()) + (
            ("tokens are all 0: no usage recorded for this response",) if usage is None and msg.get("tokens") else ())
        observed = {"messages"} | {k for k, v in (("usage", usage), ("timestamp", ts), ("model", model)) if v}
        return Request(sid, index, FORMAT, Provenance(name, i + 1, path), messages=history, model=model,
                       timestamp=ts, usage=usage, observed=frozenset(observed), notes=notes,
                       extra={"message_id": msg.get("id"), **({"opaque_prefix_key": "gemini-cli"} if usage else {})})
