"""Reading the text files a user names (templates, contexts, tokenizer configs) with one-line errors.

Every failure is a :class:`ConfigError` whose message starts with the path and says
what is wrong — missing, a folder, unreadable, not UTF-8 text, or binary (NUL
bytes) — instead of ``UnicodeDecodeError`` / ``IsADirectoryError`` tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefixcache.analyzer.errors import ConfigError


def not_text(path: str | Path, what: str, exc: UnicodeDecodeError) -> str:
    """The message for a file that is not UTF-8: the path, ``what`` it should be, and the first bad byte."""
    bad = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes) else "?"
    return f"{path}: {what} is not UTF-8 text (byte 0x{bad} at offset {exc.start}; a binary file?)"


def read_text(path: str | Path, what: str) -> str:
    """The text of a UTF-8 file (``what`` names it in errors: ``"chat template"``, ``"context file"``).

    Raises ConfigError ``"<path>: <what> ..."`` when the file is missing, a folder,
    unreadable, not valid UTF-8, or holds NUL bytes (a binary file).
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: {what} is a folder, not a file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(not_text(path, what, exc)) from None
    if "\x00" in text:
        raise ConfigError(f"{path}: {what} is a binary file (it holds NUL bytes), not text")
    return text


def read_json(path: str | Path, what: str) -> Any:
    """The JSON value of a UTF-8 file; ConfigError ``"<path>[:<line>]: ..."`` as :func:`read_text`, or when
    the text is not valid JSON (truncated, not JSON at all)."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: {what} is not valid JSON: {exc.msg}") from None
