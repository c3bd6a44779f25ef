"""Input expansion: paths, directories, globs and ``-`` (stdin) into :class:`Source` s.

Order is deterministic: inputs in the order given; inside a directory or a glob,
files sorted by path. A directory is walked recursively and yields only log files
(:data:`LOG_SUFFIXES`: ``.json``, ``.jsonl``, ``.ndjson``, ``.traj``, ``.log``),
skipping hidden files and folders (``.git``), so a folder with READMEs or a
checkout can be passed as is; files named directly or by a glob are always read.
A file named twice is read once. Stdin is read once into memory (it cannot be re-opened)
and then served like a file named ``-``; a closed stdin reads as empty.

Only regular files are read from a walk: a FIFO, socket or device met in a directory is
one bad skip ("not a regular file"), never opened (opening a FIFO blocks). A FIFO named
explicitly (``<(zcat log.gz)``) is read once into memory like stdin, giving up after
:data:`PIPE_TIMEOUT_S` seconds without data (``PREFIXCACHE_PIPE_TIMEOUT``); a device or
socket named explicitly is refused.
"""

from __future__ import annotations

import glob
import io
import os
import select
import stat
import sys
from pathlib import Path
from typing import IO, Iterator, Sequence

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.base import Source

_GLOB_CHARS = set("*?[")
#: File suffixes a directory walk picks up (lower-cased comparison).
LOG_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj", ".log")
#: Seconds a FIFO named explicitly may stay silent before the read gives up.
PIPE_TIMEOUT_S = 30.0
#: Most bytes read from a FIFO named explicitly (it is held in memory).
PIPE_MAX_BYTES = 4 << 30


def file_source(path: str) -> Source:
    """A :class:`Source` that opens ``path`` in binary mode on each call."""
    return Source(path, lambda: open(path, "rb"))


def _kind(mode: int) -> str:
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def refused_source(path: str, reason: str) -> Source:
    """A :class:`Source` whose ``open`` raises :class:`InputError` (record 0): a skipped file."""
    def refuse() -> io.BytesIO:
        raise InputError(reason, path, 0)

    return Source(path, refuse)


def read_pipe(path: str, timeout: float | None = None, max_bytes: int = PIPE_MAX_BYTES) -> bytes:
    """All bytes of a FIFO, read without blocking forever: a FIFO nobody writes to reads as
    empty; one whose writer stays silent ``timeout`` seconds (default :data:`PIPE_TIMEOUT_S`
    or ``$PREFIXCACHE_PIPE_TIMEOUT``), or that sends more than ``max_bytes``, raises
    :class:`InputError`."""
    if timeout is None:
        raw = os.environ.get("PREFIXCACHE_PIPE_TIMEOUT", "")
        timeout = float(raw) if raw.replace(".", "", 1).isdigit() else PIPE_TIMEOUT_S
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks, size = [], 0
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:  # a writer is connected but has sent nothing yet
                if not select.select([fd], [], [], timeout)[0]:
                    raise InputError(f"a FIFO that sent no data for {timeout:g} s "
                                     "(PREFIXCACHE_PIPE_TIMEOUT sets the wait)", path, 0) from None
                continue
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > max_bytes:
                raise InputError(f"a FIFO that sent more than {max_bytes:,} bytes", path, 0)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _named_source(path: str, explicit: bool) -> Source:
    """The source of one path: a file, a FIFO read once (when named explicitly), or a refusal."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return file_source(path)  # the reader reports the OSError as a skipped file
    if stat.S_ISREG(mode):
        return file_source(path)
    if explicit and stat.S_ISFIFO(mode):
        return bytes_source(path, read_pipe(path))
    how = "" if explicit else " found in a folder"
    return refused_source(path, f"not a regular file ({_kind(mode)}{how}); not read")


def _read_stdin(stream: IO[bytes] | None) -> bytes:
    """Everything on stdin; a closed stdin (no stream, or a closed descriptor) is empty."""
    if stream is None:
        return b""
    try:
        return stream.read()
    except (OSError, ValueError):
        return b""


def bytes_source(name: str, data: bytes) -> Source:
    """A :class:`Source` over in-memory bytes (stdin, tests)."""
    return Source(name, lambda: io.BytesIO(data))


def _walk(root: str) -> Iterator[str]:
    """Log files under ``root``, recursively, sorted; hidden entries and other suffixes skipped."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and name.lower().endswith(LOG_SUFFIXES):
                yield os.path.join(dirpath, name)


def _expand_one(arg: str) -> list[str]:
    """Paths named by one input argument; raises :class:`InputError` when it names nothing."""
    if os.path.isdir(arg):
        found = list(_walk(arg))
        if not found:
            raise InputError(f"directory holds no log files ({', '.join(LOG_SUFFIXES)})", arg, 0)
        return found
    if os.path.exists(arg):
        return [arg]
    if _GLOB_CHARS & set(arg):
        out: list[str] = []
        for hit in sorted(glob.glob(arg, recursive=True)):
            out.extend(_walk(hit) if os.path.isdir(hit) else [hit])
        if out:
            return out
        raise InputError("glob matches no file", arg, 0)
    raise InputError("no such file or directory", arg, 0)


def expand_inputs(inputs: Sequence[str], stdin: IO[bytes] | None = None) -> list[Source]:
    """Expand command-line inputs into sources, eagerly (so a bad path fails before reading).

    ``-`` reads ``stdin`` (default: ``sys.stdin.buffer``) once into memory; naming
    ``-`` twice is an error. Raises :class:`InputError` for a path that does not
    exist, a glob that matches nothing, a directory without log files, or an
    empty input list.
    """
    if not inputs:
        raise InputError("no input given", "", 0)
    sources: list[Source] = []
    seen: set[str] = set()
    for arg in inputs:
        if arg == "-":
            if "-" in seen:
                raise InputError("stdin given more than once", "-", 0)
            seen.add("-")
            stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
            sources.append(bytes_source("-", _read_stdin(stream)))
            continue
        for path in _expand_one(arg):
            key = str(Path(path).resolve())
            if key not in seen:
                seen.add(key)
                sources.append(_named_source(path, explicit=path == arg))
    return sources
