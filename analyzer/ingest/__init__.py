"""Ingest: read agent logs of any supported format into :class:`Request` objects.

>>> ing = Ingest(["logs/"])            # files, directories (recursive), globs, "-"
>>> for req in ing: ...                # streams, one Request per model call
>>> ing.summary                        # IngestSummary(files, records, requests, sessions, skipped)

Each file is checked (empty / binary / not UTF-8 ⇒ one bad ``Skipped`` with
record 0; a note instead for a file found in a directory walk, where files that
are not logs, FIFOs and devices are listed as skipped notes without being opened),
decompressed when it is ``.gz`` / ``.zst`` / ``.bz2``, its format detected from the
first 64 KiB (or forced with ``format=``), and handed to that format's reader, which streams requests and
``Skipped`` records. Sessions and indexes are assigned on the fly by
:class:`~.sessions.SessionGrouper`. Nothing is silently dropped: every record of
every file ends up in a request or in ``summary.skipped``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO, Iterator, Sequence

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.model import Request, Skipped
from prefixcache.analyzer.ingest.base import Reader, RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import detect_reader, formats, get_reader, single_document
from prefixcache.analyzer.ingest.jsonio import HEAD_BYTES, FieldError, check_head, skipped_message
from prefixcache.analyzer.ingest.sessions import SessionGrouper
from prefixcache.analyzer.ingest.readers import columnar
from prefixcache.analyzer.ingest.sources import expand_inputs

__all__ = ["Ingest", "IngestSummary", "formats", "skipped_message"]

#: Formats that always hold one model call per file: their sessions chain across a directory.
ONE_CALL_PER_FILE = frozenset({"openhands-completions"})


@dataclass(frozen=True, slots=True)
class IngestSummary:
    """Counts of one pass over the inputs.

    ``files``: sources read; ``records``: input records (JSONL lines, list items,
    trajectory steps) reported by the readers; ``requests``: requests yielded;
    ``sessions``: distinct sessions among them; ``skipped``: every record (or
    whole file, record 0) not turned into a request, with the reason.
    """

    files: int
    records: int
    requests: int
    sessions: int
    skipped: tuple[Skipped, ...]

    @property
    def bad(self) -> tuple[Skipped, ...]:
        """The skipped records that are errors (``bad=True``), not notes."""
        return tuple(s for s in self.skipped if s.bad)


def no_requests_reason(summary: IngestSummary) -> str:
    """Why a pass yielded no request, from its counts and skipped records (the first three
    distinct reasons, with how many records each covers)."""
    reasons: dict[str, int] = {}
    for s in summary.skipped:
        reasons[s.reason] = reasons.get(s.reason, 0) + 1
    why = "; ".join(f"{r} ({n} records)" if n > 1 else r for r, n in list(reasons.items())[:3])
    more = f"; and {len(reasons) - 3} other reason(s)" if len(reasons) > 3 else ""
    return (f"no requests in the input(s): {summary.records} record(s) read, none is a model call"
            + (f" ({why}{more})" if why else " (nothing but context: no prompt or usage was logged)"))


class Ingest:
    """Iterate the requests of some log inputs.

    ``inputs`` are expanded immediately (:class:`InputError` for a path that
    does not exist); ``format`` is ``"auto"`` or a format name
    (:class:`~prefixcache.analyzer.errors.ConfigError` if unknown); ``stdin`` is
    the stream ``-`` reads (default ``sys.stdin.buffer``). Iterating streams the
    requests; each pass starts afresh. ``summary`` describes the last complete
    pass (running one, discarding the requests, if none has been made yet).
    With ``require_requests`` (what every command passes), a pass that yields no
    request and no unreadable record (those already fail the command) raises :class:`InputError` at its end with the reason
    (:func:`no_requests_reason`): a command exits 2, never 0, on inputs read as nothing.
    """

    def __init__(self, inputs: Sequence[str], format: str = "auto", stdin: IO[bytes] | None = None,
                 require_requests: bool = False) -> None:
        self.format = format
        self.require_requests = require_requests
        self._forced = None if format == "auto" else get_reader(format)
        expanded = expand_inputs(inputs, stdin)
        self.sources: list[Source] = [s for s in expanded if not s.skip]
        #: Walked entries that are never opened (not a log, not a regular file), listed as skipped notes.
        self.passed_over: tuple[Skipped, ...] = tuple(Skipped(s.name, 0, s.skip, "", False)
                                                      for s in expanded if s.skip)
        self._summary: IngestSummary | None = None

    def __iter__(self) -> Iterator[Request]:
        grouper = SessionGrouper()
        records = requests = 0
        skipped: list[Skipped] = list(self.passed_over)
        for source in self.sources:
            scope = source.name
            for item in self._read(source):
                if isinstance(item, str):
                    scope = item
                elif isinstance(item, Request):
                    requests += 1
                    yield grouper.assign(item, scope)
                elif isinstance(item, Skipped):
                    skipped.append(item)
                else:
                    records += item.records
        self._summary = IngestSummary(len(self.sources), records, requests, grouper.sessions, tuple(skipped))
        if not requests and self.require_requests and not any(s.bad for s in skipped):
            raise InputError(no_requests_reason(self._summary), ", ".join(s.name for s in self.sources[:3]))

    def _read(self, source: Source) -> Iterator[str | Request | Skipped | RecordsSeen]:
        """One source through its reader; whole-file failures become one bad ``Skipped``.

        Yields first the session-chaining scope of the file (a string): the file
        itself, or its directory when the file holds one call (see sessions.py).
        """
        try:
            try:
                with source.open() as f:
                    data = f.read(HEAD_BYTES)
                    complete = not f.read(1)
                if data[:4] == columnar.MAGIC:  # a columnar block-hash trace: binary, so no head to sniff
                    yield from columnar.read(source)
                    return
                head = check_head(data, source.name)
                reader: Reader = self._forced or detect_reader(source, head)
            except InputError as e:  # a walked file that is not a log is a note, not an error
                if not source.walked:
                    raise
                yield Skipped(source.name, 0, f"not read: {e.reason}", e.field, False)
                return
            if reader.format in ONE_CALL_PER_FILE or (source.name != "-" and single_document(head, complete)):
                yield os.path.dirname(os.path.abspath(source.name))
            yield from reader.read(source)
        except InputError as e:
            yield Skipped(source.name, e.record, e.reason, e.field, True)
        except FieldError as e:
            yield Skipped(source.name, 0, e.reason, e.field, True)
        except OSError as e:
            yield Skipped(source.name, 0, f"cannot read file: {e.strerror or e}", "", True)
        except RecursionError:  # a reader walking a value nested deeper than the depth limit caught
            yield Skipped(source.name, 0, "JSON nested too deep to read (PREFIXCACHE_MAX_JSON_DEPTH)", "", True)

    def remember(self, summary: IngestSummary) -> None:
        """Record ``summary`` as the last complete pass: a caller that read the inputs another way
        (``simulate``'s columnar block-trace path) says what that pass read."""
        self._summary = summary

    @property
    def summary(self) -> IngestSummary:
        """Counts and skipped records of the last complete pass."""
        summary = self._summary
        while summary is None:
            try:
                for _ in self:
                    pass
            except InputError:
                if self._summary is None:  # a file that cannot be read, not an empty pass
                    raise
            summary = self._summary
        return summary
