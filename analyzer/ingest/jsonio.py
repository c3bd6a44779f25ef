"""Streaming JSON helpers shared by every reader.

Readers never touch ``orjson`` or raw bytes directly: they call :func:`iter_jsonl`
(one JSON value per line, streamed, 1-based line numbers), :func:`load_json`
(one whole JSON document) or :func:`loads` (JSON text held in a field: a body stored
as a string, tool-call ``arguments``), and validate fields with :func:`expect` /
:func:`field`, which raise :class:`FieldError`. :func:`parse_records` (through
:func:`read_records` for body formats, :func:`read_lines` for JSONL logs) runs the
per-record loop and turns that into a :class:`~prefixcache.analyzer.model.Skipped`
for the record (:func:`skip` does it by hand).

Errors always name file, record (line) and field, in the format of
:class:`~prefixcache.analyzer.errors.InputError`::

    cases/x.jsonl:3 field messages[2].content: expected string or list, got int

Whole-file problems (empty, binary, not UTF-8, not JSON) raise ``InputError``
with ``record=0`` (or the line of a JSON syntax error); :class:`Ingest` turns them
into one bad ``Skipped`` for the file.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping

import orjson
import xxhash

from prefixcache.analyzer import limits
from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.limits import LIMITS
from prefixcache.analyzer.model import Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source

#: How many leading bytes detection and the binary check look at.
HEAD_BYTES = 64 * 1024

#: Deepest nesting of lists and objects a record may have; deeper records are skipped (they would
#: overflow Python's recursion in templates and ``json.dumps``). ``PREFIXCACHE_MAX_JSON_DEPTH`` overrides it.
MAX_DEPTH = int(LIMITS["MAX_JSON_DEPTH"].default)
#: Longest JSONL line (bytes) read as one record; longer lines are skipped unread.
#: ``PREFIXCACHE_MAX_RECORD_BYTES`` overrides it.
MAX_RECORD_BYTES = int(LIMITS["MAX_RECORD_BYTES"].default)
#: Largest single-document file (one JSON list or object, not JSONL) decoded at once (bytes); it is
#: held whole and decoded whole (several times its size in memory), so it is far below the record
#: limit. ``PREFIXCACHE_MAX_DOCUMENT_BYTES`` overrides it.
MAX_DOCUMENT_BYTES = int(LIMITS["MAX_DOCUMENT_BYTES"].default)

_DECODER = json.JSONDecoder()

_TYPE_NAMES = {str: "string", list: "list", dict: "object", int: "int", float: "float", bool: "bool", type(None): "null"}


class FieldError(Exception):
    """A field of one record has the wrong shape.

    ``field`` is the JSON path inside the record (``messages[2].content``);
    ``str(err)`` is the reason alone (no file or line: the reader adds those).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(reason)


def type_name(value: Any) -> str:
    """JSON-ish name of a decoded value's type (``string``, ``list``, ``object``, ``int``...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def expect(value: Any, kinds: type | tuple[type, ...], path: str) -> Any:
    """Return ``value`` if it is one of ``kinds``, else raise :class:`FieldError`.

    ``bool`` is never accepted as ``int`` and ``int`` is accepted as ``float``,
    as in JSON. Message: ``expected string or list, got int``.
    """
    t = type(value)
    if t is kinds or (t in kinds if type(kinds) is tuple else False):  # the exact type named: the common case
        return value
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    ok = isinstance(value, kinds)
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    if not ok and float in kinds and type(value) is int:
        ok = True
    if not ok:
        names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        if value is None:
            raise FieldError(path, f"missing or null (expected {names})")
        raise FieldError(path, f"expected {names}, got {type_name(value)}")
    return value


def field(obj: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], path: str = "", *,
          required: bool = False, default: Any = None) -> Any:
    """``obj[key]`` checked against ``kinds``; ``default`` when absent or null.

    ``path`` is the JSON path of ``obj`` itself ("" for the record root); the
    error names ``path.key``. Raises :class:`FieldError` when the value has the
    wrong type, or when it is missing and ``required``.
    """
    value = obj.get(key)
    if value is None:
        if required:
            raise FieldError(f"{path}.{key}" if path else key, "missing required field")
        return default
    if type(value) is kinds:  # the exact type named (no path built unless it is needed)
        return value
    return expect(value, kinds, f"{path}.{key}" if path else key)


def skip(source: str, record: int, err: FieldError | str, *, field: str = "", bad: bool = True) -> Skipped:
    """A :class:`Skipped` for one record from a :class:`FieldError` or a plain reason."""
    if isinstance(err, FieldError):
        return Skipped(source, record, err.reason, err.field, bad)
    return Skipped(source, record, err, field, bad)


def skipped_message(s: Skipped) -> str:
    """One line naming file, record and field: ``x.jsonl:3 field messages[2]: reason``."""
    where = s.source + (f":{s.record}" if s.record else "")
    if s.field:
        where += f" field {s.field}"
    return f"{where}: {s.reason}"


def decode_error(err: orjson.JSONDecodeError, length: int | None = None) -> str:
    """A short reason for a JSON syntax error (``truncated JSON`` for a cut-off value).

    ``length`` is the record's length in characters, when known: an error at its
    very end (e.g. a JSONL line cut inside a string) is a truncation too.
    """
    if "not valid UTF-8" in err.msg:
        return "not UTF-8 text"
    if "depth limit exceeded" in err.msg:
        return f"JSON nested deeper than 1024 levels (at column {err.colno})"
    if "unexpected end of data" in err.msg or "EOF" in err.msg or (length is not None and err.pos >= length):
        return f"truncated JSON (ends at column {err.colno})"
    return f"invalid JSON: {err.msg} at column {err.colno}"


def too_deep(value: Any, raw_len: int | None = None, max_depth: int | None = None) -> FieldError | None:
    """A :class:`FieldError` naming the first list/object nested deeper than ``max_depth``
    (default :data:`MAX_DEPTH` or ``$PREFIXCACHE_MAX_JSON_DEPTH``), or None.

    ``raw_len`` is a cheap upper bound of the value's containers (the count of ``[`` and
    ``{`` in its text): when it is within the limit the walk is skipped. The walk is
    iterative (no recursion), linear in the number of containers, and stops at the first
    offender; the path names at most its first six steps.
    """
    depth_limit = max_depth or limits.value("MAX_JSON_DEPTH")
    if raw_len is not None and raw_len <= depth_limit:
        return None
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth > depth_limit:
            shown = "".join(path[:6]).lstrip(".") + ("..." if len(path) > 6 else "")
            return FieldError(shown, f"JSON nested deeper than {depth_limit} levels "
                                     "(PREFIXCACHE_MAX_JSON_DEPTH sets the limit)")
        if isinstance(node, dict):
            stack.extend((v, depth + 1, path + (f".{k}",) if len(path) < 7 else path)
                         for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1, path + (f"[{i}]",) if len(path) < 7 else path)
                         for i, v in enumerate(node) if isinstance(v, (dict, list)))
    return None


class JSONDepthError(ValueError):
    """JSON text nested deeper than the depth limit (a ``ValueError``, as a syntax error is);
    ``field`` is the JSON path of the offender inside the text, ``reason`` the message."""

    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason
        super().__init__(reason)


def loads(data: str | bytes, *, lenient: bool = False, max_depth: int | None = None) -> Any:
    """The one entry point for JSON text found inside a record or a file (not JSONL lines, which
    :func:`iter_jsonl` reads): orjson, then the depth check of :func:`too_deep`.

    ``lenient`` also accepts what Python's ``json`` does and orjson refuses (``NaN``,
    ``Infinity``, integers over 64 bits): tool-call argument strings are parsed so, as
    vLLM parses them. Python's decoder is never given text nested deeper than the limit, so
    it cannot raise ``RecursionError``. Raises ``orjson.JSONDecodeError`` (a ``ValueError``)
    for text that is not JSON and :class:`JSONDepthError` (a ``ValueError``) for text nested
    deeper than :data:`MAX_DEPTH` (``$PREFIXCACHE_MAX_JSON_DEPTH``) or than 1024 levels.
    """
    depth_limit = max_depth or limits.value("MAX_JSON_DEPTH")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if "depth limit exceeded" in e.msg:
            raise JSONDepthError("", f"JSON nested deeper than 1024 levels (at column {e.colno})") from None
        if not lenient or _brackets(data) > depth_limit:
            raise
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            raise e from None
    deep = too_deep(value, _brackets(data), depth_limit)
    if deep is not None:
        raise JSONDepthError(deep.field, deep.reason)
    return value


def document_bytes(f: Any, name: str) -> bytes:
    """All of an open binary stream, for a single-document file: at most :data:`MAX_DOCUMENT_BYTES`
    (``$PREFIXCACHE_MAX_DOCUMENT_BYTES``). A longer file raises :class:`InputError` (record 0)
    naming the limit, once one byte past it has been read (never more held than the limit)."""
    max_bytes = limits.value("MAX_DOCUMENT_BYTES")
    chunks, size = [], 0
    while size <= max_bytes:  # in pieces: a refused file is never held twice
        chunk = f.read(min(_LINE_PIECE, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    del chunks
    raise InputError(f"a single JSON document over {max_bytes:,} bytes (PREFIXCACHE_MAX_DOCUMENT_BYTES "
                     "sets the limit; JSONL, one record a line, has no such bound)", name, 0)


def _brackets(raw: bytes | str) -> int:
    """Upper bound of the containers in a JSON text: its ``[`` and ``{`` count."""
    return raw.count(b"[" if isinstance(raw, bytes) else "[") + raw.count(b"{" if isinstance(raw, bytes) else "{")


def check_head(data: bytes, name: str) -> str:
    """Check the first bytes of a file and return them as text.

    Raises :class:`InputError` (record 0) for an empty file, a binary file (NUL
    bytes) or bytes that are not UTF-8 (the offset of the first bad byte is
    named). A multi-byte character cut by the head limit is tolerated.
    """
    if not data.strip():
        raise InputError("empty file", name, 0)
    if b"\x00" in data:
        raise InputError(f"binary file (NUL byte at offset {data.index(0)})", name, 0)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 3 and e.reason == "unexpected end of data":
            return data[: e.start].decode("utf-8")
        raise InputError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})", name, 0) from None


def read_head(source: Source) -> str:
    """The first :data:`HEAD_BYTES` of a source as checked text (see :func:`check_head`)."""
    with source.open() as f:
        data = f.read(HEAD_BYTES)
    return check_head(data, source.name)


def iter_jsonl(source: Source) -> Iterator[tuple[int, Any] | Skipped]:
    """Stream a JSONL source: ``(line_no, value)`` per line, 1-based, via orjson.

    Blank lines are not records and yield nothing. A line that is not UTF-8, not
    valid JSON, nested deeper than :data:`MAX_DEPTH` or longer than
    :data:`MAX_RECORD_BYTES` yields a bad :class:`Skipped` for that line (truncated
    JSON is named as such); the file goes on. Only one line is in memory at a time.
    """
    max_bytes, depth_limit = limits.value("MAX_RECORD_BYTES"), limits.value("MAX_JSON_DEPTH")  # once a file
    with source.open() as f:
        for line_no, raw in enumerate(_lines(f, max_bytes), 1):
            if raw is None:
                yield Skipped(source.name, line_no, f"line longer than {max_bytes:,} bytes "
                              "(PREFIXCACHE_MAX_RECORD_BYTES sets the limit); not read", "", True)
                continue
            if not raw.strip():
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                length = len(raw.rstrip().decode("utf-8", errors="replace"))
                yield Skipped(source.name, line_no, decode_error(e, length), "", True)
                continue
            deep = too_deep(value, _brackets(raw), depth_limit)
            if deep is not None:
                yield skip(source.name, line_no, deep)
                continue
            yield line_no, value


#: Piece of a long line read at a time (bytes): a line is gathered piece by piece, so one over the
#: record limit is dropped as soon as it crosses it, never held twice.
_LINE_PIECE = 16 << 20


def _lines(f: Any, max_bytes: int) -> Iterator[bytes | None]:
    """The lines of a binary stream; None for a line over ``max_bytes`` (dropped once it crosses the
    limit, the rest skipped in pieces, never held)."""
    piece = min(_LINE_PIECE, max_bytes + 1)
    while True:
        raw = f.readline(piece)
        if not raw:
            return
        if raw.endswith(b"\n") or len(raw) < piece:
            yield raw
            continue
        parts, size = [raw], len(raw)
        while size <= max_bytes and not parts[-1].endswith(b"\n"):
            more = f.readline(min(piece, max_bytes + 1 - size))
            if not more:
                break
            parts.append(more)
            size += len(more)
        if size <= max_bytes:
            yield b"".join(parts)
            continue
        last = parts[-1]
        del parts
        while last and not last.endswith(b"\n"):
            last = f.readline(1 << 20)
        yield None


def load_json(source: Source) -> Any:
    """Decode one whole JSON document (the only place a file is read at once).

    Raises :class:`InputError` for an empty, binary or non-UTF-8 file (record 0),
    for a syntax error, naming the line and column it is on (``record`` = that
    line), and for a document nested deeper than :data:`MAX_DEPTH` (naming the field).
    """
    with source.open() as f:
        data = document_bytes(f, source.name)
    value = _decode_document(data, source.name)
    deep = too_deep(value, _brackets(data))
    if deep is not None:
        raise InputError(deep.reason, source.name, 1, deep.field)
    return value


def _decode_document(data: bytes, name: str) -> Any:
    """orjson.loads of a whole file; InputError naming the line and column of a syntax error."""
    check_head(data[:HEAD_BYTES], name)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if "not valid UTF-8" in e.msg:
            bad = _first_bad_utf8(data)
            raise InputError(f"not UTF-8 text (byte 0x{data[bad]:02x} at offset {bad})", name, 0) from None
        line = data.count(b"\n", 0, _byte_pos(data, e.pos)) + 1
        raise InputError(decode_error(e), name, line) from None


def salvage_document(source: Source) -> Iterator[tuple[int, str, Any] | Skipped]:
    """The records of a single-document file that is damaged: those before the damage, then
    one bad :class:`Skipped` saying where it broke.

    A JSON list yields its items (``(i + 1, "[i]", item)``) up to the first one that cannot
    be decoded (cut off, malformed, or nested too deep), then a skip naming that item's line
    and column; a list or object followed by other data yields the whole value, then a skip
    for the trailing data (its line as the record). A document that cannot be decoded at
    all raises :class:`InputError` as :func:`load_json` does.
    """
    with source.open() as f:
        data = document_bytes(f, source.name)
    try:
        doc = _decode_document(data, source.name)
    except InputError as err:
        if err.record == 0:
            raise
        yield from _salvage(source.name, data.decode("utf-8"), err)
        return
    yield from _whole(source.name, doc, data)


def _whole(name: str, doc: Any, data: bytes) -> Iterator[tuple[int, str, Any] | Skipped]:
    items = list(enumerate(doc)) if isinstance(doc, list) else [(None, doc)]
    for i, item in items:
        deep = too_deep(item, _brackets(data))
        record, pointer = (1, "") if i is None else (i + 1, f"[{i}]")
        if deep is not None:
            yield skip(name, record, FieldError(f"{pointer}.{deep.field}".strip(".") if pointer else deep.field,
                                                deep.reason))
        else:
            yield record, pointer, item


def _salvage(name: str, text: str, err: InputError) -> Iterator[tuple[int, str, Any] | Skipped]:
    """Item-by-item decoding of a damaged document (see :func:`salvage_document`)."""
    pos = _skip_ws(text, 0)
    is_list = text.startswith("[", pos)
    i = 0
    pos = _skip_ws(text, pos + 1) if is_list else pos
    while True:
        try:
            _, end = _DECODER.raw_decode(text, pos)
            item = orjson.loads(text[pos:end])
        except (ValueError, RecursionError):
            if i == 0 and not is_list:
                raise err from None
            kept = f"; the {i:,} record(s) before it are kept" if i else ""
            yield Skipped(name, i + 1, f"{err.reason}, line {err.record}{kept}", f"[{i}]" if is_list else "", True)
            return
        deep = too_deep(item, _brackets(text[pos:end]))
        pointer = f"[{i}]" if is_list else ""
        yield skip(name, i + 1, FieldError(f"{pointer}.{deep.field}".strip("."), deep.reason)) if deep else (
            i + 1, pointer, item)
        i += 1
        pos = _skip_ws(text, end)
        if is_list and text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
            continue
        if is_list and text.startswith("]", pos):
            pos = _skip_ws(text, pos + 1)
        if pos < len(text):
            line = text.count("\n", 0, pos) + 1
            what = "list" if is_list else "document"
            yield Skipped(name, line, f"trailing data after the JSON {what} at line {line} "
                          f"(starts with {text[pos:pos + 20]!r}); the {i:,} record(s) before it are kept", "", True)
        return


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _byte_pos(data: bytes, char_pos: int) -> int:
    """Byte offset of character ``char_pos`` in UTF-8 ``data`` (orjson reports characters)."""
    return len(data.decode("utf-8", errors="replace")[:char_pos].encode("utf-8"))


def _first_bad_utf8(data: bytes) -> int:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return -1


def is_json_value(line: bytes) -> bool:
    """Whether ``line`` is one complete JSON value (orjson: no recursion, whatever its depth)."""
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


#: Longest first line :func:`first_lines` reads whole (bytes); a pretty-printed document's first line is short.
FIRST_LINE_BYTES = 1 << 20


def first_lines(source: Source, n: int) -> list[bytes]:
    """The first ``n`` non-blank lines (stops reading as soon as it has them). A line longer than
    :data:`FIRST_LINE_BYTES` comes back cut to that length and ends the list (nothing more is read),
    so it is never a complete value: :func:`iter_records` takes such a line for a JSONL record (or
    a list, when it starts with ``[``), never for the first line of a pretty-printed document."""
    out: list[bytes] = []
    with source.open() as f:
        while len(out) < n:
            raw = f.readline(FIRST_LINE_BYTES)
            if not raw:
                break
            if raw.strip():
                out.append(raw)
            if len(raw) == FIRST_LINE_BYTES and not raw.endswith(b"\n"):
                break
    return out


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """``(value, end)`` of the JSON value starting at ``pos`` of ``text`` (one of several documents
    in a row), with the depth check of :func:`loads`. Raises ``json.JSONDecodeError`` (a
    ``ValueError``) for a syntax error and :class:`JSONDepthError` for nesting past the limit."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise JSONDepthError("", "JSON nested too deep to decode (PREFIXCACHE_MAX_JSON_DEPTH)") from None
    deep = too_deep(value)
    if deep is not None:
        raise JSONDepthError(deep.field, deep.reason)
    return value, end


def iter_records(source: Source) -> Iterator[tuple[int, str, Any] | Skipped]:
    """The records of a request-log file, whatever its layout: ``(record, pointer, value)``.

    * a JSON list (``[`` first): each item is a record, numbered from 1, pointer ``[i]``;
    * JSONL: each non-blank line is a record numbered by its line (streamed);
    * one JSON document spread over several lines (pretty-printed): one record, 1.

    A damaged list or document keeps the records before the damage (see
    :func:`salvage_document`).

    A file is JSONL unless its first line starts a list or neither of its first
    two non-blank lines is a complete JSON value. Undecodable lines / documents
    yield a bad :class:`Skipped` (line) or raise :class:`InputError` (document).
    """
    first = first_lines(source, 2)
    if not first:
        raise InputError("empty file", source.name, 0)
    if first[0].lstrip().startswith(b"[") or not any(len(line) >= FIRST_LINE_BYTES or is_json_value(line)
                                                     for line in first):
        yield from salvage_document(source)
        return
    for item in iter_jsonl(source):
        yield item if isinstance(item, Skipped) else (item[0], "", item[1])


def parse_records(source: Source, items: Iterable[tuple[Any, ...] | Skipped],
                  parse: Callable[..., Iterable[Request | Skipped]], *,
                  finish: Callable[[], Iterable[Request | Skipped]] | None = None,
                  ) -> Iterator[Request | Skipped | RecordsSeen]:
    """The common loop of every reader: each record of ``items`` is counted and parsed once.

    ``items`` yields ``(record, ...)`` tuples (record number first, as
    :func:`iter_jsonl` and :func:`iter_records` do) or a :class:`Skipped`, passed
    through. ``parse(*item)`` returns the record's requests / skips, streamed; a
    :class:`FieldError` it raises becomes a bad ``Skipped`` naming the record and
    field. Then ``finish()`` (requests held back until the file is read), then
    :class:`RecordsSeen` with the count.
    """
    n = 0
    for item in items:
        n += 1
        if isinstance(item, Skipped):
            yield item
            continue
        try:
            yield from parse(*item)
        except FieldError as e:
            yield skip(source.name, item[0], e)
    if finish is not None:
        yield from finish()
    yield RecordsSeen(source.name, n)


def read_records(source: Source, parse: Callable[[Any, Provenance], Iterable[Request | Skipped]],
                 ) -> Iterator[Request | Skipped | RecordsSeen]:
    """Run ``parse`` on every record of :func:`iter_records`; the loop of body readers.

    ``parse(value, provenance)`` returns the record's requests (or skips); a
    :class:`FieldError` it raises becomes a bad ``Skipped`` for that record and
    drops what it returned before. Ends with :class:`RecordsSeen`.
    """
    def one(record: int, pointer: str, value: Any) -> list[Request | Skipped]:
        line = record if not pointer else None  # JSONL line / document start; None inside a list
        return list(parse(value, Provenance(source.name, record, pointer, line)))

    return parse_records(source, iter_records(source), one)


def read_lines(source: Source, parse: Callable[[int, dict[str, Any]], Iterable[Request | Skipped]], *,
               finish: Callable[[], Iterable[Request | Skipped]] | None = None,
               ) -> Iterator[Request | Skipped | RecordsSeen]:
    """Run ``parse(line, obj)`` on every line of a JSONL log whose lines are JSON objects.

    The loop of stateful line readers (Claude Code, Codex, block traces): a line that
    is not an object, or whose ``parse`` raises :class:`FieldError`, is a bad
    ``Skipped``; ``parse``'s output is streamed as it comes. ``finish`` and the
    ending :class:`RecordsSeen` as in :func:`parse_records`.
    """
    def one(line: int, value: Any) -> Iterable[Request | Skipped]:
        return parse(line, expect(value, dict, ""))

    return parse_records(source, iter_jsonl(source), one, finish=finish)


def parse_time(value: Any, path: str = "timestamp") -> float | None:
    """Seconds since the UNIX epoch from a logged time; None for null.

    Numbers above 1e11 are taken as milliseconds (1e11 s is the year 5138).
    Strings: ISO-8601 (``Z``, offsets, a trailing `` UTC``; naive = UTC, so
    results do not depend on the machine's zone) or a number. Raises
    :class:`FieldError` for anything else.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return parse_time(float(text), path)
        except ValueError:
            pass
        if text.endswith(" UTC"):
            text = text[:-4]
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise FieldError(path, f"not a timestamp: {value[:40]!r}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    raise FieldError(path, f"expected number or ISO-8601 string, got {type_name(value)}")


def _tok(u: Mapping[str, Any], key: str, path: str) -> int | None:
    return field(u, key, int, path)


def parse_usage(u: Any, path: str = "usage") -> Usage | None:
    """Provider usage object → :class:`Usage` (tokens), for the three wire shapes.

    * OpenAI Chat / DeepSeek / LiteLLM (``prompt_tokens``): prompt = ``prompt_tokens``
      (LiteLLM already folds Anthropic cache tokens into it); cached =
      ``prompt_tokens_details.cached_tokens`` or DeepSeek ``prompt_cache_hit_tokens``
      or ``cache_read_input_tokens``; written = ``cache_creation_input_tokens`` or
      (OpenAI GPT-5.6+) ``prompt_tokens_details.cache_write_tokens``.
    * OpenAI Responses (``input_tokens_details``): prompt = ``input_tokens``,
      cached = ``input_tokens_details.cached_tokens``, written =
      ``input_tokens_details.cache_write_tokens`` (GPT-5.6+).
    * Anthropic Messages (``input_tokens``): prompt = ``input_tokens +
      cache_creation_input_tokens + cache_read_input_tokens`` (input is only the
      uncached tail), cached = ``cache_read_input_tokens``.

    None for a missing/null usage; :class:`FieldError` for a wrong shape.
    """
    if u is None:
        return None
    expect(u, dict, path)
    read = _tok(u, "cache_read_input_tokens", path)
    write = _tok(u, "cache_creation_input_tokens", path)
    if "prompt_tokens" in u:
        details = field(u, "prompt_tokens_details", dict, path, default={})
        cached = _tok(details, "cached_tokens", f"{path}.prompt_tokens_details")
        write = _tok(details, "cache_write_tokens", f"{path}.prompt_tokens_details") if write is None else write
        for alt in (_tok(u, "prompt_cache_hit_tokens", path), read):
            cached = alt if cached is None else cached
        return Usage(_tok(u, "prompt_tokens", path), cached, write, _tok(u, "completion_tokens", path))
    inp = _tok(u, "input_tokens", path)
    out = _tok(u, "output_tokens", path)
    if "input_tokens_details" in u:
        details = field(u, "input_tokens_details", dict, path, default={})
        if write is None:  # GPT-5.6+: cache writes are reported (and billed at 1.25×)
            write = _tok(details, "cache_write_tokens", f"{path}.input_tokens_details")
        return Usage(inp, _tok(details, "cached_tokens", f"{path}.input_tokens_details"), write, out)
    if inp is None and read is None and write is None and out is None:
        return None
    prompt = None if inp is None else inp + (write or 0) + (read or 0)
    return Usage(prompt, read, write, out)


def digest(value: Any) -> str:
    """A short stable digest of a JSON value (sorted keys): identifies images, files, opaque blobs."""
    return xxhash.xxh64(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
