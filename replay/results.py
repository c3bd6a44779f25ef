"""The replay results file of both stacks: the run key every row carries, the resumed rows, the streaming writer.

Rows (:class:`~prefixcache.analyzer.replay_rows.LocalRow`,
:class:`~prefixcache.analyzer.replay_rows.ServerRow`) are written and flushed one JSON
line per request as it finishes, so an interrupted run keeps everything done so far and
``--resume`` continues it; they are read back by the one reader,
:func:`prefixcache.analyzer.replay_rows.read_rows`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import IO

import orjson

from prefixcache.analyzer.replay_rows import R, ReplayRow, load_rows, read_rows


def run_key(**settings: object) -> str:
    """A short digest (12 hex digits) of the settings that decide a run's figures (model,
    dtype, device kind, block size, capacity, policy, template, tokenizer, max prompt and
    new tokens; the server and ``--send`` for a server replay). Every result row carries
    it; ``--resume`` refuses rows of another run."""
    blob = orjson.dumps({k: str(v) for k, v in sorted(settings.items())})
    return hashlib.blake2b(blob, digest_size=6).hexdigest()


def resumed(out: Path | None, resume: bool, row_type: type[R]) -> list[R]:
    """The rows of ``out`` to continue (``--resume`` of an existing file; else none).
    InputError for a bad line before the last (a torn last line is dropped)."""
    return load_rows(out, row_type) if resume and out is not None and out.exists() else []


def repair_tail(path: Path, row_type: type[ReplayRow]) -> int:
    """Cut a torn last line off ``path`` (and end an intact last line with a newline) so
    rows appended by ``--resume`` start on a line of their own. InputError for a bad line
    before the last (:func:`~prefixcache.analyzer.replay_rows.read_rows`). Returns the bytes cut."""
    _, keep = read_rows(path, row_type.from_json)
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(keep)
        if keep:
            f.seek(keep - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
    return size - keep


class ResultWriter:
    """Appends rows of ``row_type`` to the JSONL file ``path`` (None = write nothing), one
    flushed line per request. With ``append`` a torn last line of the existing file is
    cut first (:func:`repair_tail`). The file is opened at the first row, so a run that
    writes none (every record skipped, stopped before the first request) leaves an
    earlier run's file as it was."""

    def __init__(self, path: Path | None, row_type: type[ReplayRow], append: bool = False) -> None:
        self.path = path
        self.append = append
        self._f: IO[bytes] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if append and path.exists():
                repair_tail(path, row_type)

    def write(self, row: ReplayRow) -> None:
        """Write one row and flush it (opening the file at the first)."""
        if self.path is None:
            return
        if self._f is None:
            self._f = self.path.open("ab" if self.append else "wb")
        self._f.write(row.to_json() + b"\n")
        self._f.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._f is not None:
            self._f.close()
            self._f = None
