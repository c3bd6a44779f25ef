"""Reading the text files a user names (templates, contexts, tokenizer configs) with one-line errors.

Every failure is a :class:`ConfigError` whose message starts with the path and says
what is wrong — missing, a folder, unreadable, not UTF-8 text, or binary (NUL
bytes) — instead of ``UnicodeDecodeError`` / ``IsADirectoryError`` tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefixcache.analyzer import limits
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest.jsonio import FieldError, too_deep


def not_text(path: str | Path, what: str, exc: UnicodeDecodeError) -> str:
    """The message for a file that is not UTF-8: the path, ``what`` it should be, and the first bad byte."""
    bad = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes) else "?"
    return f"{path}: {what} is not UTF-8 text (byte 0x{bad} at offset {exc.start}; a binary file?)"


def read_text(path: str | Path, what: str, limit: str = "MAX_TEMPLATE_BYTES") -> str:
    """The text of a UTF-8 file (``what`` names it in errors: ``"chat template"``, ``"context file"``).

    Raises ConfigError ``"<path>: <what> ..."`` when the file is missing, a folder,
    unreadable, not valid UTF-8, holds NUL bytes (a binary file), or is longer than the
    limit named ``limit`` (:mod:`prefixcache.analyzer.limits`; read no further than one byte past it).
    """
    p = Path(path)
    most = limits.value(limit)
    try:
        with p.open("rb") as f:
            data = f.read(most + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: {what} is a folder, not a file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > most:
        raise ConfigError(f"{path}: {what} is over {most:,} bytes (PREFIXCACHE_{limit} sets the limit)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(not_text(path, what, exc)) from None
    if "\x00" in text:
        raise ConfigError(f"{path}: {what} is a binary file (it holds NUL bytes), not text")
    return text


def read_json(path: str | Path, what: str) -> Any:
    """The JSON value of a UTF-8 file; ConfigError ``"<path>[:<line>]: ..."`` as :func:`read_text`, or when
    the text is not valid JSON (truncated, not JSON at all), is longer than ``MAX_DOCUMENT_BYTES`` or
    nested deeper than ``MAX_JSON_DEPTH``."""
    text = read_text(path, what, "MAX_DOCUMENT_BYTES")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: {what} is not valid JSON: {exc.msg}") from None
    except RecursionError:
        value = None
    deep = too_deep(value) if value is not None else FieldError("", "JSON nested too deeply to decode")
    if deep is not None:
        raise ConfigError(f"{path}: {what}{' field ' + deep.field if deep.field else ''}: {deep.reason}")
    return value
