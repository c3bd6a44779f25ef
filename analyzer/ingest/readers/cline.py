"""Reader for Cline / Roo Code / Kilo Code task folders (``.../tasks/<taskId>/``).

Files (cline ``src/core/storage/disk.ts``; Roo and Kilo keep the same two JSON files):

* ``api_conversation_history.json``: the Anthropic-format messages sent to the model,
  ``[{role, content: str | blocks}]`` (Cline may add ``ts`` per message). The **system
  prompt and the tools are not stored**. Each user turn ends with an
  ``<environment_details>`` block (open tabs, the current time, ...), itself a prefix
  breaker that lint reports when it changes.
* ``ui_messages.json``: the UI rows ``[{ts, type: "say"|"ask", say?, ask?, text?}]``;
  ``say: "api_req_started"`` rows hold a JSON ``text`` ``{request, tokensIn, tokensOut,
  cacheWrites, cacheReads, cost, cancelReason?}`` (``ClineApiReqInfo``), one per API call.
* ``task_metadata.json``: ``{files_in_context, model_usage: [{ts, model_id,
  model_provider_id, mode}]}`` (Cline only).

Requests come from ``api_conversation_history.json``: one per assistant message, whose
prompt is every message before it. Usage, time and cost come from the k-th
``api_req_started`` row of the sibling ``ui_messages.json`` that has token counts,
paired by order (inferred: a failed or cancelled call without an assistant message can
shift the pairing; a note says when the counts differ). Usage has Anthropic semantics:
prompt = tokensIn + cacheWrites + cacheReads, cached = cacheReads (providers that
report ``tokensIn`` including cached tokens over-count; not knowable from the files).
The model is the latest ``model_usage`` entry at or before the call.

The hidden prefix (system prompt + tools) is sized from usage
(``extra["opaque_prefix_key"] = "cline"``), as for Claude Code. ``ui_messages.json`` and
``task_metadata.json`` are read as context of the history file: each yields one note.

A ``ui_messages.json`` **without** its ``api_conversation_history.json`` (what a user
finds exported, or the only file of a task kept) is a usage-only log, like an OpenHands
trajectory: one request per ``api_req_started`` row with token counts (usage, time,
model from the row's ``modelInfo.modelId`` or ``task_metadata.json``, cost), a note for
each ``api_req_started`` row without counts (a call cancelled or failed before usage
arrived), and every other row counted as UI context.
"""

from __future__ import annotations

import os
from typing import Any, Iterator


from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.readers.anthropic import message_of
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import is_list_document, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, load_json, parse_time, type_name
from prefixcache.analyzer.ingest.jsonio import document_bytes, loads as json_loads

FORMAT = "cline-task"
HISTORY, UI, META = "api_conversation_history.json", "ui_messages.json", "task_metadata.json"
NOTE_ENV = ("the last user turn ends with <environment_details> holding the current time: new bytes on every "
            "request (only the tail while old turns are resent unchanged; a client that rewrites them breaks there)")
NOTE_HIDDEN = ("system prompt and tools are not stored in a Cline task folder: an opaque shared prefix "
               "(extra.opaque_prefix_key) sized from usage")


def _load(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            return json_loads(document_bytes(f, path))
    except (OSError, ValueError):
        return None


def api_requests(rows: Any) -> list[dict[str, Any]]:
    """The ``api_req_started`` rows of ``ui_messages.json`` that carry token counts, with ``ts``."""
    out = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, dict) or row.get("say") != "api_req_started" or not isinstance(row.get("text"), str):
            continue
        try:
            info = json_loads(row["text"])
        except ValueError:
            continue
        if isinstance(info, dict) and isinstance(info.get("tokensIn"), int):
            out.append({**info, "ts": row.get("ts")})
    return out


def _usage(info: dict[str, Any]) -> Usage:
    reads, writes = int(info.get("cacheReads") or 0), int(info.get("cacheWrites") or 0)
    return Usage(int(info["tokensIn"]) + reads + writes, reads, writes, info.get("tokensOut"))


def _model(meta: Any, ts: float | None) -> str | None:
    usage = meta.get("model_usage") if isinstance(meta, dict) else None
    best = None
    for entry in usage if isinstance(usage, list) else ():
        if not isinstance(entry, dict) or not entry.get("model_id"):
            continue
        t = entry.get("ts")
        if ts is None or not isinstance(t, (int, float)) or t / 1000.0 <= ts + 1:
            best = str(entry["model_id"])
    return best


@reader(priority=120)
class ClineTaskReader:
    """A Cline / Roo / Kilo task folder, read through its three JSON files."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.97 for the task folder's file names holding the expected JSON shape."""
        base = os.path.basename(name)
        if base in (HISTORY, UI) and is_list_document(head):
            return 0.97
        if base == META and head.lstrip().startswith("{"):
            return 0.97
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        base = os.path.basename(source.name)
        doc = load_json(source)
        folder = os.path.dirname(source.name) or "."
        if base == UI and not os.path.isfile(os.path.join(folder, HISTORY)):
            if not isinstance(doc, list):
                raise FieldError("", f"expected a list of UI rows, got {type_name(doc)}")
            yield from self._usage_only(source.name, doc, _load(os.path.join(folder, META)),
                                        os.path.basename(os.path.abspath(folder)))
            yield RecordsSeen(source.name, len(doc))
            return
        if base != HISTORY:
            what = "UI rows" if base == UI else "task metadata"
            n = len(doc) if isinstance(doc, list) else 1
            yield Skipped(source.name, 0, f"Cline {what}: read as context of {HISTORY} (usage, times, model)", "",
                          False)
            yield RecordsSeen(source.name, n)
            return
        if not isinstance(doc, list):
            raise FieldError("", f"expected a list of messages, got {type_name(doc)}")
        calls = api_requests(_load(os.path.join(folder, UI)))
        meta = _load(os.path.join(folder, META))
        yield from self._requests(source.name, doc, calls, meta, os.path.basename(os.path.abspath(folder)))
        yield RecordsSeen(source.name, len(doc))

    def _usage_only(self, name: str, rows: list, meta: Any, task: str) -> Iterator[Request | Skipped]:
        """One usage-only request per ``api_req_started`` row with token counts (standalone UI rows)."""
        k = 0
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or row.get("say") != "api_req_started":
                continue  # UI context: task text, tool rows, command output, checkpoints
            where = f"[{i}].text"
            try:
                info = json_loads(row["text"]) if isinstance(row.get("text"), str) else None
            except ValueError:  # not JSON, or nested past the depth limit
                yield Skipped(name, i + 1, "api_req_started text is not JSON", where, True)
                continue
            if not isinstance(info, dict) or not isinstance(info.get("tokensIn"), int):
                yield Skipped(name, i + 1, "api_req_started without token counts (the call was cancelled or "
                              "failed before usage arrived)", where, False)
                continue
            try:
                ts = parse_time(row.get("ts"), f"[{i}].ts")
            except FieldError:
                ts = None
            model_info = row.get("modelInfo")
            model = (str(model_info["modelId"]) if isinstance(model_info, dict) and model_info.get("modelId")
                     else _model(meta, ts))
            usage = _usage(info)
            notes = ("prompt not stored in ui_messages.json (no api_conversation_history.json beside it): usage "
                     "only (Anthropic semantics: prompt = tokensIn + cacheWrites + cacheReads)",)
            extra: dict[str, Any] = {"task_id": task}
            if info.get("cost") is not None:
                extra["cost"] = info["cost"]
            observed = {"usage"} | {p for p, v in (("timestamp", ts), ("model", model)) if v}
            yield Request(f"cline:{task}", k, FORMAT, Provenance(name, i + 1, where), model=model, timestamp=ts,
                          usage=usage, observed=frozenset(observed), notes=notes, extra=extra)
            k += 1

    def _requests(self, name: str, doc: list, calls: list, meta: Any, task: str) -> Iterator[Request | Skipped]:
        history: list[Message] = []
        k = 0
        n_assistant = sum(1 for m in doc if isinstance(m, dict) and m.get("role") == "assistant")
        for i, msg in enumerate(doc):
            try:
                converted = message_of({"role": msg.get("role"), "content": msg.get("content", "")}
                                       if isinstance(msg, dict) else msg, f"[{i}]")
            except FieldError as e:
                yield Skipped(name, i + 1, e.reason, e.field, True)
                continue
            if isinstance(msg, dict) and msg.get("role") == "assistant":
                info = calls[k] if k < len(calls) else None
                yield self._request(name, i, tuple(history), info, meta, task, k, len(calls) != n_assistant)
                k += 1
            history.extend(converted)

    def _request(self, name: str, i: int, history: tuple[Message, ...], info: dict | None, meta: Any, task: str,
                 k: int, mismatch: bool) -> Request:
        ts = None
        if info is not None:
            try:
                ts = parse_time(info.get("ts"))
            except FieldError:
                ts = None
        model = _model(meta, ts)
        usage = _usage(info) if info is not None else None
        notes = [NOTE_HIDDEN]
        if usage is not None:
            notes.append(f"usage from ui_messages.json api_req_started #{k + 1}, paired by order (Anthropic "
                         "semantics: prompt = tokensIn + cacheWrites + cacheReads)")
        if history and "<environment_details>" in history[-1].content and "# Current Time" in history[-1].content:
            notes.append(NOTE_ENV)
        if mismatch:
            notes.append("ui_messages.json api_req_started rows and assistant messages differ in number: "
                         "the usage pairing may be shifted")
        observed = {"messages"} | {p for p, v in (("usage", usage), ("timestamp", ts), ("model", model)) if v}
        extra = {"opaque_prefix_key": "cline", "task_id": task}
        if info is not None and info.get("cost") is not None:
            extra["cost"] = info["cost"]
        return Request(f"cline:{task}", k, FORMAT, Provenance(name, i + 1, f"[{i}]"), messages=history,
                       model=model, timestamp=ts, usage=usage, observed=frozenset(observed), notes=tuple(notes),
                       extra=extra)
