"""Reader for mini-swe-agent trajectories (``*.traj.json``, one JSON document).

Layouts (SWE-agent/mini-swe-agent ``agents/default.py``,
``models/litellm_model.py``):

* **v1.x** ``{info{model_stats, config{model{model_name, set_cache_control...}},
  mini_version, exit_status}, messages[], trajectory_format, instance_id}``. The
  message list is append-only; request k is every message before the k-th assistant
  message, with ``extra`` stripped (as the agent sends it). Usage comes from that
  assistant's raw response (``extra.response.usage``: ``prompt_tokens``, cached =
  ``prompt_tokens_details.cached_tokens`` / DeepSeek ``prompt_cache_hit_tokens`` /
  ``cache_read_input_tokens``; ``cache_creation_input_tokens`` = cache write), the
  model from ``response.model`` and the time from ``extra.timestamp`` (when the response
  arrived). In tool-calling mode the agent sends one constant tool, ``BASH_TOOL``
  (``models/utils/actions_toolcall.py``), never saved in the trajectory: requests
  carry that schema as an *inferred* part (``"tools"`` not in ``observed``).
* **Legacy** (pre-1.0): a bare list of ``{role, content}``; one request per assistant
  message, no usage, text-based actions (no tools).

Records are the items of the message list. The final ``exit`` message is not sent to
the model: ``Skipped(bad=False)`` with its exit status. A call that failed leaves no
assistant message (``info.model_stats.api_calls`` counts it): the skip says so, and
without an exit message a skip of its own does (every call the file records is a
request or a skip with a reason).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, ToolDef
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, load_json, parse_usage, skip
from prefixcache.analyzer.ingest.readers.swe_agent import api_calls_unread, chat_message

NOTE_TOOLS = "tools inferred: mini-swe-agent's constant bash tool schema is added at send time, not saved"

#: The schema mini-swe-agent (2.x, tool-calling mode) sends with every call.
_BASH_PARAMETERS = {"type": "object", "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
                    "required": ["command"]}
BASH_TOOL = ToolDef(
    name="bash", description="Execute a bash command", parameters=_BASH_PARAMETERS,
    schema={"type": "function", "function": {"name": "bash", "description": "Execute a bash command",
                                             "parameters": _BASH_PARAMETERS}},
    path="tools[0]",
)
NOTE_TEXT = "text-based actions (no tool calls in the log): no tools sent"
NOTE_LEGACY = "legacy mini-swe-agent list: text-based actions, no tools, no usage"


@reader(priority=60)
class MiniSweAgentReader:
    """mini-swe-agent ``.traj.json`` (v1.x object or legacy message list)."""

    format = "mini-swe-agent"

    def sniff(self, head: str, name: str) -> float:
        """0.95 with ``trajectory_format: mini-swe-agent…``; 0.85 for ``info.mini_version`` +
        ``messages``; 0.5–0.7 for a bare list of ``{role, content}`` (legacy)."""
        text = head.lstrip()
        compact = text.replace(" ", "")
        if text.startswith("{"):
            if '"trajectory_format":"mini-swe-agent' in compact:
                return 0.95
            return 0.85 if '"mini_version"' in text and '"messages"' in text else 0.0
        obj = first_object(head) if text.startswith("[") else None
        if obj is not None and set(obj) == {"role", "content"}:
            return 0.7 if name.endswith(".traj.json") else 0.5
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """One request per assistant message; InputError for a document of another shape."""
        doc = load_json(source)
        session = Path(source.name).name.split(".")[0] if source.name != "-" else "stdin"
        if isinstance(doc, list):
            yield from self._messages(source.name, doc, session, None, {}, legacy=True)
            yield RecordsSeen(source.name, len(doc))
            return
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise InputError("expected a mini-swe-agent trajectory (object with messages, or a list)",
                             source.name, 0, "messages")
        info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
        cfg = info.get("config", {}).get("model", {}) if isinstance(info.get("config"), dict) else {}
        model = cfg.get("model_name") if isinstance(cfg, dict) else None
        session = str(doc.get("instance_id") or session)
        meta = {"info": info, "set_cache_control": cfg.get("set_cache_control") if isinstance(cfg, dict) else None}
        read, explained = 0, False
        for item in self._messages(source.name, doc["messages"], session, model, meta, legacy=False):
            read += isinstance(item, Request)
            explained |= isinstance(item, Skipped) and "api_calls=" in item.reason
            yield item
        missing = None if explained else api_calls_unread(source.name, info, read)
        if missing is not None:
            yield missing
        yield RecordsSeen(source.name, len(doc["messages"]))

    def _messages(self, name: str, raw: list[Any], session: str, model: Any, meta: dict[str, Any], *,
                  legacy: bool) -> Iterator[Request | Skipped]:
        done: list[Message] = []
        calls = any(isinstance(m, dict) and m.get("tool_calls") for m in raw)
        notes = [NOTE_LEGACY] if legacy else [NOTE_TOOLS if calls else NOTE_TEXT]
        meta = {**meta, "tools": (BASH_TOOL,) if calls and not legacy else ()}
        if meta.get("set_cache_control"):
            notes.append(f"cache_control added at send time ({meta['set_cache_control']}), not in the log")
        lost = False
        for j, m in enumerate(raw):
            path = f"messages[{j}]" if not legacy else f"[{j}]"
            if isinstance(m, dict) and m.get("role") == "exit":
                yield skip(name, j + 1, _exit_reason(m, raw, meta.get("info", {})), field=f"{path}.role", bad=False)
                continue
            try:
                msg = chat_message(m, path)
                req = self._request(name, j, m, done, session, model, notes, meta["tools"]) if msg.role == "assistant" else None
            except FieldError as e:
                lost = True
                yield skip(name, j + 1, e)
                continue
            if req is not None:
                if lost:
                    req = _with_note(req, "an earlier message was unreadable: this prompt lacks it")
                yield req
            done.append(msg)

    def _request(self, name: str, j: int, m: dict[str, Any], done: list[Message], session: str, model: Any,
                 notes: list[str], tools: tuple[ToolDef, ...]) -> Request:
        """The call answered by assistant message ``j``: every message before it, ``extra`` stripped."""
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
        usage = parse_usage(response.get("usage"), f"messages[{j}].extra.response.usage")
        ts = extra.get("timestamp")
        served = response.get("model") if isinstance(response.get("model"), str) else None
        observed = {"system", "messages"} | ({"usage"} if usage else set()) | (
            {"timestamp"} if isinstance(ts, (int, float)) else set()) | ({"model"} if served else set())
        index = sum(1 for x in done if x.role == "assistant")
        return Request(
            session=session, index=index, format=self.format, provenance=Provenance(name, j + 1, f"messages[{j}]"),
            messages=tuple(done), tools=tools, model=served or (model if isinstance(model, str) else None),
            timestamp=float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None,
            usage=usage, observed=frozenset(observed), notes=tuple(notes),
            extra={"response_id": response["id"]} if isinstance(response.get("id"), str) else {},
        )


def _with_note(req: Request, note: str) -> Request:
    return replace(req, notes=req.notes + (note,))


def _exit_reason(m: dict[str, Any], raw: list[Any], info: dict[str, Any]) -> str:
    """Why the exit message is not a request, with the failed-call evidence when present."""
    extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
    status = extra.get("exit_status") or info.get("exit_status") or "unknown"
    reason = f"exit message (exit status {status}): not sent to the model"
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    calls = stats.get("api_calls")
    answered = sum(1 for x in raw if isinstance(x, dict) and x.get("role") == "assistant")
    if isinstance(calls, int) and calls > answered:
        error = str(extra.get("exception_str") or m.get("content") or "")[:160]
        reason += (f"; info.model_stats.api_calls={calls} but {answered} responses were logged: the last "
                   f"{calls - answered} call(s) failed with no response ({error})")
    return reason
