"""Input expansion: paths, directories, globs and ``-`` (stdin) into :class:`Source` s.

Order is deterministic: inputs in the order given; inside a directory or a glob,
files sorted by path. A directory is walked recursively and reads the log files
(:data:`LOG_SUFFIXES`: ``.json``, ``.jsonl``, ``.ndjson``, ``.traj``, ``.log``, each
optionally compressed: ``.gz``, ``.zst``, ``.bz2``, plus the well-known log names of
:data:`LOG_NAMES` such as Aider's hidden ``.aider.llm.history``). Hidden files and
folders (``.git``) are passed over silently; every other file of the walk is a
:class:`Source` with a ``skip`` reason (another suffix; not a regular file: a FIFO,
socket or device is never opened), which :class:`~prefixcache.analyzer.ingest.Ingest`
lists as a skipped note. Files named directly are strict: regular files are always read.
A file named twice is read once. Stdin is read once into memory (it cannot be re-opened)
and then served like a file named ``-``; a closed stdin is a bad input ("stdin is closed").
Compressed files and stdin are decompressed as they stream (:mod:`.compressed`). A FIFO
named explicitly (``<(cat log)``) is read once into memory like stdin, giving up after
:data:`PIPE_TIMEOUT_S` seconds without data (``PREFIXCACHE_PIPE_TIMEOUT``); a device or socket named explicitly is refused.
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

from prefixcache.analyzer import limits
from prefixcache.analyzer.limits import LIMITS
from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.base import Source
from prefixcache.analyzer.ingest.compressed import opener, strip_suffix

_GLOB_CHARS = set("*?[")
#: File suffixes a directory walk picks up (lower-cased comparison).
LOG_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj", ".log")
#: Log files a walk reads by their exact name, hidden or not (Aider's chat-history log).
LOG_NAMES = frozenset({".aider.llm.history"})
#: Seconds a FIFO named explicitly may stay silent before the read gives up.
PIPE_TIMEOUT_S = LIMITS["PIPE_TIMEOUT"].default
#: Most bytes read from a FIFO named explicitly (it is held in memory).
PIPE_MAX_BYTES = int(LIMITS["MAX_PIPE_BYTES"].default)


def file_source(path: str, walked: bool = False) -> Source:
    """A :class:`Source` that opens ``path`` in binary mode on each call (decompressing)."""
    return Source(path, opener(lambda: open(path, "rb"), path), walked)


def read_pipe(path: str, timeout: float | None = None, max_bytes: int | None = None) -> bytes:
    """All bytes of a FIFO, read without blocking forever: the read waits up to ``timeout``
    seconds (default :data:`PIPE_TIMEOUT_S` or ``$PREFIXCACHE_PIPE_TIMEOUT``) for a writer to
    open it (a producer that starts late, ``<(slow command)``) and for each chunk; a FIFO no
    writer opens in time, one whose writer stays silent that long, or one that sends more
    than ``max_bytes`` raises :class:`InputError`. A writer that opens and closes without
    data gives b""."""
    timeout = limits.seconds("PIPE_TIMEOUT") if timeout is None else timeout
    max_bytes = limits.value("MAX_PIPE_BYTES") if max_bytes is None else max_bytes
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks, size, opened = [], 0, False
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
                if chunks or opened:
                    return b"".join(chunks)
                # no writer has opened the FIFO yet (read gives EOF): wait for one (Linux poll
                # reports a FIFO readable only once a writer has come and written or gone)
                if not select.select([fd], [], [], timeout)[0]:
                    raise InputError(f"no writer opened the FIFO within {timeout:g} s: empty input "
                                     "(PREFIXCACHE_PIPE_TIMEOUT sets the wait)", path, 0)
                opened = True
                continue
            size += len(chunk)
            if size > max_bytes:
                raise InputError(f"a FIFO that sent more than {max_bytes:,} bytes (PREFIXCACHE_MAX_PIPE_BYTES sets the limit)",
                                 path, 0)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _read_stdin(stream: IO[bytes] | None) -> bytes | None:
    """Everything on stdin; None when stdin is closed: no stream, a closed descriptor, or the
    process's own stdin when it started with descriptor 0 closed (``<&-``: ``sys.__stdin__``
    is None, whatever stand-in ``sys.stdin`` now is)."""
    if stream is None or (sys.__stdin__ is None and stream is getattr(sys.stdin, "buffer", None)):
        return None
    try:
        return stream.read()
    except (OSError, ValueError):
        return None


def _closed_stdin() -> IO[bytes]:
    raise InputError("stdin is closed", "-", 0)


def bytes_source(name: str, data: bytes) -> Source:
    """A :class:`Source` over in-memory bytes (stdin, tests), decompressed when compressed."""
    return Source(name, opener(lambda: io.BytesIO(data), name))


def _special(path: str) -> str:
    """What ``path`` is when it is not a regular file or directory (``FIFO``...); "" otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return ""
    for test, what in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return what
    return "special file"


def _walked(path: str) -> Source:
    """A walked file: read when it is a regular log file, else a :class:`Source` with a skip reason."""
    name = os.path.basename(path)
    special = _special(path)
    if special:
        return Source(path, _never, True, f"not a regular file ({special}): never opened in a directory walk")
    if name.endswith(tuple(LOG_NAMES)) or strip_suffix(name).lower().endswith(LOG_SUFFIXES):
        return file_source(path, walked=True)
    suffix = os.path.splitext(name)[1] or "none"
    return Source(path, _never, True, f"not a log file (suffix {suffix}); name it explicitly to read it")


def _never():  # the open of a source that is listed as skipped, never read
    raise OSError("not opened")


def _walk(root: str) -> Iterator[Source]:
    """Files under ``root``, recursively, sorted; hidden entries (except :data:`LOG_NAMES`) passed over."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") or name.endswith(tuple(LOG_NAMES)):
                yield _walked(os.path.join(dirpath, name))


def _explicit(arg: str) -> Source:
    """A file named directly: strict; a FIFO is read once (see :func:`read_pipe`), a device or
    socket is refused with a clear error."""
    special = _special(arg)
    if special == "FIFO":
        return bytes_source(arg, read_pipe(arg))
    if special:
        raise InputError(f"not a regular file ({special}); to read it, redirect it into stdin and pass -", arg, 0)
    return file_source(arg)


def _expand_one(arg: str) -> list[Source]:
    """Sources named by one input argument; raises :class:`InputError` when it names nothing."""
    if os.path.isdir(arg):
        found = list(_walk(arg))
        if not any(not s.skip for s in found):
            raise InputError(f"directory holds no log files ({', '.join(LOG_SUFFIXES)}, optionally compressed)",
                             arg, 0)
        return found
    if os.path.exists(arg):
        return [_explicit(arg)]
    if _GLOB_CHARS & set(arg):
        out: list[Source] = []
        for hit in sorted(glob.glob(arg, recursive=True)):
            if os.path.isdir(hit):
                out.extend(_walk(hit))
            elif _special(hit):
                out.append(_walked(hit))
            else:
                out.append(file_source(hit))
        if out:
            return out
        raise InputError("glob matches no file", arg, 0)
    raise InputError("no such file or directory", arg, 0)


def expand_inputs(inputs: Sequence[str], stdin: IO[bytes] | None = None) -> list[Source]:
    """Expand command-line inputs into sources, eagerly (so a bad path fails before reading).

    ``-`` reads ``stdin`` (default: ``sys.stdin.buffer``) once into memory; naming
    ``-`` twice is an error. Raises :class:`InputError` for a path that does not
    exist, a glob that matches nothing, a directory without log files, a device or
    socket named explicitly, a FIFO that stays silent, or an empty input list. Walked entries that are not
    read come back with a ``skip`` reason (see the module docstring).
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
            data = _read_stdin(stream)
            sources.append(Source("-", _closed_stdin) if data is None else bytes_source("-", data))
            continue
        for source in _expand_one(arg):
            key = str(Path(source.name).resolve())
            if key not in seen:
                seen.add(key)
                sources.append(source)
    return sources
