"""ShareGPT conversations and plain prompt files: the inputs the peer kvlint reads.

**ShareGPT** (``sharegpt``; FastChat ``data/dummy_conversation.json``, LLaMA-Factory's
``formatting: sharegpt``): a JSON list (or JSONL) of conversations
``{id?, system?, tools?, conversations: [{from, value}]}``. ``from`` is ``human`` /
``user``, ``gpt`` / ``assistant`` / ``bot`` / ``chatgpt`` / ``model``, ``system``,
``function_call`` (an assistant tool call, its ``value`` the call's JSON) or
``observation`` / ``tool`` (the tool's result). One request per assistant turn, its prompt
every turn before it (a leading ``system`` field or turn becomes the system message; a
``tools`` JSON string becomes the tools). A conversation is its own session,
``<file stem>/<id>`` (``<file stem>/<record>`` without an id). No model, usage or time is
stored: these are datasets, replayed as if sent in order.

**Plain prompt files** (``prompt-text``; a ``.txt``, ``.prompt`` or ``.md`` file named on the
command line, what kvlint takes): the whole file is one user message, one request; the
files of one directory chain as one session in path order (a prompt revised file by
file), so lint shows what each revision kept of the previous one's prefix.
"""

from __future__ import annotations

import os
from typing import Any, Iterator


from prefixcache.analyzer.model import Message, Provenance, Request, Skipped, ToolCall
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, loads as json_loads, read_records
from prefixcache.analyzer.ingest.readers.openai_chat import tool_of

SHAREGPT, PROMPT_TEXT = "sharegpt", "prompt-text"
_USER = frozenset({"human", "user"})
_ASSISTANT = frozenset({"gpt", "assistant", "bot", "chatgpt", "model"})
_TOOL = frozenset({"observation", "tool", "function_response"})
#: File name endings of plain prompt files (read only when named explicitly: a walk skips them).
PROMPT_SUFFIXES = (".txt", ".prompt", ".md")
NOTE_DATASET = "ShareGPT conversation: no model, usage or time stored (a dataset, replayed in order)"


def _turns(conv: dict[str, Any]) -> Iterator[tuple[int, str, Message]]:
    """(turn index, role kind, message) of each turn; FieldError naming the turn on a bad one."""
    turns = field(conv, "conversations", list, required=True)
    for i, t in enumerate(turns):
        path = f"conversations[{i}]"
        expect(t, dict, path)
        who = field(t, "from", str, path, required=True)
        value = field(t, "value", str, path, required=True)
        if who in _USER:
            yield i, "user", Message("user", value, path=path)
        elif who in _ASSISTANT:
            yield i, "assistant", Message("assistant", value, path=path)
        elif who == "system":
            yield i, "system", Message("system", value, path=path)
        elif who == "function_call":
            call = ToolCall(f"call_{i}", _call_name(value), value, arguments_inferred=True)
            yield i, "assistant", Message("assistant", "", tool_calls=(call,), path=path)
        elif who in _TOOL:
            yield i, "tool", Message("tool", value, tool_call_id=f"call_{i - 1}", path=path)
        else:
            raise FieldError(f"{path}.from", f"unknown ShareGPT speaker {who!r}")


def _call_name(value: str) -> str:
    try:
        obj = json_loads(value)
    except ValueError:  # not JSON, or nested past the depth limit
        return ""
    return str(obj.get("name", "")) if isinstance(obj, dict) else ""


@reader(priority=65)
class ShareGptReader:
    """ShareGPT conversation lists (JSON or JSONL)."""

    format = SHAREGPT

    def sniff(self, head: str, name: str) -> float:
        """0.9 for a record with a ``conversations`` list of ``{from, value}`` turns."""
        obj = first_object(head)
        if obj is not None:
            turns = obj.get("conversations")
            ok = isinstance(turns, list) and turns and isinstance(turns[0], dict) and "from" in turns[0]
            return 0.9 if ok else 0.0
        return 0.5 if '"conversations"' in head and '"from"' in head and '"value"' in head else 0.0

    def parse(self, conv: Any, prov: Provenance) -> Iterator[Request]:
        """The requests of one conversation (one per assistant turn)."""
        expect(conv, dict, "")
        stem = os.path.splitext(os.path.basename(prov.source))[0] if prov.source != "-" else "stdin"
        session = f"{stem}/{conv.get('id') if conv.get('id') not in (None, '') else prov.record}"
        history: list[Message] = []
        system = conv.get("system")
        if isinstance(system, str) and system:
            history.append(Message("system", system, path="system"))
        tools: tuple = ()
        if isinstance(conv.get("tools"), str) and conv["tools"].strip():
            try:
                raw = json_loads(conv["tools"])
            except ValueError as exc:
                raise FieldError("tools", f"not JSON: {exc}") from None
            tools = tuple(tool_of(t, f"tools[{i}]") for i, t in enumerate(expect(raw, list, "tools")))
        k = 0
        for i, kind, msg in list(_turns(conv)):
            if kind == "assistant":
                yield Request(session, k, SHAREGPT, Provenance(prov.source, prov.record, f"{prov.pointer}"
                              f"/conversations/{i}", prov.line), messages=tuple(history), tools=tools,
                              observed=frozenset({"messages", "system", "tools"}), notes=(NOTE_DATASET,))
                k += 1
            history.append(msg)

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        return read_records(source, self.parse)


@reader(priority=210)
class PromptTextReader:
    """A plain prompt file named on the command line (``.txt``, ``.prompt``, ``.md``)."""

    format = PROMPT_TEXT

    def sniff(self, head: str, name: str) -> float:
        """0.2 for a prompt-file name whose text is not JSON (any log format outscores it)."""
        text = head.lstrip()
        return 0.2 if name.lower().endswith(PROMPT_SUFFIXES) and text and text[0] not in "[{" else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        with source.open() as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError("", f"not UTF-8 text (byte {exc.start})") from None
        folder = (os.path.dirname(source.name) or ".") if source.name != "-" else "stdin"
        yield Request(f"prompts:{folder}", 0, PROMPT_TEXT, Provenance(source.name, 1, "", 1),
                      messages=(Message("user", text, path="file"),), observed=frozenset({"messages"}),
                      notes=("plain prompt file: the whole file is one user message",))
        yield RecordsSeen(source.name, 1)
