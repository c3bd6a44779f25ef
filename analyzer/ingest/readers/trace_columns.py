"""A Mooncake block-hash trace read straight into numpy columns (``simulate``'s columnar path).

:class:`~.traces.MooncakeReader` makes a :class:`~prefixcache.analyzer.model.Request` a line (with
its provenance, usage and :class:`~prefixcache.analyzer.model.BlockTrace`), which the preparer,
lint and the simulator then each turn into objects of their own. For ``simulate --cache blocks``
on a Mooncake trace none of that is read: :func:`read_columns` parses each line (orjson) into
flat columns — request offsets and int64 block ids, times, input lengths, line numbers — and
nothing else is kept. (Every module here is imported to register readers: numpy is imported only when
the columns are read.)

It reads only what :class:`~.traces.MooncakeReader` would read **whole and without a note**:
one regular, uncompressed file detected (or named with ``--input-format``) as Mooncake, every
line a JSON object with exactly ``timestamp`` (a number), ``input_length`` (an int ≥ 0),
``output_length`` (an int ≥ 0 or null) and ``hash_ids`` (a non-empty list of int64 ints), no
blank line. Anything else — a bad or odd record, a second file, stdin — returns None and the
caller takes the object path, which reads it as before (its skipped records, errors and notes
are unchanged). So the two paths read the same requests; tests compare them on every shared
trace (``tests/analyzer/cache/simulate/test_trace_columns.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING

import orjson

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.readers.traces import MooncakeReader, _block_size, _stem

if TYPE_CHECKING:
    import numpy as np

#: The keys of a record the columnar path reads; a record with any other is left to the object path.
_KEYS = frozenset({"timestamp", "input_length", "output_length", "hash_ids"})
#: Bytes read at a time.
_CHUNK = 16 << 20
_COMPRESSED = (".gz", ".zst", ".bz2")


@dataclass(frozen=True, slots=True)
class TraceColumns:
    """A block-hash trace in input order, as columns (``n`` requests).

    ``offsets`` (n+1, int64): request ``i``'s ids are ``ids[offsets[i]:offsets[i+1]]``; ``ids``
    (int64): the prefix-chained block ids; ``times`` (float64, seconds); ``tokens`` (int64: input
    length, tokens); ``lines`` (int64: the 1-based line of each request, its ``record``);
    ``source`` (the path as given), ``session`` (the reader's session: the file stem),
    ``block_size`` (tokens a block)."""

    offsets: np.ndarray
    ids: np.ndarray
    times: np.ndarray
    tokens: np.ndarray
    lines: np.ndarray
    source: str
    session: str
    block_size: int

    def __len__(self) -> int:
        return len(self.tokens)

    def in_arrival_order(self) -> TraceColumns:
        """The same requests sorted by time, stably (equal times keep input order): the one
        arrival order of :func:`~prefixcache.analyzer.sequence.arrival_order` (every Mooncake
        record has a time). ``self`` when that is the input order."""
        import numpy as np
        order = np.argsort(self.times, kind="stable")
        if not len(order) or not (order[1:] < order[:-1]).any():
            return self
        lens = np.diff(self.offsets)[order]
        offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        take = np.repeat(self.offsets[:-1][order] - offsets[:-1], lens) + np.arange(int(offsets[-1]), dtype=np.int64)
        return TraceColumns(offsets, self.ids[take], self.times[order], self.tokens[order], self.lines[order],
                            self.source, self.session, self.block_size)


def read_columns(ingest, input_format: str = "auto") -> TraceColumns | None:
    """The one Mooncake trace of ``ingest`` as :class:`TraceColumns`, or None when the columnar
    path does not read it (see the module docstring: the object path then reads it as before).
    Reads the file once, 16 MiB at a time."""
    from prefixcache.analyzer import limits
    from prefixcache.analyzer.ingest.detect import detect_reader
    from prefixcache.analyzer.ingest.jsonio import HEAD_BYTES

    if input_format not in ("auto", "mooncake") or len(ingest.sources) != 1 or ingest.passed_over:
        return None
    source = ingest.sources[0]
    name = source.name
    if name == "-" or name.endswith(_COMPRESSED) or not os.path.isfile(name):
        return None
    try:
        with open(name, "rb") as f:
            head = f.read(HEAD_BYTES)
        if input_format == "auto":
            text = head.decode("utf-8")
            if not text.strip() or not isinstance(detect_reader(source, text), MooncakeReader):
                return None
        return _parse(name, limits.value("MAX_RECORD_BYTES"))
    except (OSError, UnicodeDecodeError, ValueError, TypeError, OverflowError, orjson.JSONDecodeError, InputError):
        return None  # the object path reads it and names what is wrong


def _parse(name: str, max_bytes: int) -> TraceColumns | None:
    """The columns of the file ``name`` (see :func:`read_columns`); None at the first record the
    columnar path does not read. Each chunk's ids become an int64 array before the next is read."""
    import numpy as np
    times: list = []
    tokens: list = []
    lens: list = []
    parts: list[np.ndarray] = []
    rest = b""
    with open(name, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            data = rest + chunk
            lines = data.split(b"\n") if data else []
            rest = lines.pop() if chunk and lines else b""
            if lines:
                got = _chunk_columns(lines, max_bytes)
                if got is None:
                    return None
                times += got[0]
                tokens += got[1]
                lens += got[2]
                parts.append(got[3])
            if not chunk:
                break
    if not tokens:
        return None
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lens, dtype=np.int64), out=offsets[1:])
    ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return TraceColumns(offsets, ids, np.asarray(times, dtype=np.float64) * 1e-3, np.asarray(tokens, dtype=np.int64),
                        np.arange(1, len(tokens) + 1, dtype=np.int64), name, _stem(name),
                        _block_size(name, MooncakeReader.block_size))


def _chunk_columns(lines: list[bytes], max_bytes: int):
    """``(times, input lengths, id counts, ids)`` of some whole lines (one orjson call for all of
    them, checks over whole columns); None when a line is not a record the columnar path reads."""
    import numpy as np
    if max(map(len, lines)) > max_bytes:
        return None
    stripped = [line.strip() for line in lines]  # each line one object: no two lines read as one record
    if {x[:1] for x in stripped} != {b"{"} or {x[-1:] for x in stripped} != {b"}"}:
        return None
    recs = orjson.loads(b"[" + b",".join(lines) + b"]")  # a blank line or a bad one raises: the object path
    if len(recs) != len(lines) or set(map(type, recs)) != {dict} or not set().union(*recs) <= _KEYS:
        return None  # (two values on one line, a line that is not an object, a key the reader does not read)
    col = lambda key: list(map(dict.get, recs, repeat(key, len(recs))))  # noqa: E731
    times, tokens, outs, ids = col("timestamp"), col("input_length"), col("output_length"), col("hash_ids")
    if not set(map(type, times)) <= {int, float} or set(map(type, tokens)) != {int} or min(tokens) < 0 \
            or set(map(type, ids)) != {list} or not set(map(type, outs)) <= {int, type(None)} \
            or min((o for o in outs if o is not None), default=0) < 0:
        return None
    lens = list(map(len, ids))
    if min(lens) == 0:
        return None
    flat = list(chain.from_iterable(ids))
    if set(map(type, flat)) != {int}:
        return None
    return times, tokens, lens, np.asarray(flat, dtype=np.int64)
