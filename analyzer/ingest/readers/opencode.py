"""Reader for opencode storage folders (``~/.local/share/opencode/storage/``).

Layout (sst/opencode ``packages/opencode/src/storage/storage.ts``, ``session/message-v2.ts``):
``session/<projectID>/<sessionID>.json`` ``{id: "ses_…", projectID, title, time}``;
``message/<sessionID>/<messageID>.json`` ``{id: "msg_…", sessionID, role, time{created,
completed}, modelID, providerID, tokens{input, output, reasoning, cache{read, write}},
cost, system?}``; ``part/<messageID>/<partID>.json`` ``{id: "prt_…", messageID, type:
text | reasoning | tool | file | step-start | step-finish | patch | snapshot | …}``, a
``tool`` part holding ``{callID, tool, state{status, input (object), output}}``, a
``step-finish`` part the usage of one model call ``{tokens, cost}``.

The **session file** is the record that yields requests: its messages and their parts
are read from the same storage root, in id order (ids sort by time). Message and part
files met on their own (a walk of the storage folder), and ``project/<id>.json``, are counted as records read with
their session and yield nothing else. One request per ``step-finish`` part (one model
call); an assistant message without step parts is one call with the message's
``tokens``. A call's prompt: every earlier message (user text, assistant text + tool
calls, each completed tool's output as a ``tool`` message) plus the earlier steps of
its own message. Usage: prompt = input + cache.read + cache.write (opencode stores
``input`` without cached tokens), cached = cache.read, written = cache.write.

What it cannot know: the system prompt (unless an older version stored ``system`` on
the assistant message) and the tool schemas: a hidden prefix sized from usage
(``extra["opaque_prefix_key"] = "opencode"``). Tool inputs are objects (serialized
compactly, ``arguments_inferred``). Reasoning parts are not sent back (left out).
"""

from __future__ import annotations

import glob
import os
from typing import Any, Iterator

import orjson

from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, ToolCall, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, load_json, parse_time
from prefixcache.analyzer.ingest.jsonio import document_bytes, loads as json_loads

FORMAT = "opencode"
NOTE_HIDDEN = ("system prompt and tool schemas are not stored by opencode: an opaque shared prefix "
               "(extra.opaque_prefix_key) sized from usage")


def _kind(obj: dict[str, Any] | None, name: str) -> str:
    """``session`` / ``message`` / ``part`` for an opencode storage file, else ""."""
    if not obj or not isinstance(obj.get("id"), str):
        return ""
    parts = name.replace("\\", "/").split("/")
    folder = parts[-3] if len(parts) >= 3 else ""
    folder = "storage" if len(parts) >= 2 and parts[-2] == "project" else folder
    oid = obj["id"]
    if folder == "session" and oid.startswith("ses") and "projectID" in obj:
        return "session"
    if folder == "message" and oid.startswith("msg") and "sessionID" in obj and "role" in obj:
        return "message"
    if folder == "part" and oid.startswith("prt") and "messageID" in obj and "type" in obj:
        return "part"
    if folder == "storage" and parts[-2] == "project" and "worktree" in obj:
        return "project"
    return ""


def _json_files(folder: str) -> list[Any]:
    out = []
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.json"))):
        try:
            with open(path, "rb") as f:
                out.append(json_loads(document_bytes(f, path)))
        except (OSError, ValueError):
            continue
    return out


def usage_of(tokens: Any) -> Usage | None:
    """opencode ``tokens`` → :class:`Usage` (``input`` excludes cached tokens)."""
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    inp, read, write = (int(v or 0) for v in (tokens.get("input"), cache.get("read"), cache.get("write")))
    if not (inp or read or write):
        return None
    return Usage(inp + read + write, read, write, tokens.get("output"))


@reader(priority=130)
class OpencodeReader:
    """opencode storage: one request per model call (``step-finish``) of a session."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.95 for a session, message or part file in an opencode storage layout."""
        return 0.95 if _kind(first_object(head), name) else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        doc = load_json(source)
        kind = _kind(doc if isinstance(doc, dict) else None, source.name)
        if kind != "session":
            yield RecordsSeen(source.name, 1)  # read with its session file
            return
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(source.name))))
        messages = _json_files(os.path.join(root, "message", doc["id"]))
        if not messages:
            yield Skipped(source.name, 1, f"no message files under message/{doc['id']}/", "", False)
        yield from self._session(source.name, doc["id"], root, messages)
        yield RecordsSeen(source.name, 1)

    def _session(self, name: str, sid: str, root: str, messages: list[Any]) -> Iterator[Request]:
        history: list[Message] = []
        index = 0
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            parts = _json_files(os.path.join(root, "part", str(msg.get("id"))))
            if msg.get("role") == "user":
                text = [str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
                        and not p.get("synthetic")]
                history.append(Message("user", "\n".join(text), path=f"message/{sid}/{msg.get('id')}"))
                continue
            system = tuple(Message("system", s) for s in msg.get("system") or () if isinstance(s, str))
            steps = [p for p in parts if isinstance(p, dict) and p.get("type") == "step-finish"]
            own: list[Message] = []
            step = _Step(msg.get("id"))
            calls = 0
            for p in parts:
                if not isinstance(p, dict):
                    continue
                if p.get("type") == "step-finish":  # the call's prompt: everything before this step
                    yield self._request(name, sid, msg, system + tuple(history) + tuple(own), p.get("tokens"),
                                        index, calls)
                    index += 1
                    calls += 1
                if p.get("type") in ("step-start", "step-finish"):
                    own += step.flush()
                step.add(p)
            own += step.flush()
            if not steps:
                yield self._request(name, sid, msg, system + tuple(history), msg.get("tokens"), index, 0)
                index += 1
            history.extend(own)

    def _request(self, name: str, sid: str, msg: dict, prompt: tuple[Message, ...], tokens: Any, index: int,
                 step: int) -> Request:
        usage = usage_of(tokens)
        try:
            ts = parse_time((msg.get("time") or {}).get("created"))
        except FieldError:
            ts = None
        model = msg.get("modelID")
        observed = {"messages"} | {p for p, v in (("usage", usage), ("timestamp", ts), ("model", model)) if v}
        notes = (NOTE_HIDDEN,) + (("tool inputs are logged as objects: serialized compactly",)
                                  if any(m.tool_calls for m in prompt) else ())
        extra = {"message_id": msg.get("id"), "step": step, "provider": msg.get("providerID"),
                 **({"opaque_prefix_key": "opencode"} if usage else {})}
        return Request(f"opencode:{sid}", index, FORMAT, Provenance(name, 1, f"message/{sid}/{msg.get('id')}"),
                       messages=prompt, model=str(model) if model else None, timestamp=ts, usage=usage,
                       observed=frozenset(observed), notes=notes, extra=extra)


class _Step:
    """The parts of one model call of an assistant message: its text, tool calls and their results.

    ``flush`` gives what later prompts hold for it: one assistant message (text + calls), then
    one ``tool`` message per completed call, as the API sends them.
    """

    def __init__(self, mid: Any) -> None:
        self.mid = mid
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[Message] = []
        self.path = ""

    def add(self, p: dict[str, Any]) -> None:
        self.path = self.path or f"part/{self.mid}/{p.get('id')}"
        if p.get("type") == "text" and not p.get("synthetic"):
            self.texts.append(str(p.get("text") or ""))
        elif p.get("type") == "tool":
            state = p.get("state") if isinstance(p.get("state"), dict) else {}
            cid = str(p.get("callID") or "")
            self.calls.append(ToolCall(cid, str(p.get("tool") or ""), orjson.dumps(state.get("input") or {}).decode(),
                                       True))
            if state.get("status") in ("completed", "error"):
                result = state.get("output") if state.get("status") == "completed" else state.get("error")
                self.results.append(Message("tool", str(result or ""), tool_call_id=cid,
                                            path=f"part/{self.mid}/{p.get('id')}"))

    def flush(self) -> list[Message]:
        out = []
        if self.texts or self.calls:
            out.append(Message("assistant", "\n".join(self.texts), tool_calls=tuple(self.calls), path=self.path))
        out += self.results
        self.texts, self.calls, self.results, self.path = [], [], [], ""
        return out
