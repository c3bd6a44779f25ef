"""Reader for OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Layout (serde ``RolloutItem`` in codex-rs/protocol): one
``{timestamp, type, payload}`` object per line.

* ``session_meta``: session id; ``instructions`` or ``base_instructions.text`` is the
  Responses ``instructions`` → a leading system message (absent in some versions).
* ``turn_context``: the model of the following calls.
* ``response_item``: a Responses-API item. With ``store: false`` Codex re-sends the
  whole item history as ``input`` on every call, so the items are the prompt.
* ``event_msg``: UI events; ``token_count`` (``info.last_token_usage`` or, in older
  versions, the counts on the payload itself) is the usage of the latest call.
* ``compacted``: ``replacement_history`` (or, without it, the summary ``message`` as
  one user message) replaces the history: the prefix resets.

**A model call** is each maximal run of model-output items (``reasoning``, assistant
``message``, ``function_call``, ``custom_tool_call``, ``local_shell_call``,
``web_search_call``); its prompt is every item before the run. The run's items become
one assistant message (reasoning summaries → ``reasoning``, encrypted reasoning →
``reasoning_opaque``), as a chat template would see the turn. Tool outputs become
``tool`` messages. Unknown record and item types are ``Skipped(bad=False)``;
``ghost_snapshot`` items (Codex's undo snapshots, git commits of the work tree) are a
known non-request item: never sent to the model, counted, one note per file.

**What the rollout leaves out.** The tools array is never logged, and most versions
log no base instructions either (``instructions: null``): both are sent on every call.
So every request carries ``extra["opaque_prefix_key"] = "codex:<model>:<cli_version>"``,
a hidden prefix sized from the first call's reported usage, the mechanism Claude Code
uses (:meth:`prefixcache.analyzer.prepare.Preparer.prepare`). Encrypted reasoning items
(``encrypted_content``) are sent back on later calls and billed, but their tokens
cannot be rendered: each run's ``reasoning_output_tokens`` (its ``token_count``) is its
size, and ``extra["opaque_reasoning_tokens"]`` is the sum over the encrypted reasoning
in a request's prompt (``extra["opaque_reasoning_unsized"]`` counts those whose run
logged no usage). The prompt-size check adds them to our count
(:mod:`prefixcache.analyzer.prepare.size_check`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any, Iterator

from prefixcache.analyzer.model import ContentPart, Message, Provenance, Request, Skipped, ToolCall, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, digest, expect, field, parse_time, read_lines, skip
from prefixcache.analyzer.ingest.images import content_part

_OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
#: Record types this reader models; others (e.g. newer ``world_state``) are reported, not guessed at.
_KNOWN_RECORDS = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
#: Responses items that are no part of any prompt: context of the rollout, counted, never a request.
_NON_REQUEST_ITEMS = frozenset({"ghost_snapshot"})
NOTE_TOOLS = "tools are not logged in Codex rollouts"
NOTE_NO_SYSTEM = "instructions not logged by this Codex version: no system message"
NOTE_HIDDEN = ("base instructions and tools are sent but not logged: a hidden prefix (extra.opaque_prefix_key) "
               "sized from the first call's usage")
NOTE_REASONING = ("encrypted reasoning is sent back and billed but cannot be rendered: its size from the usage of the "
                  "calls that produced it (extra.opaque_reasoning_tokens) is added by the prompt-size check only")

NOTE_SEARCH = ("web-search results are billed input but not logged: sized from the usage of the call that ran the search "
               "(extra.server_tool_new / server_tool_ids), added by the prompt-size check only")


def _content(items: Any, path: str) -> tuple[str, tuple[str, ...], tuple[ContentPart, ...]]:
    """Responses content parts → (joined text, text blocks, non-text parts)."""
    if isinstance(items, str):
        return items, (items,), ()
    texts: list[str] = []
    parts: list[ContentPart] = []
    for i, c in enumerate(expect(items, list, path)):
        expect(c, dict, f"{path}[{i}]")
        if c.get("type") in ("input_text", "output_text", "text", "summary_text"):
            texts.append(expect(c.get("text", ""), str, f"{path}[{i}].text"))
        else:
            parts.append(content_part(str(c.get("type")), c))
    return "\n".join(texts), tuple(texts), tuple(parts)


@dataclass
class _Turn:
    """The assistant message being built from one run of output items."""

    path: str
    texts: list[str] = dc_field(default_factory=list)
    calls: list[ToolCall] = dc_field(default_factory=list)
    reasoning: list[str] = dc_field(default_factory=list)
    opaque: bool = False
    parts: list[ContentPart] = dc_field(default_factory=list)
    #: The run's ``reasoning_output_tokens`` (its call's token_count), when logged: the size of
    #: its encrypted reasoning, sent back on later calls.
    reasoning_tokens: int | None = None
    #: Server-side searches run in this call (ids), whose results are billed but not logged.
    searches: list[str] = dc_field(default_factory=list)

    def message(self) -> Message:
        """The run as one assistant message."""
        return Message("assistant", "\n".join(self.texts), tuple(self.texts) if self.texts else None,
                       tool_calls=tuple(self.calls), reasoning="\n".join(self.reasoning) if self.reasoning else None,
                       reasoning_opaque=self.opaque, parts=tuple(self.parts), path=self.path)


def _time(value: Any) -> float | None:
    """A line's ISO-8601 ``timestamp`` in UNIX seconds; None when absent or unreadable."""
    try:
        return parse_time(value)
    except FieldError:
        return None


def _is_output(item: dict[str, Any], path: str) -> bool:
    """Whether a Responses item is model output (part of a call's run); FieldError without a type."""
    kind = field(item, "type", str, path, required=True)
    return kind in _OUTPUT_ITEMS or (kind == "message" and item.get("role") == "assistant")


def _add_output(turn: _Turn, item: dict[str, Any]) -> None:
    """Fold one model-output item into the run's assistant message (FieldError on bad shape)."""
    kind = item.get("type")
    if kind == "message":
        text, blocks, parts = _content(item.get("content", []), "payload.content")
        turn.texts.extend(blocks)
        turn.parts.extend(parts)
    elif kind == "reasoning":
        summary, _, _ = _content(item.get("summary") or [], "payload.summary")
        if summary:
            turn.reasoning.append(summary)
        turn.opaque = turn.opaque or bool(item.get("encrypted_content"))
    elif kind == "function_call":
        args = expect(item.get("arguments", ""), str, "payload.arguments")
        turn.calls.append(ToolCall(str(item.get("call_id", "")), str(item.get("name", "")), args))
    elif kind == "custom_tool_call":
        args = expect(item.get("input", ""), str, "payload.input")
        turn.calls.append(ToolCall(str(item.get("call_id", "")), str(item.get("name", "")), args, kind="custom"))
    else:  # local_shell_call / web_search_call: keep the item's action as the call
        if kind == "web_search_call":
            turn.searches.append(str(item.get("id") or digest(item.get("action", {}))))
        turn.calls.append(ToolCall(str(item.get("call_id") or item.get("id") or ""), str(kind),
                                   digest(item.get("action", {})), arguments_inferred=True, kind=str(kind)))


def _input_message(item: dict[str, Any], path: str) -> Message | None:
    """A non-output item → a prompt message; None for an unknown item type."""
    kind = item.get("type")
    if kind == "message":
        role = field(item, "role", str, "payload", required=True)
        if role not in ("user", "system", "developer"):
            raise FieldError("payload.role", f"unknown message role {role!r}")
        text, blocks, parts = _content(item.get("content", []), "payload.content")
        return Message(role, text, blocks, parts=parts, path=path)  # type: ignore[arg-type]
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        out = item.get("output", "")
        if isinstance(out, dict):  # older rollouts: {"content": ..., "success": ...}
            out = out.get("content", "")
        text, blocks, parts = _content(out, "payload.output")
        return Message("tool", text, None if isinstance(out, str) else blocks, tool_call_id=str(item.get("call_id", "")),
                       parts=parts, path=path)
    return None


def _token_usage(payload: dict[str, Any]) -> Usage | None:
    """``token_count`` event → Usage of the latest call; None when it carries none.

    Reads ``info.last_token_usage`` (the cumulative ``total_token_usage`` is ignored),
    or the counts on the payload itself in older versions. OpenAI semantics: input
    includes cached; newer versions add ``cache_write_input_tokens``.
    """
    info = payload.get("info")
    last, path = (info.get("last_token_usage"), "payload.info.last_token_usage") if isinstance(info, dict) else (None, "")
    if not isinstance(last, dict):
        last, path = (payload, "payload") if "input_tokens" in payload else (None, "")
    if last is None:
        return None
    return Usage(prompt_tokens=field(last, "input_tokens", int, path),
                 cached_tokens=field(last, "cached_input_tokens", int, path),
                 cache_write_tokens=field(last, "cache_write_input_tokens", int, path),
                 output_tokens=field(last, "output_tokens", int, path))


def _reasoning_tokens(payload: dict[str, Any]) -> int | None:
    """``reasoning_output_tokens`` of a ``token_count`` event's latest call, or None."""
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    last = last if isinstance(last, dict) else payload
    n = last.get("reasoning_output_tokens")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


@reader(priority=30)
class CodexReader:
    """Codex CLI rollout JSONL."""

    format = "codex"

    def sniff(self, head: str, name: str) -> float:
        """0.95 for a ``{timestamp, type, payload}`` line of a known rollout type."""
        obj = first_object(head)
        if obj is None or head.lstrip().startswith("["):
            return 0.5 if '"type":"session_meta"' in head.replace(" ", "") else 0.0
        if {"timestamp", "type", "payload"} <= obj.keys() and obj.get("type") in _KNOWN_RECORDS:
            return 0.95
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """One request per model call, yielded once its usage (a later token_count) can be attached."""
        st = _Rollout(source.name)
        yield from read_lines(source, st.add, finish=st.finish)


class _Rollout:
    """History and pending call of one rollout."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.session = Path(source).stem if source != "-" else "stdin"
        self.system: Message | None = None
        self.model: str | None = None
        self.history: list[Message] = []
        self.turn: _Turn | None = None  # open run of output items
        self.pending: dict[str, Any] | None = None  # call waiting for its token_count
        self.index = 0
        self.extra: dict[str, Any] = {}
        self.turns: list[_Turn] = []  # the closed runs in the history (their reasoning sizes)
        self.since_user = 0  # index into self.turns of the first run after the latest user message
        self.ghosts: list[int] = []  # lines of ghost_snapshot items
        self.last_total: str | None = None  # digest of the latest token_count's cumulative usage
        self.waiting: deque[tuple[Usage, int | None]] = deque()  # usages logged before their call's items

    def add(self, line: int, rec: dict[str, Any]) -> Iterator[Request | Skipped]:
        """Apply one rollout line; yields a finished call or a skip. FieldError on a bad shape."""
        kind = field(rec, "type", str, required=True)
        if kind not in _KNOWN_RECORDS:
            yield skip(self.source, line, f"unknown Codex record type {kind!r}", field="type", bad=False)
            return
        payload = field(rec, "payload", dict, required=kind != "compacted", default={})
        if kind == "session_meta":
            self._meta(payload, line)
        elif kind == "turn_context":
            self.model = field(payload, "model", str, "payload", default=self.model)
        elif kind == "event_msg":
            if payload.get("type") == "token_count":
                self._usage(payload)
        elif kind == "response_item":
            yield from self._item(line, rec, payload)
        elif kind == "compacted":
            self._close()
            self._compact(line, payload)

    def _usage(self, payload: dict[str, Any]) -> None:
        """A ``token_count`` event: a new call's usage, or a repeat of the last one (same
        cumulative ``total_token_usage``) or an empty heartbeat (``info: null``), ignored.

        Codex versions differ in where they write it: after the call's output items (0.1xx)
        or before them (0.60: the response's usage event precedes the recorded items). The
        k-th new usage is the k-th call's: it goes to the pending call when that has none
        yet, else it waits for the next call."""
        usage = _token_usage(payload)
        if usage is None:
            return
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        key = digest(total if total is not None else payload)
        if key == self.last_total:
            return
        self.last_total = key
        got = (usage, _reasoning_tokens(payload))
        if self.pending is not None and self.pending["usage"] is None:
            self._attach(self.pending, got)
        else:
            self.waiting.append(got)

    @staticmethod
    def _attach(pending: dict[str, Any], got: tuple[Usage, int | None]) -> None:
        pending["usage"], pending["turn"].reasoning_tokens = got

    def _meta(self, payload: dict[str, Any], line: int) -> None:
        self.session = str(payload.get("id") or self.session)
        text = payload.get("instructions")
        path = "payload.instructions"
        base = payload.get("base_instructions")
        if not isinstance(text, str) and isinstance(base, dict) and isinstance(base.get("text"), str):
            text, path = base["text"], "payload.base_instructions.text"
        if isinstance(text, str) and text:
            self.system = Message("system", text, path=f"line {line}: {path}")
        self.extra = {k: payload[k] for k in ("cli_version", "originator", "model_provider", "source") if k in payload}

    def _item(self, line: int, rec: dict[str, Any], item: dict[str, Any]) -> Iterator[Request | Skipped]:
        path = f"line {line}: payload"
        if _is_output(item, "payload"):
            if self.turn is None:
                yield from self.flush()
                prompt = ((self.system,) if self.system else ()) + tuple(self.history)
                opaque = [t for t in self.turns[self.since_user:] if t.opaque]
                self.turn = _Turn(path)
                self.pending = {"line": line, "messages": prompt, "timestamp": _time(rec.get("timestamp")),
                                "model": self.model, "usage": None, "turn": self.turn,
                                "reasoning": sum(t.reasoning_tokens or 0 for t in opaque),
                                "unsized": sum(t.reasoning_tokens is None for t in opaque),
                                "searches": [i for t in self.turns for i in t.searches]}
                if self.waiting:
                    self._attach(self.pending, self.waiting.popleft())
            _add_output(self.turn, item)
            return
        if item.get("type") in _NON_REQUEST_ITEMS:
            self.ghosts.append(line)
            return
        msg = _input_message(item, path)
        if msg is None:
            yield skip(self.source, line, f"unknown Responses item type {item.get('type')!r}", field="payload.type",
                       bad=False)
            return
        self._close()
        self.history.append(msg)
        if msg.role == "user":
            self.since_user = len(self.turns)

    def _close(self) -> None:
        if self.turn is not None:
            self.history.append(self.turn.message())
            self.turns.append(self.turn)
            self.turn = None

    def _compact(self, line: int, payload: dict[str, Any]) -> None:
        repl = payload.get("replacement_history")
        self.history = []
        self.turns = []
        self.since_user = 0
        if isinstance(repl, list):
            for i, item in enumerate(repl):
                path = f"line {line}: payload.replacement_history[{i}]"
                expect(item, dict, f"payload.replacement_history[{i}]")
                if _is_output(item, f"payload.replacement_history[{i}]"):
                    turn = _Turn(path)
                    _add_output(turn, item)
                    self.history.append(turn.message())
                    self.turns.append(turn)
                elif (msg := _input_message(item, path)) is not None:
                    self.history.append(msg)
        elif isinstance(payload.get("message"), str):
            self.history.append(Message("user", payload["message"], path=f"line {line}: payload.message"))

    def finish(self) -> Iterator[Request | Skipped]:
        """End of the file: the pending call, then one note for the ghost snapshots."""
        yield from self.flush()
        if self.ghosts:
            n = len(self.ghosts)
            yield skip(self.source, self.ghosts[0], f"{n} ghost_snapshot item{'s' if n > 1 else ''} (Codex's undo "
                       "snapshots of the work tree, never sent to the model): known non-request items",
                       field="payload.type", bad=False)

    def flush(self) -> Iterator[Request]:
        """Yield the pending call (if any)."""
        p, self.pending = self.pending, None
        if p is None:
            return
        notes = (NOTE_TOOLS,) if self.system else (NOTE_TOOLS, NOTE_NO_SYSTEM)
        notes += (NOTE_HIDDEN,)
        extra = {**self.extra, "opaque_prefix_key": f"codex:{p['model'] or ''}:{self.extra.get('cli_version', '')}"}
        if p["reasoning"] or p["unsized"]:
            extra["opaque_reasoning_tokens"] = p["reasoning"]
            if p["unsized"]:
                extra["opaque_reasoning_unsized"] = p["unsized"]
            notes += (NOTE_REASONING,)
        if p["searches"]:
            extra["server_tool_ids"] = p["searches"]
        if p["turn"].searches:
            extra["server_tool_new"] = list(p["turn"].searches)
        if p["searches"] or p["turn"].searches:
            notes += (NOTE_SEARCH,)
        observed = {"messages", "timestamp"} | ({"system"} if self.system else set())
        observed |= ({"model"} if p["model"] else set()) | ({"usage"} if p["usage"] else set())
        yield Request(session=self.session, index=self.index, format="codex",
                      provenance=Provenance(self.source, p["line"], "payload", p["line"]), messages=p["messages"],
                      model=p["model"], timestamp=p["timestamp"], usage=p["usage"], observed=frozenset(observed),
                      notes=notes, extra=extra)
        self.index += 1
