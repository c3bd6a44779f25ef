"""Reader for SWE-agent trajectories (``*.traj``, one JSON document).

Layout (SWE-agent ``sweagent/types.py``): ``{environment,
trajectory[], history[], info, replay_config}``. Which messages a step sent:

* ``trajectory[i].query`` (SWE-agent ≥ 1.0) is the message list sent at step i: taken as is.
* ``trajectory[i].messages`` (older files) is the agent's *processed history after*
  step i: it ends with step i's own response and observation (checked: its last
  assistant message is ``trajectory[i].response``). Step i's prompt is then the
  processed history after step i-1, i.e. ``trajectory[i-1].messages``, and for step 0
  ``trajectory[0].messages`` cut before its response. History processors (e.g.
  ``last_n_observations``) rewrite old observations to ``Old environment output: (N
  lines omitted)``, so these prompts are *not* append-only, exactly as sent.
* Neither: request k is ``history`` before its k-th assistant message (raw history,
  no history processors applied: inferred, noted).

Messages keep OpenAI shape (``tool_calls`` as logged, ``tool_call_ids`` → the tool
message's ``tool_call_id``, ``thinking_blocks`` → reasoning). Tool schemas are not
saved (only bundle names in ``replay_config.agent.tools.bundles``); there is no
per-call usage. Records are trajectory steps (history items when rebuilding; a final
step with no answer in history, e.g. the call that answered ``submit``, is record
``len(history) + i + 1`` and is sent the whole history). ``info.model_stats.api_calls``
is checked against what was read: calls the file has no messages for are a skip.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.model import Message, Provenance, Request, Skipped
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import reader
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, load_json, skip
from prefixcache.analyzer.ingest.readers.openai_chat import message_of
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

#: SWE-agent model names that are not LLMs (replays, humans, tests).
_NOT_MODELS = frozenset({"replay", "human", "human_thought", "instant_empty_submit"})
NOTE_TOOLS = "tool schemas are not saved in .traj files (only tool bundle names)"


def chat_message(m: Any, path: str) -> Message:
    """One OpenAI-style chat message dict (SWE-agent / mini-swe-agent) → Message.

    The OpenAI mapping of :func:`.openai_chat.message_of` (content parts, ``tool_calls``
    as logged, ``reasoning_content``, ``cache_control``), plus SWE-agent's
    ``tool_call_ids`` (→ ``tool_call_id``) and ``thinking_blocks`` (→ reasoning).
    Agent bookkeeping (``extra``, ``agent``, ``message_type``...) is not sent and is
    ignored. FieldError on a bad shape.
    """
    msg = message_of(m, path)
    ids = m.get("tool_call_ids")
    if msg.tool_call_id is None and isinstance(ids, list) and ids:
        msg = replace(msg, tool_call_id=str(ids[0]))
    thinking = m.get("thinking_blocks")
    if msg.reasoning is None and isinstance(thinking, list) and thinking:
        text = "\n".join(str(b.get("thinking", "")) for b in thinking if isinstance(b, dict))
        msg = replace(msg, reasoning=text)
    return msg


def chat_messages(raw: Sequence[Any], path: str) -> tuple[Message, ...]:
    """A list of chat message dicts → Messages, ``path[i]`` naming each."""
    return tuple(chat_message(m, f"{path}[{i}]") for i, m in enumerate(raw))


def _own_response(step: dict[str, Any], msgs: list[Any]) -> int | None:
    """Index of step's own response in ``msgs`` when the list is the history *after* the step."""
    for k in range(len(msgs) - 1, -1, -1):
        m = msgs[k]
        if isinstance(m, dict) and m.get("role") == "assistant":
            same = (m.get("content") == step.get("response") or
                    (step.get("thought") and m.get("thought") == step.get("thought")
                     and m.get("action") == step.get("action")))
            return k if same else None
    return None


def _agent_config(doc: dict[str, Any], key: str) -> Any:
    """``replay_config.agent.<key>`` (the config may be logged as a JSON string); None if absent."""
    cfg = doc.get("replay_config")
    if isinstance(cfg, str):
        try:
            cfg = json_loads(cfg, lenient=True)
        except ValueError:
            return None
    agent = cfg.get("agent") if isinstance(cfg, dict) else None
    return agent.get(key) if isinstance(agent, dict) else None


def _model(doc: dict[str, Any]) -> str | None:
    """The configured model name, unless it is a replay/human pseudo-model."""
    model = _agent_config(doc, "model")
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name not in _NOT_MODELS else None


@reader(priority=50)
class SweAgentReader:
    """SWE-agent ``.traj`` trajectories."""

    format = "swe-agent"

    def sniff(self, head: str, name: str) -> float:
        """0.7 for an object whose first key is ``trajectory``; +0.1 with ``history`` or
        ``replay_config`` in the head, +0.1 for a ``.traj`` name."""
        text = head.lstrip()
        if not text.startswith("{") or '"trajectory"' not in text[:200]:
            return 0.0
        score = 0.7 + (0.1 if '"history"' in text or '"replay_config"' in text else 0.0)
        return round(score + (0.1 if name.endswith(".traj") else 0.0), 2)

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """One request per trajectory step (or per assistant message of ``history``)."""
        doc = load_json(source)
        if not isinstance(doc, dict):
            raise InputError("expected a SWE-agent trajectory object", source.name, 0)
        try:
            steps = field(doc, "trajectory", list, default=[])
            history = field(doc, "history", list, default=[])
        except FieldError as e:
            raise InputError(e.reason, source.name, 0, e.field) from None
        base = {"session": Path(source.name).stem if source.name != "-" else "stdin", "format": self.format,
                "model": _model(doc), "tools": ()}
        bundles = _bundles(doc)
        extra = {"tool_bundles": bundles} if bundles else {}
        calls = 0
        if any(isinstance(s, dict) and ("query" in s or "messages" in s) for s in steps):
            for item in self._steps(source.name, steps, base, extra):
                calls += 1
                yield item
            records = len(steps)
        else:
            for item in self._history(source.name, history, steps, base, extra):
                calls += isinstance(item, Request) or item.field.startswith("trajectory")  # not a bad history item
                yield item
            records = len(history)
        missing = api_calls_unread(source.name, doc.get("info"), calls)
        if missing is not None:
            yield missing
        yield RecordsSeen(source.name, records)

    def _steps(self, name: str, steps: list[Any], base: dict[str, Any], extra: dict[str, Any]) -> Iterator[Request | Skipped]:
        prev: list[Any] | None = None  # previous step's post-step history
        index = 0
        for i, step in enumerate(steps):
            try:
                expect(step, dict, f"trajectory[{i}]")
                if isinstance(step.get("query"), list):
                    raw, path, note = step["query"], f"trajectory[{i}].query", "messages: the step's query as sent"
                    prev = None
                else:
                    msgs = field(step, "messages", list, f"trajectory[{i}]", required=True)
                    cut = _own_response(step, msgs)
                    if cut is None:
                        raw, path, note = msgs, f"trajectory[{i}].messages", "messages: the step's message list"
                    elif prev is not None and len(prev) == cut:
                        raw, path = prev, f"trajectory[{i - 1}].messages"
                        note = "messages: processed history after the previous step (what this step was sent)"
                    else:
                        raw, path = msgs[:cut], f"trajectory[{i}].messages"
                        note = "messages: this step's history cut before its own response"
                    prev = msgs if cut is not None else None
                messages = chat_messages(raw, path)
            except FieldError as e:
                prev = None
                yield skip(name, i + 1, e)
                continue
            yield Request(**base, index=index, provenance=Provenance(name, i + 1, f"trajectory[{i}]"),
                          messages=messages, observed=frozenset({"system", "messages"}),
                          notes=(note, NOTE_TOOLS, "no per-call usage in .traj files"), extra=extra)
            index += 1

    def _history(self, name: str, history: list[Any], steps: list[Any], base: dict[str, Any],
                 extra: dict[str, Any]) -> Iterator[Request | Skipped]:
        """One request per assistant message of ``history``; then the trajectory steps
        history has no answer for (the call that answered ``submit`` leaves none): the
        first of them was sent the whole history, any later one is a skip."""
        done: list[Message] = []
        index = 0
        for i, item in enumerate(history):
            try:
                msg = chat_message(item, f"history[{i}]")
            except FieldError as e:
                yield skip(name, i + 1, e)
                continue
            if msg.role == "assistant":
                yield Request(**base, index=index, provenance=Provenance(name, i + 1, f"history[{i}]"),
                              messages=tuple(done), observed=frozenset({"system"}),
                              notes=("messages rebuilt from history (no per-step messages; history processors "
                                     "not applied)", NOTE_TOOLS, "no per-call usage in .traj files"), extra=extra)
                index += 1
            done.append(msg)
        for i in range(index, len(steps)):
            if i > index or not done:
                yield skip(name, len(history) + i + 1, f"trajectory[{i}] has no answer in history"
                           + (" and follows another such step" if done else "") + ": the prompt it was sent is "
                           "not in the file", field=f"trajectory[{i}]", bad=False)
                continue
            yield Request(**base, index=index, provenance=Provenance(name, len(history) + i + 1, f"trajectory[{i}]"),
                          messages=tuple(done), observed=frozenset({"system"}),
                          notes=(f"trajectory[{i}] (the final call) has no assistant message in history: its prompt "
                                 "is the whole history", NOTE_TOOLS, "no per-call usage in .traj files"), extra=extra)


def api_calls_unread(name: str, info: Any, read: int) -> Skipped | None:
    """A skip (not bad) when ``info.model_stats.api_calls`` (SWE-agent, mini-swe-agent) counts
    more calls than the ``read`` requests and skips of the file, else None: every call the
    file records is a request or a skip with a reason."""
    stats = info.get("model_stats") if isinstance(info, dict) else None
    calls = stats.get("api_calls") if isinstance(stats, dict) else None
    if not isinstance(calls, int) or isinstance(calls, bool) or calls <= read:
        return None
    return skip(name, 0, f"info.model_stats.api_calls={calls} but the file holds {read} call(s): "
                f"{calls - read} call(s) left no messages (failed or not logged)",
                field="info.model_stats.api_calls", bad=False)


def _bundles(doc: dict[str, Any]) -> list[str]:
    """Tool bundle paths of ``replay_config.agent.tools.bundles`` (the only trace of the tools)."""
    tools = _agent_config(doc, "tools")
    bundles = tools.get("bundles") if isinstance(tools, dict) else None
    if not isinstance(bundles, list):
        return []
    return [str(b["path"]) for b in bundles if isinstance(b, dict) and b.get("path")]
