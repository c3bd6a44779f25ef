"""Reader for Aider's ``.aider.llm.history`` (``--llm-history-file``).

Layout (aider ``io.py`` ``log_llm_history`` and ``utils.py`` ``format_messages``): a
header line ``TO LLM <ISO time>`` then every message of the call, each introduced by
a ``-------`` line, each of its lines prefixed with the upper-cased role and a space
(``SYSTEM ``, ``USER ``, ``ASSISTANT ``); then ``LLM RESPONSE <ISO time>`` and the
reply's lines prefixed ``ASSISTANT ``. The **whole prompt of every call** is logged,
system prompt included (its ``Current date:`` line is a volatile value at the top of
the prefix, which lint reports when the date changes).

Records: every ``TO LLM`` block (one request; record = its header line) and every
``LLM RESPONSE`` block (the reply, read into the call before it: ``extra["response_line"]``;
a call without one gets a note); text before the first header is a bad ``Skipped``. Times are local time without a zone, read as UTC.

What it cannot know: the model, tools (Aider sends none by default; its edit formats
are in the prompt text), usage, and exact line endings: content is rebuilt by joining
the lines with ``\\n`` (``str.splitlines`` also split on ``\\r``, form feeds and
``\\u2028``; a trailing newline is lost). Sessions come from message chaining.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterator

from prefixcache.analyzer.model import Message, Provenance, Request, Skipped
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import reader
from prefixcache.analyzer.ingest.jsonio import FieldError, parse_time

FORMAT = "aider"
_HEADER = re.compile(r"^(TO LLM|LLM RESPONSE) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*)\s*$")
_ROLES = {"SYSTEM": "system", "USER": "user", "ASSISTANT": "assistant", "TOOL": "tool", "FUNCTION": "tool"}
SEPARATOR = "-------"
NOTE = ("prompt rebuilt from the history text: lines joined with \\n (original line endings and a trailing "
        "newline are unknown); no model, tools or usage are logged")


class _Block:
    """One ``TO LLM`` / ``LLM RESPONSE`` block being read."""

    def __init__(self, kind: str, line: int, stamp: str) -> None:
        self.kind, self.line, self.stamp = kind, line, stamp
        self.messages: list[tuple[str, list[str], int]] = []  # (role, lines, first line)
        self.stray = 0  # lines without a role prefix


@reader(priority=100)
class AiderHistoryReader:
    """Aider ``.aider.llm.history`` files: one request per ``TO LLM`` block."""

    format = FORMAT

    def sniff(self, head: str, name: str) -> float:
        """0.95 when the file starts with a ``TO LLM <time>`` header; 0.6 for the file name alone."""
        first = head.lstrip("\ufeff").split("\n", 1)[0]
        if _HEADER.match(first):
            return 0.95
        return 0.6 if name.endswith(".aider.llm.history") and "\nTO LLM " in head else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """Stream the blocks; a call is yielded once its reply block (or the next call) is read."""
        n = 0
        block: _Block | None = None
        held: list[Request] = []  # the call waiting for its LLM RESPONSE block
        with source.open() as f:
            for line_no, raw in enumerate(f, 1):
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                m = _HEADER.match(text)
                if m:
                    if block is not None:
                        yield from self._finish(source.name, block, held)
                    n += 1
                    block = _Block(m.group(1), line_no, m.group(2))
                elif block is None:
                    if text.strip():
                        n += 1
                        block = _Block("preamble", line_no, "")
                else:
                    _add(block, text, line_no)
        if block is not None:
            yield from self._finish(source.name, block, held)
        yield from (_unanswered(r) for r in held)
        yield RecordsSeen(source.name, n)

    def _finish(self, name: str, block: _Block, held: list[Request]) -> Iterator[Request | Skipped]:
        """A finished block: a reply completes the held call; a call is held; junk is a skip."""
        if block.kind == "preamble":
            yield Skipped(name, block.line, "text before the first 'TO LLM' header", "", True)
            return
        if block.kind == "LLM RESPONSE":
            if not held:
                yield Skipped(name, block.line, "LLM RESPONSE block without a TO LLM block before it", "", False)
                return
            req = held.pop()
            lines = sum(len(lines) for _, lines, _ in block.messages)
            yield replace(req, extra={**req.extra, "response_line": block.line, "response_lines": lines})
            return
        yield from (_unanswered(r) for r in held)
        held.clear()
        item = self._call(name, block)
        if isinstance(item, Request):
            held.append(item)
        else:
            yield item

    def _call(self, name: str, block: _Block) -> Request | Skipped:
        """A ``TO LLM`` block → its request (a bad skip when it holds no message)."""
        try:
            ts = parse_time(block.stamp)
        except FieldError:
            ts = None
        msgs = tuple(Message(role, "\n".join(lines), path=f"messages[{k}]")  # type: ignore[arg-type]
                     for k, (role, lines, _) in enumerate(m for m in block.messages if m[0]))
        if not msgs:
            return Skipped(name, block.line, "TO LLM block without messages", "", True)
        notes = (NOTE,) + ((f"{block.stray} line(s) without a role prefix were appended to the message above",)
                           if block.stray else ())
        observed = {"messages"} | ({"system"} if msgs[0].role == "system" else set()) | (
            {"timestamp"} if ts is not None else set())
        return Request("", 0, FORMAT, Provenance(name, block.line, "TO LLM", block.line), messages=msgs,
                       timestamp=ts, observed=frozenset(observed), notes=notes)


def _unanswered(req: Request) -> Request:
    """A call whose reply block never came (interrupted, failed, or the file ends)."""
    return replace(req, notes=req.notes + ("no LLM RESPONSE block follows: the call failed or was interrupted",))


def _add(block: _Block, text: str, line_no: int) -> None:
    """One body line of a block: a separator starts a message; ``ROLE text`` adds a line to it."""
    if text == SEPARATOR:
        block.messages.append(("", [], line_no + 1))
        return
    role, _, rest = text.partition(" ")
    mapped = _ROLES.get(role)
    if mapped is None:
        if not block.messages:
            block.messages.append(("user", [], line_no))
        block.stray += 1
        block.messages[-1][1].append(text)
        return
    if not block.messages or (block.messages[-1][0] and block.messages[-1][0] != mapped):
        block.messages.append((mapped, [], line_no))
    r, lines, first = block.messages[-1]
    if not r:
        block.messages[-1] = (mapped, lines, first)
    lines.append(rest)
