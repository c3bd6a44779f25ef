"""Compressed input (``.gz``, ``.zst``, ``.bz2``), streamed.

A file is decompressed when its first bytes are a gzip, zstd or bzip2 magic number
(whatever its name), so ``logs.jsonl.gz`` and a compressed stdin read like plain
text. Decompression streams (the stdlib ``gzip`` / ``bz2`` modules, the
``zstandard`` package for zstd; never hand parsing): readers iterate lines of the
decompressed text and only one buffer is in memory. Damaged compressed data (a
truncated ``.gz``, a bad zstd frame) surfaces as :class:`OSError` naming the
codec, which :class:`~prefixcache.analyzer.ingest.Ingest` turns into one bad
``Skipped`` for the file.
"""

from __future__ import annotations

import bz2
import gzip
import io
from typing import IO, Callable

#: Magic number → codec name. Sources: RFC 1952 (gzip), RFC 8878 (zstd frame), bzip2 "BZh".
MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"))
#: File-name suffixes of compressed input (stripped before suffix checks and name-based sniffing).
SUFFIXES = (".gz", ".zst", ".zstd", ".bz2")


def strip_suffix(name: str) -> str:
    """``name`` without a trailing compression suffix (``a.jsonl.gz`` → ``a.jsonl``)."""
    lower = name.lower()
    for suffix in SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def codec_of(head: bytes) -> str | None:
    """The codec whose magic number ``head`` starts with; None for plain data."""
    for magic, codec in MAGIC:
        if head.startswith(magic):
            return codec
    return None


class _Checked(io.RawIOBase):
    """A decompressing stream whose codec errors become :class:`OSError` naming the codec."""

    def __init__(self, inner: IO[bytes], raw: IO[bytes], codec: str) -> None:
        self.inner, self.raw, self.codec = inner, raw, codec

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        try:
            return self.inner.readinto(buf)  # type: ignore[attr-defined]
        except (EOFError, OSError, ValueError, RuntimeError) as e:  # zstandard.ZstdError is a RuntimeError
            raise OSError(f"damaged {self.codec} data: {e}") from None

    def close(self) -> None:
        try:
            self.inner.close()
            self.raw.close()
        finally:
            super().close()


def _zstd(raw: IO[bytes]) -> IO[bytes]:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise OSError("zstd input needs the zstandard package (pip install zstandard)") from None
    return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)


def decompressing(raw: IO[bytes]) -> IO[bytes]:
    """``raw`` itself when it is plain, else a buffered decompressing stream over it.

    ``raw`` must support ``peek`` or ``seek`` (a file opened with ``open(path, "rb")``,
    a ``BytesIO``); the magic bytes are read without consuming them.
    """
    head = raw.peek(4)[:4] if hasattr(raw, "peek") else _peek_seek(raw)
    codec = codec_of(head)
    if codec is None:
        return raw
    inner: IO[bytes]
    if codec == "gzip":
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    elif codec == "bzip2":
        inner = bz2.BZ2File(raw, mode="rb")
    else:
        inner = _zstd(raw)
    return io.BufferedReader(_Checked(inner, raw, codec), buffer_size=256 * 1024)  # type: ignore[return-value]


def _peek_seek(raw: IO[bytes]) -> bytes:
    pos = raw.tell()
    head = raw.read(4)
    raw.seek(pos)
    return head


def opener(open_raw: Callable[[], IO[bytes]]) -> Callable[[], IO[bytes]]:
    """An ``open`` for :class:`~.base.Source` that decompresses transparently."""
    return lambda: decompressing(open_raw())
