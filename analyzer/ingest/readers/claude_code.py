"""Reader for Claude Code session logs (``~/.claude/projects/<cwd>/<sessionId>.jsonl``).

Layout (docs/formats.md): one JSON object per line; ``user`` / ``assistant``
lines are threaded by ``uuid`` / ``parentUuid``; each content block of a streamed
response is its own ``assistant`` line, and all lines of one API call share
``requestId`` (and ``message.id``).

Rules this reader implements:

* **One request per API call** = per ``requestId``. Usage comes from the group's last
  line that has one (``output_tokens`` is only final there), with Anthropic semantics:
  prompt = input + cache_creation + cache_read, cached = cache_read, cache write =
  cache_creation. Timestamp and model come from the group's first line.
* **The prompt of a call** is the thread from the root down to the parent of the
  call's first line (following ``parentUuid``). Lines are folded back into API
  alternation: the blocks of one response (same ``message.id``) form one assistant
  message; a run of user lines (parallel ``tool_result`` lines, a slash command and
  its expanded body) forms one user turn, which becomes one ``tool`` message per
  ``tool_result`` followed by one user message holding the remaining text blocks.
  Blocks map exactly as in the ``anthropic-messages`` reader (:func:`.anthropic.message_of`:
  ``tool_use.input`` → ``json.dumps`` arguments, ``thinking`` → reasoning), so a log and
  a proxy capture of the same call give the same messages.
* **Sessions**: the main thread is ``<sessionId>``; every sidechain root (a Task
  subagent, ``isSidechain: true``) starts its own session ``<sessionId>/agent-<agentId>``
  when the line names its agent, else ``<sessionId>/sidechain-<n>`` (n from 1 in file order).
* **Hidden prefix**: the system prompt and the tools are not logged. Requests carry
  ``opaque_prefix_tokens=None`` and ``extra["opaque_prefix_key"]`` =
  ``claude-code:main`` / ``claude-code:sidechain``; its length is only known from
  usage (prompt tokens minus the rendered messages), which the render/tokenize layer
  can compute because it knows the messages' token count.
* **Send time**: ``extra["sent_at"]`` is the timestamp of the call's parent line (the
  user / tool-result line the call answers), when logged; the request's ``timestamp``
  is its response's first line. Cache models use both: a write is visible to a call
  only if its response had landed before the call was sent.
* **Records**: every line is one. Summary, system, snapshot, queue and progress lines
  (and user lines) produce no request and are not skipped; synthetic API-error lines
  and assistant lines without a request id are ``Skipped(bad=False)``; unknown line
  types are ``Skipped(bad=False)``; unparsable lines are bad ``Skipped``.

The thread graph is kept in memory (converted blocks, not raw lines: about the file's
size) because a call's prompt is only known by walking its ancestors; requests are
yielded at the end of the file in order of their first line. Folding is incremental
(each call resumes from its session's previous call), so successive requests share
their Message objects and a file is read in linear time (2,000 calls: 0.2 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.readers.anthropic import message_of
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, field, parse_time, parse_usage, read_lines, skip

#: Line types that are records but never a model call nor prompt content (docs/formats.md).
_QUIET_TYPES = frozenset({"summary", "system", "file-history-snapshot", "queue-operation", "progress"})

NOTE_OPAQUE = ("system prompt and tools are not logged: an opaque shared prefix (extra.opaque_prefix_key) "
               "whose length is only known from usage (prompt_tokens minus the rendered messages)")
NOTE_FOLD = "messages rebuilt from the parentUuid thread; response blocks and consecutive user lines merged"

_OBSERVED = frozenset({"messages", "usage", "timestamp", "model"})


@dataclass
class _Node:
    """One threaded line: its role (None = not sent to the model) and its messages.

    ``messages`` is the line's ``message`` mapped like an Anthropic request message
    (:func:`.anthropic.message_of`): one assistant message, or a user line's tool
    messages followed by its user message.
    """

    line: int
    parent: str | None
    role: str | None
    messages: tuple[Message, ...] = ()
    msg_id: str = ""
    sidechain: bool = False
    session: str = ""
    agent: str = ""
    time: float | None = None  # the line's timestamp (UNIX seconds)


_Turn = tuple  # (role, message id, tuple of the lines' messages): one API message in the making


@dataclass(frozen=True)
class _Fold:
    """Messages of a thread prefix: ``closed`` are final; ``open`` (≤ 2 turns) may still grow.

    Only the last turn can grow (a response's next block, the next user line), or the
    one before it when a response streams around its own tool results. Folding is
    incremental so successive calls of a thread share their Message objects.
    """

    closed: tuple[Message, ...] = ()
    open: tuple[_Turn, ...] = ()

    def step(self, node: _Node) -> "_Fold":
        """The fold after one more threaded line (merge rules in the module docstring)."""
        turns = list(self.open)
        if node.role == "assistant":
            if turns and turns[-1][0] == "assistant" and turns[-1][1] == node.msg_id:
                turns[-1] = (*turns[-1][:2], turns[-1][2] + node.messages)
            elif (node.msg_id and len(turns) == 2 and turns[0][0] == "assistant" and turns[0][1] == node.msg_id
                  and all(m.role == "tool" for m in turns[1][2])):
                turns[0] = (*turns[0][:2], turns[0][2] + node.messages)
            else:
                turns.append(("assistant", node.msg_id, node.messages))
        elif turns and turns[-1][0] == "user":
            turns[-1] = ("user", "", turns[-1][2] + node.messages)
        else:
            turns.append(("user", "", node.messages))
        closed = self.closed
        while len(turns) > 2:
            closed += _merge(turns.pop(0))
        return _Fold(closed, tuple(turns))

    def messages(self) -> tuple[Message, ...]:
        """All messages of the prefix, open turns included."""
        return self.closed + tuple(m for t in self.open for m in _merge(t))


def _merge(turn: _Turn) -> tuple[Message, ...]:
    """One turn's line messages → API messages.

    Assistant: the lines' blocks joined into one message. User: every tool message (in
    line order), then one user message with all remaining text blocks and parts.
    """
    role, _, msgs = turn
    if len(msgs) == 1 and (role == "assistant" or msgs[0].role == "tool"):
        return msgs
    tools = tuple(m for m in msgs if m.role == "tool")
    rest = [m for m in msgs if m.role != "tool"]
    if not rest:
        return tools
    if len(rest) == 1 and (role == "assistant" or not tools):
        return tools + tuple(rest)
    blocks = tuple(b for m in rest for b in (m.text_blocks if m.text_blocks is not None else (m.content,)))
    reasoning = [m.reasoning for m in rest if m.reasoning is not None]
    merged = Message(
        role=rest[0].role, content="\n".join(blocks), text_blocks=blocks,
        tool_calls=tuple(c for m in rest for c in m.tool_calls),
        reasoning="\n".join(reasoning) if reasoning else None, reasoning_opaque=any(m.reasoning_opaque for m in rest),
        parts=tuple(p for m in rest for p in m.parts),
        cache_control=next((m.cache_control for m in reversed(rest) if m.cache_control), None), path=rest[0].path)
    return tools + (merged,)


@dataclass
class _Call:
    """One API call (one ``requestId``): metadata of its first line, usage of its latest."""

    first: int
    parent: str | None
    node: _Node
    model: str | None
    timestamp: float | None
    version: Any
    usage: Usage | None = None


@reader(priority=40)
class ClaudeCodeReader:
    """Claude Code ``projects/*.jsonl`` session logs (and subagent files)."""

    format = "claude-code"

    def sniff(self, head: str, name: str) -> float:
        """0.95 when the first line is a threaded Claude Code line, 0.9 for a leading summary /
        snapshot / queue line, 0.8 when later lines of the head are threaded lines."""
        if head.lstrip().startswith("["):
            return 0.0
        obj = first_object(head)
        if obj is not None and "parentUuid" in obj and "sessionId" in obj:
            return 0.95
        if obj is not None and obj.get("type") in ("summary", "file-history-snapshot", "queue-operation") and (
                "leafUuid" in obj or "messageId" in obj or "sessionId" in obj):
            return 0.9
        return 0.8 if '"parentUuid"' in head and '"sessionId"' in head and '"isSidechain"' in head else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """Stream the lines, then yield one request per ``requestId`` in file order."""
        state = _State(source.name)
        yield from read_lines(source, state.add, finish=state.requests)


class _State:
    """Thread graph and call groups of one file."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.nodes: dict[str, _Node] = {}
        self.calls: dict[str, _Call] = {}
        self.side_count = 0  # unnamed sidechain roots seen
        self.memo: dict[str, _Fold] = {}  # parent uuid of a session's latest call → fold of its thread
        self.latest: dict[str, str] = {}  # session → its memo key
        self.stem = Path(source).stem if source != "-" else "stdin"

    def add(self, line: int, rec: dict[str, Any]) -> Iterator[Skipped]:
        """Record one line; yields a Skipped when it is deliberately not a call. FieldError on a bad shape."""
        kind = field(rec, "type", str, required=True)
        if kind in _QUIET_TYPES:
            self._thread(line, rec, None, ())
            return
        if kind not in ("user", "assistant"):
            self._thread(line, rec, None, ())  # keep the thread walkable through it
            yield skip(self.source, line, f"unknown Claude Code line type {kind!r}", field="type", bad=False)
            return
        message = field(rec, "message", dict, required=True)
        if kind == "assistant" and (rec.get("isApiErrorMessage") or rec.get("error") and not rec.get("requestId")):
            self._thread(line, rec, None, ())
            status = rec.get("apiErrorStatus") or rec.get("error") or "error"
            yield skip(self.source, line, f"synthetic API error message ({status}): no completed model call",
                       field="isApiErrorMessage", bad=False)
            return
        try:
            msgs = tuple(message_of({"role": kind, "content": message.get("content", "")}, f"line {line}: message"))
        except FieldError as e:  # keep the line in the thread (its children stay reachable), without content
            self._thread(line, rec, None, ())
            raise FieldError(e.field.split(": ", 1)[-1], e.reason) from None
        node = self._thread(line, rec, kind, msgs)
        if kind == "user":
            return
        rid = rec.get("requestId") or ""
        if not isinstance(rid, str) or not rid:
            yield skip(self.source, line, f"assistant line without requestId (model {message.get('model')!r}): "
                       "not an API call", field="requestId", bad=False)
            return
        call = self.calls.get(rid)
        if call is None:
            model = message.get("model")
            call = self.calls[rid] = _Call(line, node.parent, node, model if isinstance(model, str) else None,
                                           _time(rec.get("timestamp")), rec.get("version"))
        try:  # an unreadable usage spoils only the usage: the blocks stay in the thread
            call.usage = parse_usage(message.get("usage"), "message.usage") or call.usage
        except FieldError as e:
            yield skip(self.source, line, f"{e.reason} (the call keeps its other lines' usage)", field=e.field)

    def _thread(self, line: int, rec: dict[str, Any], role: str | None, msgs: tuple[Message, ...]) -> _Node:
        uuid, parent = rec.get("uuid"), rec.get("parentUuid")
        side = bool(rec.get("isSidechain"))
        msg = rec.get("message")
        node = _Node(line, parent if isinstance(parent, str) else None, role, msgs,
                     msg_id=str(msg.get("id") or "") if isinstance(msg, dict) else "", sidechain=side,
                     agent=str(rec.get("agentId") or ""), time=_time(rec.get("timestamp")))
        node.session = self._session(node, rec)
        if isinstance(uuid, str):
            self.nodes[uuid] = node
        return node

    def _session(self, node: _Node, rec: dict[str, Any]) -> str:
        sid = str(rec.get("sessionId") or self.stem)
        if not node.sidechain:
            return sid
        parent = self.nodes.get(node.parent) if node.parent is not None else None
        if parent is not None and parent.sidechain:
            return parent.session
        if node.agent:
            return f"{sid}/agent-{node.agent}"
        self.side_count += 1
        return f"{sid}/sidechain-{self.side_count}"

    def _prompt(self, call: _Call) -> tuple[tuple[Message, ...], bool]:
        """Messages of the thread above ``call`` and whether a parent line was missing.

        Walks up from the call's parent to the nearest memoized fold (the latest call of
        the same session, normally a few lines up), folds down from there, and memoizes
        the result in place of the session's previous one: linear in the file overall.
        """
        path: list[_Node] = []
        base, missing, cur = _Fold(), False, call.parent
        while cur is not None:
            if cur in self.memo:
                base = self.memo[cur]
                break
            node = self.nodes.get(cur)
            if node is None or len(path) > len(self.nodes):  # missing parent, or a uuid cycle
                missing = True
                break
            path.append(node)
            cur = node.parent
        fold = base
        for node in reversed(path):
            if node.role is not None:
                fold = fold.step(node)
        if call.parent is not None:
            old = self.latest.get(call.node.session)
            if old is not None and old != call.parent:
                self.memo.pop(old, None)
            self.memo[call.parent] = fold
            self.latest[call.node.session] = call.parent
        return fold.messages(), missing

    def requests(self) -> Iterator[Request]:
        """One Request per call, in order of its first line."""
        count: dict[str, int] = {}
        for rid, call in self.calls.items():
            messages, missing = self._prompt(call)
            session = call.node.session
            index = count.get(session, 0)
            count[session] = index + 1
            notes = (NOTE_OPAQUE, NOTE_FOLD)
            if missing:
                notes += ("a parent line is missing from the file: the prompt's earlier history is unknown",)
            observed = _OBSERVED - ({"usage"} if call.usage is None else set()) - (
                {"timestamp"} if call.timestamp is None else set()) - ({"model"} if call.model is None else set())
            extra = {"opaque_prefix_key": "claude-code:sidechain" if call.node.sidechain else "claude-code:main",
                     "requestId": rid, "message_id": call.node.msg_id, "claude_code_version": call.version}
            parent = self.nodes.get(call.parent) if call.parent is not None else None
            if parent is not None and parent.time is not None:
                extra["sent_at"] = parent.time  # the call was sent after its parent line (timestamp: the response)
            yield Request(
                session=session, index=index, format="claude-code",
                provenance=Provenance(self.source, call.first, "message", call.first), messages=messages,
                model=call.model, timestamp=call.timestamp, usage=call.usage, observed=observed,
                notes=notes, extra=extra,
            )


def _time(value: Any) -> float | None:
    """A line's ISO-8601 ``timestamp`` in UNIX seconds; None when absent or unreadable."""
    try:
        return parse_time(value)
    except FieldError:
        return None
