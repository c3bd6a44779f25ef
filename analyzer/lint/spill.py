"""Per-request lint results kept on disk, not in memory (issue 16: bounded memory).

A lint run reports one row per request and every finding, in input order, but only at
the end. :class:`ResultStore` writes each :class:`~prefixcache.analyzer.lint.engine.RequestResult`
as it is produced to an anonymous temporary file (deleted when closed or at exit), as
compact orjson bytes ``[row, [finding, ...]]`` (the row is the document's
:class:`~prefixcache.analyzer.lint.document.LintRequestRow`), and keeps only two integers a
request in memory (input position, file offset) plus the finding counts by
severity. The JSON document's rows and findings are re-serialized from those bytes
(:meth:`rows_json`, :meth:`findings_json`): orjson's own output parsed back and dumped
again is the same bytes (key order kept, floats round-trip exactly), so the document
is byte-identical to dumping the dataclasses. :meth:`results` rebuilds the result
objects for the formats that need them whole (SARIF, text, GitHub, rich).
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections import Counter
from typing import Iterator

import orjson

from prefixcache.analyzer.lint.document import request_row
from prefixcache.analyzer.lint.engine import RequestResult
from prefixcache.analyzer.lint.rules import Finding


class ResultStore:
    """Lint results spilled to a temporary file (see the module doc). :meth:`add` one per
    request (any order of input positions, each once); read back in input order."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="prefixcache-lint-")
        self._pos, self._off = array("q"), array("q", [0])  # record i is bytes off[i]:off[i+1]
        self._end = 0
        self._ordered = True
        #: Reported findings by severity (``error``, ``warning``, ``info``).
        self.by_severity: Counter = Counter()

    def __len__(self) -> int:
        return len(self._pos)

    @property
    def findings(self) -> int:
        """How many findings were reported in all."""
        return sum(self.by_severity.values())

    def add(self, pos: int, res: RequestResult) -> None:
        """Store ``res``, the result of the request at input position ``pos``."""
        blob = orjson.dumps([request_row(res), res.findings])
        if self._pos and pos < self._pos[-1]:
            self._ordered = False
        self._pos.append(pos)
        self._file.write(blob)
        self._end += len(blob)
        self._off.append(self._end)
        self.by_severity.update(f.severity for f in res.findings)

    def _records(self) -> Iterator[list]:
        """Every stored ``[row, findings]`` (parsed), in input order."""
        self._file.flush()
        fd = self._file.fileno()
        order = range(len(self._pos)) if self._ordered else sorted(range(len(self._pos)), key=self._pos.__getitem__)
        for i in order:
            yield orjson.loads(os.pread(fd, self._off[i + 1] - self._off[i], self._off[i]))

    def rows(self) -> Iterator[dict]:
        """Each request's row (the document's ``requests[]`` item, as parsed JSON)."""
        return (rec[0] for rec in self._records())

    def finding_dicts(self) -> Iterator[dict]:
        """Each finding (the document's ``findings[]`` item, as parsed JSON), in input order."""
        return (f for rec in self._records() for f in rec[1])

    def results(self) -> tuple[RequestResult, ...]:
        """The stored results rebuilt (input order)."""
        return tuple(_result(row, found) for row, found in self._records())

    def close(self) -> None:
        """Delete the file (also done when the store is collected)."""
        self._file.close()


def _pair(value: list | None) -> tuple[str, int] | None:
    return None if value is None else (value[0], value[1])


def _finding(d: dict) -> Finding:
    d["shared_with"] = _pair(d["shared_with"])
    return Finding(**d)


def _result(row: dict, found: list[dict]) -> RequestResult:
    del row["reusable_fraction"]  # a property of the result
    row["shared_with"], row["compared_with"] = _pair(row["shared_with"]), _pair(row["compared_with"])
    return RequestResult(**row, findings=tuple(_finding(f) for f in found))
