"""The reader registry and format auto-detection.

Each reader class under :mod:`prefixcache.analyzer.ingest.readers` (one module per format
family) registers itself with the :func:`reader` decorator and a ``priority``; the
registry imports every module of that folder (walked, never listed) and maps each
reader's ``format`` name to it, in priority order. Detection asks every reader's
``sniff(head, name)`` for a confidence in [0, 1] on the first 64 KiB of the file
and takes the highest (ties go to the lower priority: more specific formats are
given lower numbers); 0 everywhere means "unknown format". ``--input-format NAME``
skips detection.

:func:`first_object` gives sniffers the first JSON object of the head whatever
the layout (JSONL line, single document, first item of a JSON list), when the
head holds all of it; :func:`head_fields` gives its leading fields even when a
huge value (a long system prompt) is cut by the 64 KiB limit.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, TypeVar

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.ingest.base import Reader, Source
from prefixcache.analyzer.ingest.compressed import strip_suffix

_DECODER = json.JSONDecoder()
_READERS_PACKAGE = f"{__package__}.readers"

R = TypeVar("R", bound=type)

#: (module, class name) → (priority, reader instance), filled by :func:`reader` at import.
_registered: dict[tuple[str, str], tuple[int, Reader]] = {}


def reader(priority: int) -> Callable[[R], R]:
    """Class decorator registering one instance of a reader class (made without arguments)
    for detection and ``--input-format``; returns the class unchanged.

    ``priority`` (an int, unique among readers) orders the registry: sniffing ties go to
    the lower number, and :func:`formats` lists readers by it. The readers number in tens
    by module (more specific formats first), a module's second reader adding one.
    """

    def register(cls: R) -> R:
        _registered[(cls.__module__, cls.__qualname__)] = (priority, cls())
        return cls

    return register


def reader_modules() -> list[str]:
    """Every module of the readers folder (dotted names, alphabetical), imported: importing
    is what registers their readers."""
    package = importlib.import_module(_READERS_PACKAGE)
    names = sorted(f"{_READERS_PACKAGE}.{m.name}" for m in pkgutil.iter_modules(package.__path__))
    for name in names:
        importlib.import_module(name)
    return names


@lru_cache(maxsize=1)
def registry() -> dict[str, Reader]:
    """Format name → reader, in priority order (every reader module imported on first use).

    Raises ConfigError when two readers claim one format or one priority (the tie-break
    order must be explicit)."""
    reader_modules()
    out: dict[str, Reader] = {}
    seen: dict[int, str] = {}
    for priority, found in sorted(_registered.values(), key=lambda pr: pr[0]):
        if found.format in out:
            raise ConfigError(f"two readers claim format {found.format!r}")
        if priority in seen:
            raise ConfigError(f"readers {seen[priority]!r} and {found.format!r} share priority {priority}")
        seen[priority] = found.format
        out[found.format] = found
    return out


def formats() -> list[str]:
    """All format names, in registry order."""
    return list(registry())


def get_reader(name: str) -> Reader:
    """The reader for a ``--format`` name; :class:`ConfigError` naming the known ones if unknown."""
    try:
        return registry()[name]
    except KeyError:
        raise ConfigError(f"unknown format {name!r}; known: {', '.join(formats())}") from None


def scores(head: str, name: str) -> list[tuple[float, str]]:
    """Every reader's sniff confidence, highest first (stable on ties)."""
    ranked = [(float(r.sniff(head, name)), fmt) for fmt, r in registry().items()]
    return sorted(ranked, key=lambda t: -t[0])


def detect_reader(source: Source, head: str) -> Reader:
    """The reader that claims ``head`` most confidently.

    Raises :class:`InputError` (record 0) when no reader claims it; the reason
    says what the file starts with, to help pick ``--format``.
    """
    best, fmt = scores(head, strip_suffix(source.name))[0]
    if best <= 0:
        start = head.lstrip()[:40].replace("\n", " ")
        raise InputError(f"unknown format (starts with {start!r}); name the reader with --input-format", source.name, 0)
    return registry()[fmt]


def first_object(head: str) -> dict[str, Any] | None:
    """The first JSON object in ``head``: a JSONL line, a whole document, or a list's first item.

    Returns None when the head holds no complete object (e.g. a huge first record
    cut by the 64 KiB limit); sniffers then fall back to substring checks.
    """
    text = head.lstrip()
    pos = 0
    if text.startswith("["):
        pos = 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not text[pos:pos + 1] == "{":
        return None
    try:
        obj, _ = _DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


class PartialDict(dict):
    """A JSON object cut by the head limit: the fields that precede the cut."""


@dataclass(frozen=True)
class Cut:
    """A non-object value cut by the head limit; ``kind`` is its first character (``[``, ``"``...)."""

    kind: str


def _ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _partial_object(text: str, pos: int) -> tuple[dict[str, Any], bool]:
    """Fields of the object opening at ``text[pos]``; (fields, complete). Values cut by the end of
    ``text`` become :class:`PartialDict` (objects, recursively) or :class:`Cut`; scanning stops there."""
    out: dict[str, Any] = {}
    pos = _ws(text, pos + 1)
    try:
        while pos < len(text) and text[pos] == '"':
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _ws(text, pos)
            if text[pos] != ":":
                return out, False
            pos = _ws(text, pos + 1)
            try:
                out[key], pos = _DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                if text[pos:pos + 1] == "{":
                    out[key] = PartialDict(_partial_object(text, pos)[0])
                else:
                    out[key] = Cut(text[pos:pos + 1])
                return out, False
            pos = _ws(text, pos)
            if text[pos:pos + 1] != ",":
                return out, text[pos:pos + 1] == "}"
            pos = _ws(text, pos + 1)
    except (ValueError, IndexError, RecursionError):
        pass
    return out, False


def head_fields(head: str) -> dict[str, Any]:
    """Top-level fields of the first record in ``head`` (a JSONL line, a document or a list's
    first item), even when a huge value cuts the head: fields after the cut are unknown, the cut
    value is a :class:`PartialDict` or :class:`Cut`. ``{}`` when the head holds no object."""
    text = head.lstrip()
    pos = _ws(text, 1) if text.startswith("[") else 0
    if text[pos:pos + 1] != "{":
        return {}
    return _partial_object(text, pos)[0]


def is_array(value: Any) -> bool:
    """A JSON list, complete or cut by the head limit."""
    return isinstance(value, list) or value == Cut("[")


def is_list_document(head: str) -> bool:
    """True when the file is one JSON list (``[`` first), not JSONL."""
    return head.lstrip().startswith("[")


def single_document(head: str, complete: bool) -> bool:
    """True when the file holds one JSON object (one call per file), not JSONL or a list.

    ``complete`` says whether ``head`` is the whole file. A pretty-printed object
    (first line not a JSON value by itself) counts even when cut.
    """
    text = head.strip()
    if not text.startswith("{"):
        return False
    if complete:
        try:
            _, end = _DECODER.raw_decode(text)
            return end == len(text)
        except (ValueError, RecursionError):
            return False
    first = text.split("\n", 1)[0]
    try:
        json.loads(first)
    except (ValueError, RecursionError):
        return True
    return False
