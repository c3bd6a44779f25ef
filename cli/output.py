"""Output files the commands write: whole or not at all.

:func:`atomic_output` is how every command writes a file (``--out``, ``--fix`` copies); the
checks before writing (never over an input, a link or an earlier run's output) are
:func:`prefixcache.cli.common.check_output`'s.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from prefixcache.analyzer.errors import ConfigError


@contextmanager
def atomic_output(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only once fully written (``path.part`` until then),
    so an error midway never leaves a half-written output, nor a ``.part`` file, behind.
    An OSError while creating, writing or renaming it raises ConfigError naming ``path``."""
    tmp = path.with_name(path.name + ".part")
    try:
        fh = open(tmp, "wb", opener=_no_follow)
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        with fh:
            yield fh
        tmp.replace(path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError) and exc.filename in (None, str(tmp)):
            raise _write_error(path, exc) from None
        raise


def _write_error(path: Path, exc: OSError) -> ConfigError:
    """One line for an OSError on ``path`` or its ``.part`` file (named when it is the culprit)."""
    culprit = f" ({exc.filename})" if exc.filename and exc.filename != str(path) else ""
    return ConfigError(f"{path}: cannot write{culprit}: {exc.strerror or exc}")


def _no_follow(name: str, flags: int) -> int:
    """``os.open`` that refuses a symbolic link at ``name`` (a planted ``.part`` link)."""
    return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)


def same_file(path: Path, item: Path) -> bool:
    """Whether ``path`` is the file ``item``, or a file inside the folder ``item`` under another name: the
    same inode (a hard link), which a comparison of resolved paths misses. The walk of a folder is
    ``os.walk`` (symbolic links to folders are not followed)."""
    try:
        mine = path.stat()
    except OSError:
        return False
    if item.is_dir():  # a hard link inside the folder (the path itself there is the command's own business)
        here = os.path.realpath(path)
        for folder, _, files in os.walk(item):
            for name in files:
                other_path = os.path.join(folder, name)
                try:
                    other = os.stat(other_path, follow_symlinks=False)
                except OSError:
                    continue
                if (other.st_dev, other.st_ino) == (mine.st_dev, mine.st_ino) and os.path.realpath(other_path) != here:
                    return True
        return False
    return os.path.samefile(path, item)
