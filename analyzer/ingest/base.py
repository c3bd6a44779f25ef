"""What a log reader is, and the records it yields.

A reader module (one per format, in this package) defines one class implementing
:class:`Reader`. Readers stream: they read line by line (JSONL) or decode one JSON
document, and yield, for every input record, either :class:`Request` objects or a
:class:`Skipped` naming the record and the reason. Nothing is silently dropped.
Readers raise :class:`~prefixcache.analyzer.errors.InputError` only for a file
that cannot be read at all (not UTF-8, not JSON, wrong top-level shape); a bad
record inside a good file is a ``Skipped``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Callable, Iterator, Protocol

from prefixcache.analyzer.model import Request, Skipped


@dataclass(frozen=True)
class Source:
    """One input: ``name`` is the path as given (``-`` for stdin); ``open`` returns
    a fresh binary stream each call (stdin is buffered once by the caller), already
    decompressed for ``.gz`` / ``.zst`` / ``.bz2`` input.

    ``walked`` marks a file found in a directory walk (or a glob): a file there that
    is not a log (unknown format, empty, binary) is a note, not an error.
    ``skip`` is non-empty for a walked entry that is never opened (not a regular
    file, not a log suffix): the reason it is listed as skipped.
    """

    name: str
    open: Callable[[], IO[bytes]]
    walked: bool = False
    skip: str = ""


@dataclass(frozen=True)
class RecordsSeen:
    """Last item a reader yields for a source: how many records it read."""

    source: str
    records: int


class Reader(Protocol):
    """A log format.

    ``format`` is the stable name used by ``--format`` and in JSON output.
    ``sniff(head, name)`` gets the first bytes of the file decoded as UTF-8
    (up to 64 KiB, possibly cut mid-record) and the file name, and returns a
    confidence in [0, 1]; the highest wins, 0 means "not mine".
    ``read(source)`` yields requests and skips, and last one :class:`RecordsSeen`
    with the number of input records (lines of a JSONL file, items of a JSON list,
    steps of a trajectory: the unit ``Provenance.record`` counts in).
    """

    format: str

    def sniff(self, head: str, name: str) -> float: ...

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]: ...
