"""Write requests back as request logs: the format they were read from, or OpenAI Chat.

``prefixcache canonicalize`` writes "the same format it read". Writers patch the
original record where it can be re-read (files, not stdin), so every field the
request model does not carry (``max_tokens``, ``temperature``, images, cache
breakpoints, the ``response`` half of a ``{request, response}`` pair) survives;
only system text, messages, tools and tool-call arguments are replaced, and an
unchanged request gives its original record back as it was. No field is added. Field layouts: OpenAI API reference "Create chat completion",
Anthropic API "Messages".

Writable formats: ``openai-chat`` and ``anthropic-messages`` (as themselves) and
every format with messages via ``to="openai"`` (OpenAI Chat bodies built from the
request model; images and other non-text parts cannot be rebuilt and are left out,
which :func:`write_requests` reports). Block-hash traces have no text to write.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import orjson

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest.base import Source
from prefixcache.analyzer.ingest.jsonio import iter_records
from prefixcache.analyzer.model import Message, Request, ToolDef
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

WRITABLE = ("openai-chat", "anthropic-messages")
_INDEX = re.compile(r"^(\w+)\[(\d+)\]")


class NotWritableBack(ConfigError):
    """A request in a format that cannot be written back as itself (only :data:`WRITABLE` can;
    every format with messages can be written ``to="openai"``). ``source`` is its file,
    ``format`` its reader's name. The message names canonicalize's ``--to openai``; callers
    whose command has no such option (``lint --fix``) build their own from the two fields."""

    def __init__(self, source: str, fmt: str) -> None:
        self.source, self.format = source, fmt
        super().__init__(f"{source}: cannot write {fmt} logs back in their own format (writable: "
                         f"{', '.join(WRITABLE)}); add --to openai to write OpenAI Chat JSONL")


class Originals:
    """Original records by (source file, record number), read lazily once per file."""

    def __init__(self) -> None:
        self._files: dict[str, dict[int, Any]] = {}
        self._lines: dict[str, list[bytes]] = {}

    def raw(self, source: str, record: int, value: Any) -> bytes | None:
        """The original bytes of JSONL record ``record`` (its line, terminator included) when
        that line decodes to ``value``; None otherwise (stdin, a JSON list or document)."""
        if source == "-" or not Path(source).is_file():
            return None
        if source not in self._lines:
            self._lines[source] = Path(source).read_bytes().splitlines(keepends=True)
        lines = self._lines[source]
        if not 0 < record <= len(lines):
            return None
        line = lines[record - 1]
        try:
            return line if orjson.loads(line) == value else None
        except orjson.JSONDecodeError:
            return None

    def get(self, source: str, record: int) -> Any:
        """The original record, or None when the source cannot be re-read (stdin)."""
        if source == "-" or not Path(source).is_file():
            return None
        if source not in self._files:
            src = Source(source, lambda: open(source, "rb"))
            self._files[source] = {item[0]: item[2] for item in iter_records(src) if isinstance(item, tuple)}
        return self._files[source].get(record)


def _body(record: Any) -> dict[str, Any] | None:
    """The request body of a record: the record itself, or the ``request`` half of a
    ``{request, response}`` pair (decoded when a proxy stored it as JSON text)."""
    if not isinstance(record, dict):
        return None
    if "request" in record and "messages" not in record:
        body = record["request"]
        if isinstance(body, str):
            try:
                body = json_loads(body)
            except ValueError:
                return None
        return body if isinstance(body, dict) else None
    return record


def _rewrap(record: Any, orig_body: dict[str, Any] | None, body: dict[str, Any]) -> Any:
    """The output record: the original record itself when the body is unchanged (pairs,
    bodies stored as JSON text and every other field reproduced exactly), else the
    original record with its body replaced (a pair keeps its ``response``)."""
    if orig_body is not None and orjson.dumps(body) == orjson.dumps(orig_body):  # key order counts (PC203)
        return record
    if isinstance(record, dict) and orig_body is not None and record is not orig_body:
        text = isinstance(record.get("request"), str)
        return {**record, "request": orjson.dumps(body).decode() if text else body}
    return body


def _at(body: dict[str, Any] | None, path: str) -> Any:
    """The JSON value at a simple path like ``messages[3]`` or ``messages[3].content[1]``."""
    value: Any = body
    for part in path.split("."):
        m = _INDEX.match(part)
        key, idx = (m.group(1), int(m.group(2))) if m else (part, None)
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
        if idx is not None:
            if not isinstance(value, list) or idx >= len(value):
                return None
            value = value[idx]
    return value


def _args_object(arguments: str) -> Any:
    try:
        return json_loads(arguments, lenient=True) if arguments else {}
    except ValueError:
        return arguments


# --- OpenAI Chat ---------------------------------------------------------------------------

def _openai_content(m: Message, orig: Any) -> Any:
    base = orig.get("content") if isinstance(orig, dict) else None
    if isinstance(base, list) and m.text_blocks is not None:
        texts = iter(m.text_blocks)
        out = []
        for part in base:
            if isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text"):
                out.append({**part, "text": next(texts, "")})
            elif isinstance(part, str):
                out.append(next(texts, ""))
            else:
                out.append(part)
        return out
    if base is None and not m.content and (m.tool_calls or m.role == "assistant"):
        return None
    return m.content


def openai_message(m: Message, orig: Any = None) -> dict[str, Any]:
    """One message as an OpenAI Chat message, patched over ``orig`` when given."""
    out: dict[str, Any] = dict(orig) if isinstance(orig, dict) else {"role": m.role}
    if not isinstance(orig, dict) or orig.get("role") != "function":
        out["role"] = m.role
    out["content"] = _openai_content(m, orig)
    if m.tool_calls:
        base_calls = out.get("tool_calls") if isinstance(out.get("tool_calls"), list) else []
        by_id = {c.get("id"): c for c in base_calls if isinstance(c, dict)}
        out["tool_calls"] = [
            {**by_id.get(tc.id, {}), "id": tc.id, "type": tc.kind,
             "function": {**(by_id.get(tc.id, {}).get("function") or {}), "name": tc.name, "arguments": tc.arguments}}
            for tc in m.tool_calls
        ]
    for key, value in (("tool_call_id", m.tool_call_id), ("name", m.name)):
        if value is not None:
            out[key] = value
    if m.reasoning is not None and not ("reasoning" in out and "reasoning_content" not in out):
        out["reasoning_content"] = m.reasoning
    elif m.reasoning is not None:
        out["reasoning"] = m.reasoning
    return out


def openai_tool(t: ToolDef) -> dict[str, Any]:
    """A tool as an OpenAI function tool; an OpenAI-shaped logged schema is kept as is."""
    schema = dict(t.schema)
    if schema.get("type") == "function" and isinstance(schema.get("function"), dict):
        return schema
    fn: dict[str, Any] = {"name": t.name}
    if t.description:
        fn["description"] = t.description
    fn["parameters"] = dict(t.parameters) if t.parameters else {"type": "object", "properties": {}}
    return {"type": "function", "function": fn}


def openai_body(req: Request, orig_body: dict[str, Any] | None, same_format: bool) -> dict[str, Any]:
    """An OpenAI Chat body for ``req``; other fields come from the original body when
    it was OpenAI Chat too, else from ``req.extra``."""
    if same_format and orig_body is not None:
        out = {k: v for k, v in orig_body.items() if k != "functions"}
    else:
        out = {"model": req.model} if req.model else {}
        out.update({k: v for k, v in req.extra.items() if k in ("prompt_cache_key", "cache_salt", "user", "metadata")})
    out["messages"] = [openai_message(m, _at(orig_body, m.path) if same_format and m.path else None)
                       for m in req.messages]
    if req.tools:
        out["tools"] = [openai_tool(t) for t in req.tools]
    return out


def openai_response(req: Request) -> dict[str, Any] | None:
    """The ``response`` half of an OpenAI pair carrying the request's time (``created``,
    seconds) and reported usage (tokens), so a converted log keeps them; None when
    the request has neither. Anthropic cache counts keep their own keys
    (``cache_read_input_tokens``, ``cache_creation_input_tokens``), as LiteLLM logs them."""
    u = req.usage
    if req.timestamp is None and u is None:
        return None
    out: dict[str, Any] = {}
    if req.timestamp is not None:
        out["created"] = int(req.timestamp) if float(req.timestamp).is_integer() else req.timestamp
    if req.model:
        out["model"] = req.model
    if u is not None:
        usage: dict[str, Any] = {}
        if u.prompt_tokens is not None:
            usage["prompt_tokens"] = u.prompt_tokens
        if u.output_tokens is not None:
            usage["completion_tokens"] = u.output_tokens
        if u.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": u.cached_tokens}
        if u.cache_write_tokens is not None:
            usage["cache_creation_input_tokens"] = u.cache_write_tokens
        out["usage"] = usage
    return out


# --- Anthropic Messages --------------------------------------------------------------------

def _anthropic_blocks(m: Message, orig: Any) -> list[Any]:
    """Content blocks of one non-tool message, patched over the original blocks."""
    base = orig.get("content") if isinstance(orig, dict) else None
    texts, calls = iter(m.text_blocks or ([m.content] if m.content else [])), iter(m.tool_calls)
    out: list[Any] = []
    if isinstance(base, list):
        for block in base:
            kind = block.get("type") if isinstance(block, dict) else "text"
            if kind == "tool_result":
                continue
            if kind == "text":
                out.append({**block, "text": next(texts, "")} if isinstance(block, dict) else next(texts, ""))
            elif kind in ("tool_use", "server_tool_use"):
                tc = next(calls, None)
                out.append({**block, "input": _args_object(tc.arguments)} if tc else block)
            else:
                out.append(block)
    out += [{"type": "text", "text": t} for t in texts]
    out += [{"type": "tool_use", "id": tc.id, "name": tc.name, "input": _args_object(tc.arguments)} for tc in calls]
    if m.reasoning and not isinstance(base, list):
        out.insert(0, {"type": "thinking", "thinking": m.reasoning})
    return out


def _tool_result(m: Message, orig: Any) -> dict[str, Any]:
    out = dict(orig) if isinstance(orig, dict) else {"type": "tool_result", "tool_use_id": m.tool_call_id}
    base = out.get("content")
    if isinstance(base, list) and m.text_blocks is not None:
        texts = iter(m.text_blocks)
        out["content"] = [{**b, "text": next(texts, "")} if isinstance(b, dict) and b.get("type") == "text" else b
                          for b in base]
    else:
        out["content"] = m.content
    return out


def _message_index(path: str) -> int | None:
    m = re.match(r"^messages\[(\d+)\]", path or "")
    return int(m.group(1)) if m else None


def anthropic_body(req: Request, orig_body: dict[str, Any] | None) -> dict[str, Any]:
    """An Anthropic Messages body for ``req``, patched over the original body."""
    out = dict(orig_body) if orig_body is not None else ({"model": req.model} if req.model else {})
    system = [m for m in req.messages if m.role in ("system", "developer")]
    if system:
        if len(system) == 1 and system[0].path == "system" and isinstance((orig_body or {}).get("system"), str):
            out["system"] = system[0].content
        else:
            out["system"] = [{**(b if isinstance(b := _at(orig_body, m.path), dict) else {"type": "text"}),
                              "text": m.content} for m in system]
    messages: list[dict[str, Any]] = []
    groups: dict[Any, dict[str, Any]] = {}
    for n, m in enumerate(m for m in req.messages if m.role not in ("system", "developer")):
        idx = _message_index(m.path)
        key = idx if idx is not None else ("new", n)
        orig = _at(orig_body, f"messages[{idx}]") if idx is not None else None
        if key not in groups:
            role = "user" if m.role == "tool" else m.role
            groups[key] = dict(orig) if isinstance(orig, dict) else {"role": role}
            groups[key]["content"] = []
            messages.append(groups[key])
        if m.role == "tool":
            groups[key]["content"].append(_tool_result(m, _at(orig_body, m.path)))
        elif isinstance(orig, dict) and isinstance(orig.get("content"), str) and not m.tool_calls:
            groups[key]["content"] = m.content
        else:
            groups[key]["content"] += _anthropic_blocks(m, orig)
    out["messages"] = messages
    if req.tools:
        out["tools"] = [dict(t.schema) if "input_schema" in t.schema or "type" in t.schema else
                        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                        for t in req.tools]
    return out


# --- entry point ---------------------------------------------------------------------------

def records(requests: Iterable[Request], to: str | None = None) -> Iterator[dict[str, Any]]:
    """Each request as one output record (see :func:`records_with_originals`)."""
    for rec, _ in records_with_originals(requests, to):
        yield rec


def records_with_originals(requests: Iterable[Request], to: str | None = None
                           ) -> Iterator[tuple[dict[str, Any], bytes | None]]:
    """Each request as one output record. ``to`` is None (same format) or ``"openai"``.

    Same format: the original record patched (a ``{request, response}`` pair stays a
    pair with its response; an unchanged request gives the original record back
    exactly). ``to="openai"``: an OpenAI Chat body, or a pair ``{"request": body,
    "response": {created, model, usage}}`` when the request has a time or reported
    usage (the OpenAI reader's pair layout, so nothing is lost; no non-Chat field is
    added to the body). Raises ConfigError for a format that cannot be written back
    (suggesting ``--to openai``), for block-hash traces, and, without ``to``, for requests in
    more than one format (one file in "the input format" would not read back as one log).

    Yields ``(record, raw)``: ``raw`` is the original line's bytes when the record is
    the original one, unchanged, of a JSONL file (else None), so an unchanged request
    is written back byte for byte.
    """
    if to not in (None, "openai"):
        raise ConfigError(f"--to {to!r}: the only target format is 'openai' (OpenAI Chat Completions JSONL)")
    originals = Originals()
    formats: dict[str, str] = {}  # format → the first file in it (same-format writes: one file holds one format)
    for req in requests:
        if to is None:
            formats.setdefault(req.format, req.provenance.source)
            if len(formats) > 1:
                (f1, s1), (f2, s2) = list(formats.items())[:2]
                raise ConfigError(f"the inputs hold two formats ({f1}: {s1}; {f2}: {s2}): one output file in the input "
                                  "format could not be read back as one log; write them with --to openai, or "
                                  "canonicalize each format on its own")
        if req.trace is not None:
            raise ConfigError(f"{req.provenance.source}: {req.format} is a block-hash trace: it has no prompt text "
                              "to rewrite or write")
        if to == "openai" and req.format != "openai-chat":  # built from the request: the original is not read
            body = openai_body(req, None, same_format=False)  # (it may not be JSON: an Aider history)
            response = openai_response(req)
            yield (body if response is None else {"request": body, "response": response}), None
        elif req.format == "openai-chat" or (req.format == "anthropic-messages" and to is None):
            record = originals.get(req.provenance.source, req.provenance.record)
            orig = _body(record)
            body = openai_body(req, orig, same_format=True) if req.format == "openai-chat" else anthropic_body(req, orig)
            rec = _rewrap(record, orig, body)
            yield rec, originals.raw(req.provenance.source, req.provenance.record, rec) if rec is record else None
        else:
            raise NotWritableBack(req.provenance.source, req.format)


def write_requests(requests: Iterable[Request], out: IO[bytes], to: str | None = None) -> int:
    """Write requests as JSONL (one body per line) to a binary stream; returns the count.

    An unchanged JSONL record is written as its original bytes, so an input nothing was
    rewritten in comes back byte-identical (a last line without a newline stays so)."""
    n, term = 0, b""
    for rec, raw in records_with_originals(requests, to):
        if n:
            out.write(term or b"\n")  # a line between two records always ends
        line = raw if raw is not None else orjson.dumps(rec) + b"\n"
        body = line.rstrip(b"\r\n")
        out.write(body)
        term = line[len(body):]
        n += 1
    out.write(term)
    return n
