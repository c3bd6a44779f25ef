"""Compressed input (``.gz``, ``.zst``, ``.bz2``), streamed.

A file is decompressed when its first bytes are a gzip, zstd or bzip2 magic number
(whatever its name), so ``logs.jsonl.gz`` and a compressed stdin read like plain
text. Decompression streams (the stdlib ``gzip`` / ``bz2`` modules, the
``zstandard`` package for zstd; never hand parsing): readers iterate lines of the
decompressed text and only one buffer is in memory. Damaged compressed data (a
truncated ``.gz``, a bad zstd frame) surfaces as :class:`OSError` naming the
codec, which :class:`~prefixcache.analyzer.ingest.Ingest` turns into one bad
``Skipped`` for the file.

A decompression bomb is refused as it is read, not after: the stream counts the bytes it
has produced and the compressed bytes it has consumed, and raises
:class:`~prefixcache.analyzer.errors.InputError` naming the file and the limit once the
output passes :data:`MAX_EXPANDED_BYTES` (``PREFIXCACHE_MAX_EXPANDED_BYTES``) or, past the
first :data:`RATIO_AFTER_BYTES`, the output is more than :data:`MAX_EXPANSION_RATIO`
(``PREFIXCACHE_MAX_EXPANSION_RATIO``) times the input. The records read before are kept.
A zstd file of several frames (``pzstd``, concatenated ``.zst``) is read across all of them,
as a gzip file of several members is.
"""

from __future__ import annotations

import bz2
import gzip
import io
from typing import IO, Callable

from prefixcache.analyzer import limits
from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.limits import LIMITS

#: Magic number → codec name. Sources: RFC 1952 (gzip), RFC 8878 (zstd frame), bzip2 "BZh".
MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"))
#: File-name suffixes of compressed input (stripped before suffix checks and name-based sniffing).
SUFFIXES = (".gz", ".zst", ".zstd", ".bz2")

#: Most bytes one compressed input may expand to. ``PREFIXCACHE_MAX_EXPANDED_BYTES`` overrides it.
MAX_EXPANDED_BYTES = int(LIMITS["MAX_EXPANDED_BYTES"].default)
#: Largest ratio of decompressed to compressed bytes, checked once :data:`RATIO_AFTER_BYTES` have
#: come out. Deflate cannot pass ~1032 (RFC 1951's longest match, 258 bytes per 2 bits); JSON logs
#: are ~5-50 (gzip) and, for sessions resent whole under zstd's long window, up to a few hundred.
#: ``PREFIXCACHE_MAX_EXPANSION_RATIO`` overrides it.
MAX_EXPANSION_RATIO = int(LIMITS["MAX_EXPANSION_RATIO"].default)
#: Output after which the expansion ratio is checked (a small file may compress very well).
RATIO_AFTER_BYTES = 32 << 20


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


class _Counted(io.RawIOBase):
    """The compressed stream, counting the bytes the codec takes from it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.taken = raw, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        data = self.raw.read(len(buf))
        buf[: len(data)] = data
        self.taken += len(data)
        return len(data)

    def read(self, n: int = -1) -> bytes:  # gzip and bz2 call read, not readinto
        data = self.raw.read(n)
        self.taken += len(data)
        return data


class _Checked(io.RawIOBase):
    """A decompressing stream: codec errors become :class:`OSError` naming the codec, and the
    expansion limits of the module docstring raise :class:`InputError` naming ``name``."""

    def __init__(self, inner: IO[bytes], raw: _Counted, codec: str, name: str) -> None:
        self.inner, self.raw, self.codec, self.name = inner, raw, codec, name
        self.out = 0
        self.max_out = limits.value("MAX_EXPANDED_BYTES")
        self.max_ratio = limits.value("MAX_EXPANSION_RATIO")

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        try:
            n = self.inner.readinto(buf)  # type: ignore[attr-defined]
        except (EOFError, OSError, ValueError, RuntimeError) as e:  # zstandard.ZstdError is a RuntimeError
            raise OSError(f"damaged {self.codec} data: {e}") from None
        self.out += n
        if self.out > self.max_out:
            raise InputError(f"{self.codec} data expands past {self.max_out:,} bytes "
                             "(PREFIXCACHE_MAX_EXPANDED_BYTES sets the limit); the rest is not read", self.name, 0)
        if self.out > RATIO_AFTER_BYTES and self.out > self.max_ratio * max(self.raw.taken, 1):
            raise InputError(f"{self.codec} data expands more than {self.max_ratio}x ({self.out:,} bytes from "
                             f"{self.raw.taken:,}): a decompression bomb? (PREFIXCACHE_MAX_EXPANSION_RATIO sets the "
                             "limit); the rest is not read", self.name, 0)
        return n

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
    return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True, read_across_frames=True)


def decompressing(raw: IO[bytes], name: str = "") -> IO[bytes]:
    """``raw`` itself when it is plain, else a buffered decompressing stream over it.

    ``raw`` must support ``peek`` or ``seek`` (a file opened with ``open(path, "rb")``,
    a ``BytesIO``); the magic bytes are read without consuming them. ``name`` is the input
    the expansion limits' :class:`InputError` names.
    """
    head = raw.peek(4)[:4] if hasattr(raw, "peek") else _peek_seek(raw)
    codec = codec_of(head)
    if codec is None:
        return raw
    inner: IO[bytes]
    counted = _Counted(raw)
    if codec == "gzip":
        inner = gzip.GzipFile(fileobj=counted, mode="rb")  # type: ignore[arg-type]
    elif codec == "bzip2":
        inner = bz2.BZ2File(counted, mode="rb")  # type: ignore[arg-type]
    else:
        inner = _zstd(counted)  # type: ignore[arg-type]
    return io.BufferedReader(_Checked(inner, counted, codec, name), buffer_size=256 * 1024)  # type: ignore[return-value]


def _peek_seek(raw: IO[bytes]) -> bytes:
    pos = raw.tell()
    head = raw.read(4)
    raw.seek(pos)
    return head


def opener(open_raw: Callable[[], IO[bytes]], name: str = "") -> Callable[[], IO[bytes]]:
    """An ``open`` for :class:`~.base.Source` that decompresses transparently (``name``: the input
    a refused bomb names)."""
    return lambda: decompressing(open_raw(), name)
