"""The resource budget every untrusted input runs under: one table of named limits.

Logs, compressed streams, JSON text held in fields and Jinja templates come from other
people (see docs/security.md). Each bound on them is one :class:`Limit` here: a name, a
default, a unit and the environment variable that overrides it (``PREFIXCACHE_<NAME>``).
The code that enforces a limit reads it with :func:`value`; the table in
docs/security.md is generated from :data:`LIMITS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """One bound: ``name`` (``MAX_RECORD_BYTES``; the variable is ``PREFIXCACHE_MAX_RECORD_BYTES``),
    ``default`` in ``unit`` (bytes, levels, seconds, characters, ×), and what it bounds."""

    name: str
    default: float
    unit: str
    what: str

    @property
    def env(self) -> str:
        """The environment variable that overrides the default."""
        return f"PREFIXCACHE_{self.name}"

    def value(self) -> float:
        """``$PREFIXCACHE_<NAME>`` when it is a positive number, else the default."""
        raw = os.environ.get(self.env, "")
        try:
            got = float(raw)
        except ValueError:
            return self.default
        return got if got > 0 else self.default


#: Every limit, by name. Sources of the defaults are in the modules that enforce them.
LIMITS: dict[str, Limit] = {lim.name: lim for lim in (
    Limit("MAX_RECORD_BYTES", 1 << 30, "bytes", "one JSONL line; a longer line is one skipped record, never held"),
    Limit("MAX_DOCUMENT_BYTES", 128 << 20, "bytes", "a single-document file (one JSON list or object), decoded whole"),
    Limit("MAX_JSON_DEPTH", 128, "levels", "nesting of any JSON value: records, documents, JSON text held in fields "
                                           "(bodies, tool-call arguments, schemas)"),
    Limit("MAX_EXPANDED_BYTES", 64 << 30, "bytes", "what one compressed input may decompress to"),
    Limit("MAX_EXPANSION_RATIO", 500, "×", "decompressed ÷ compressed bytes, checked as the stream is read once "
                                           "32 MiB have come out"),
    Limit("MAX_PIPE_BYTES", 4 << 30, "bytes", "a FIFO named on the command line (read whole into memory)"),
    Limit("PIPE_TIMEOUT", 30, "seconds", "wait for a FIFO's writer, and for each of its chunks"),
    Limit("RENDER_TIMEOUT", 10, "seconds", "wall time of one template render, enforced from outside the render"),
    Limit("RENDER_MAX_CHARS", 16 << 20, "characters", "output of one render (4x the longest context window "
                                                      "in tokens), and the longest string or list an operator may build"),
    Limit("RENDER_MAX_MEMORY", 512 << 20, "bytes", "memory a template render may take, over what its worker starts "
                                                  "with (an address-space limit in the worker process)"),
    Limit("MAX_TEMPLATE_BYTES", 4 << 20, "bytes", "a template file or string"),
)}


def value(name: str) -> int:
    """The current value of limit ``name`` (a key of :data:`LIMITS`) as an integer; KeyError if unknown."""
    return int(LIMITS[name].value())


def seconds(name: str) -> float:
    """The current value of a limit in seconds (fractions kept)."""
    return LIMITS[name].value()
