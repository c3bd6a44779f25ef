"""OpenHands logs: trajectory event lists and ``log_completions`` per-call files.

**Trajectory** (``openhands-trajectory``; All-Hands-AI/OpenHands event stream,
e.g. ``tests/runtime/trajs/*.json``): a JSON list of action/observation events.
Prompts are not stored; the events an LLM call produced carry
``tool_call_metadata.model_response`` (a LiteLLM ModelResponse with ``usage``).
One request per distinct ``model_response.id`` (parallel tool calls share it),
with usage, model and time only (``observed`` lacks ``messages``). Later events
of the same response, and user / environment events and observations (the
conversation the prompts were built from), are accounted for as trajectory
context; an agent *action* without a model response (e.g. the final ``message``,
which has no tool call) came from an LLM call whose usage is not logged: a note
(``Skipped(bad=False)``).

**log_completions** (``openhands-completions``; ``openhands/llm/llm.py`` with
``log_completions=true``): one JSON file per call,
``{messages, response, args, kwargs{tools, ...}, timestamp, cost,
fncall_messages?, fncall_response?}``. ``messages`` is what was sent (after
OpenHands' function-call conversion for models without native tools), so it is
the prompt; tools come from ``kwargs.tools``.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from prefixcache.analyzer.model import Provenance, Request, Skipped
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import Cut, first_object, head_fields, is_array, is_list_document, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, load_json, parse_time, parse_usage, read_records, type_name
from prefixcache.analyzer.ingest.readers.openai_chat import EXTRA_KEYS, messages_of, notes_for, tool_of

TRAJECTORY = "openhands-trajectory"
COMPLETIONS = "openhands-completions"
#: OpenHands names completion logs ``<model>-<unix time>.json``.
_COMPLETION_NAME = re.compile(r"-\d{10}(\.\d+)?\.json$")


@reader(priority=10)
class OpenHandsTrajectoryReader:
    """One usage-only request per distinct LLM response in an OpenHands event list."""

    format = TRAJECTORY

    def sniff(self, head: str, name: str) -> float:
        """0.9 for a JSON list whose events look like OpenHands (``source`` plus ``action``/``observation``)."""
        if not is_list_document(head):
            return 0.0
        obj = first_object(head)
        if obj is not None and "source" in obj and ("action" in obj or "observation" in obj):
            return 0.9
        return 0.6 if '"tool_call_metadata"' in head else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        doc = load_json(source)
        events = doc.get("trajectory") if isinstance(doc, dict) else doc
        if not isinstance(events, list):
            raise FieldError("", f"expected a list of events, got {type_name(doc)}")
        seen: set[str] = set()
        for i, event in enumerate(events):
            try:
                item = self._event(event, i, source.name, seen)
            except FieldError as e:
                item = Skipped(source.name, i + 1, e.reason, f"[{i}].{e.field}" if e.field else f"[{i}]", True)
            if item is not None:
                yield item
        yield RecordsSeen(source.name, len(events))

    def _event(self, event: Any, i: int, name: str, seen: set[str]) -> Request | Skipped | None:
        """A request for the first event of each LLM response; a note for an agent action
        without one; None for every other event (context of the trajectory)."""
        expect(event, dict, "")
        tcm = field(event, "tool_call_metadata", dict)
        response = field(tcm, "model_response", dict, "tool_call_metadata") if tcm else None
        if response is None:
            if event.get("source") == "agent" and event.get("action"):
                return Skipped(name, i + 1, f"agent action {event['action']!r} has no tool_call_metadata: "
                               "its LLM call's usage is not logged", "tool_call_metadata", False)
            return None
        rid = field(response, "id", str, "tool_call_metadata.model_response", required=True)
        if rid in seen:
            return None
        seen.add(rid)
        where = "tool_call_metadata.model_response"
        usage = parse_usage(response.get("usage"), f"{where}.usage")
        created = parse_time(response.get("created"), f"{where}.created")
        ts = created if created is not None else parse_time(event.get("timestamp"))
        model = field(response, "model", str, where)
        observed = {k for k, v in (("usage", usage), ("timestamp", ts), ("model", model)) if v is not None}
        notes = ("prompt not stored in OpenHands trajectories: usage only",
                 "timestamp from model_response.created (1 s resolution)" if created is not None
                 else "timestamp from the event (local time, read as UTC)")
        extra = {"response_id": rid, "tool_call_id": tcm.get("tool_call_id"), "event_id": event.get("id"),
                 "total_calls_in_response": tcm.get("total_calls_in_response")}
        return Request("", 0, TRAJECTORY, Provenance(name, i + 1, f"[{i}].{where}"), model=model, timestamp=ts,
                       usage=usage, observed=frozenset(observed), notes=notes,
                       extra={k: v for k, v in extra.items() if v is not None})


@reader(priority=11)
class OpenHandsCompletionsReader:
    """Full requests from OpenHands ``log_completions`` files (one call per file)."""

    format = COMPLETIONS

    def sniff(self, head: str, name: str) -> float:
        """0.9 for ``{messages, response, kwargs|fncall_messages|cost}``; 0.6 by file name when
        the head is cut inside a long ``messages`` list."""
        fields = head_fields(head)
        if is_list_document(head) or not is_array(fields.get("messages")):
            return 0.0
        if "response" in fields and fields.keys() & {"kwargs", "fncall_messages", "cost"}:
            return 0.9
        cut = fields.get("messages") == Cut("[") and len(fields) == 1  # fields after the prompt unseen
        by_name = _COMPLETION_NAME.search(name) or "completions" in name.replace("\\", "/").split("/")[:-1]
        return 0.6 if cut and by_name else 0.0

    def parse(self, record: Any, prov: Provenance) -> Iterator[Request]:
        expect(record, dict, "")
        messages = messages_of(record.get("messages"), "messages")
        kwargs = field(record, "kwargs", dict, default={})
        tools = tuple(tool_of(t, f"kwargs.tools[{i}]") for i, t in enumerate(field(kwargs, "tools", list, "kwargs", default=[])))
        response = field(record, "response", dict, default={})
        usage = parse_usage(response.get("usage"), "response.usage")
        ts = parse_time(record.get("timestamp"))
        model = field(response, "model", str, "response") or field(kwargs, "model", str, "kwargs")
        notes = notes_for(messages)
        if record.get("fncall_messages") is not None:
            notes += ("tools were converted to prompt text by OpenHands (fncall_messages holds the native form)",)
        # the messages OpenHands sent, cache_control marks included (it marks them itself)
        observed = {"messages", "tools", "system", "cache_control"} | {k for k, v in (
            ("usage", usage), ("timestamp", ts), ("model", model)) if v is not None}
        extra = {k: kwargs[k] for k in EXTRA_KEYS if kwargs.get(k) is not None}
        if record.get("cost") is not None:
            extra["cost"] = record["cost"]
        yield Request("", 0, COMPLETIONS, prov, messages, tools, model, ts, usage, frozenset(observed), notes,
                      extra=extra)

    def read(self, source: Source) -> Iterator[Request | RecordsSeen]:
        return read_records(source, self.parse)
