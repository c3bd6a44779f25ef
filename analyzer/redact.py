"""Redaction for ``--redact``: prompt text becomes a length and a keyed hash.

A redacted value prints as ``<N chars, h:0123456789abcdef01234567>``: its length and a
96-bit BLAKE2b MAC of its UTF-8 bytes under a secret key. The key is random per run
(hashes then compare only within one run: a brute-force search over likely values —
timestamps, short ids — is impossible without the key), or derived from
``--redact-key`` / ``$PREFIXCACHE_REDACT_KEY`` when hashes must compare across runs (keep
that key as secret as the logs). Never an unkeyed hash: an 8-hex xxh64 of a timestamp
is found by brute force in under a second.

:func:`redact_message` redacts every quoted part of a message (``'...'`` or ``"..."``,
how reasons quote input: ``unknown format (starts with '{"api_key": ...')``), so error
lines and skip reasons print no input either. :func:`enable` turns that on for the
process (the CLI's error printer asks :func:`active`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import secrets

#: Environment variable holding a redaction key (hashes comparable across runs).
KEY_ENV = "PREFIXCACHE_REDACT_KEY"
#: Hex digits of a redaction hash (96 bits).
HASH_HEX = 24

_state: dict[str, object] = {"key": None, "on": False}
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def set_key(key: str | None) -> None:
    """Use ``key`` (a passphrase) for this process's hashes; None or "" = ``$PREFIXCACHE_REDACT_KEY``
    when set, else a fresh random key."""
    key = key or os.environ.get(KEY_ENV) or None
    if key:
        _state["key"] = hashlib.blake2b(key.encode("utf-8"), digest_size=32, person=b"prefixcache").digest()
    else:
        _state["key"] = secrets.token_bytes(32)


def _key() -> bytes:
    if _state["key"] is None:
        set_key(None)
    return _state["key"]  # type: ignore[return-value]


def digest(text: str) -> str:
    """The keyed hash of ``text`` (:data:`HASH_HEX` hex digits)."""
    mac = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=_key(), digest_size=HASH_HEX // 2)
    return mac.hexdigest()


def redact_text(text: str) -> str:
    """``<N chars, h:HASH>`` for ``text``."""
    return f"<{len(text)} chars, h:{digest(text)}>"


def redact_message(message: str) -> str:
    """``message`` with every quoted part (``'...'``, ``"..."``) replaced by :func:`redact_text` of it."""
    return _QUOTED.sub(lambda m: redact_text(m.group()[1:-1]), message)


def redact_skipped(skipped) -> tuple:
    """``skipped`` (:class:`~prefixcache.analyzer.model.Skipped` records) with each reason
    through :func:`redact_message`: reasons quote input (``starts with '{"api_key": ...'``)."""
    return tuple(dataclasses.replace(s, reason=redact_message(s.reason)) for s in skipped)


def enable(on: bool = True, key: str | None = None) -> None:
    """Redact every message the CLI prints from now on (``on``), with ``key`` (see :func:`set_key`)."""
    _state["on"] = on
    _state["spec"] = None
    if on:
        set_key(key)


def use(on: bool, key: str | None = None) -> None:
    """Turn redaction on for a library entry point called with ``redact`` (``on``) and
    ``redact_key`` (``key``); nothing when ``on`` is False. The key in use is kept when it is
    already on with the same ``key`` (an entry point that calls another, or a second call of
    one run: one key, so hashes compare within the run)."""
    if not on or (_state["on"] and _state.get("spec") == key):
        return
    enable(True, key)
    _state["spec"] = key


def active() -> bool:
    """Whether :func:`enable` turned redaction on for this process."""
    return bool(_state["on"])
