"""Input expansion: paths, directories, globs and ``-`` (stdin) into :class:`Source` s.

Order is deterministic: inputs in the order given; inside a directory or a glob,
files sorted by path. A directory is walked recursively and yields only log files
(:data:`LOG_SUFFIXES`: ``.json``, ``.jsonl``, ``.ndjson``, ``.traj``, ``.log``),
skipping hidden files and folders (``.git``), so a folder with READMEs or a
checkout can be passed as is; files named directly or by a glob are always read.
A file named twice is read once. Stdin is read once into memory (it cannot be re-opened)
and then served like a file named ``-``.
"""

from __future__ import annotations

import glob
import io
import os
import sys
from pathlib import Path
from typing import IO, Iterator, Sequence

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.base import Source

_GLOB_CHARS = set("*?[")
#: File suffixes a directory walk picks up (lower-cased comparison).
LOG_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj", ".log")


def file_source(path: str) -> Source:
    """A :class:`Source` that opens ``path`` in binary mode on each call."""
    return Source(path, lambda: open(path, "rb"))


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
            stream = stdin if stdin is not None else sys.stdin.buffer
            sources.append(bytes_source("-", stream.read()))
            continue
        for path in _expand_one(arg):
            key = str(Path(path).resolve())
            if key not in seen:
                seen.add(key)
                sources.append(file_source(path))
    return sources
