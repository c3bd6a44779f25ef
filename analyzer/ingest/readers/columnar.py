"""The columnar block-hash trace (Parquet): tokenize a fleet of logs once, simulate it many times.

``prefixcache trace LOGS -o FILE.parquet`` writes it (:mod:`prefixcache.analyzer.columnar`); every
command reads it back like any block-hash trace (it is detected by Parquet's ``PAR1`` magic bytes,
whatever its name). One row per request, in arrival order, with these columns (docs/formats.md):

========================  ==================  =====================================================
column                    type                meaning
========================  ==================  =====================================================
``request``               int64               position of the request in the logs it came from
``session``               string              its session id, as ``lint`` and ``simulate`` name it
``index``                 int64               0-based position inside the session
``time``                  float64 (nullable)  logged time, UNIX seconds (null: not logged)
``input_length``          int64               prompt tokens (hidden-prefix pseudo-tokens included)
``output_length``         int64 (nullable)    output tokens as logged (null: not logged)
``block_size``            int32               tokens per block of ``hash_ids``
``hash_ids``              list<int64>         prefix-chained block ids; the last may be partial
``source``, ``record``    string, int64       the log file and record the request was read from
``format``                string              the reader of that log (``mooncake`` keeps its sessions inferred)
``notes``                 list<string>        what the reader inferred about the request
``model``                 string (nullable)   the logged model name
``pointer``, ``line``     string, int64       where in the record, and the file line it starts at (nullable)
``observed``              list<string>        the request parts the log held verbatim
``extra``                 string              the reader's routing keys and format fields, as JSON
========================  ==================  =====================================================

Rows are read in record batches (memory: one batch, not the file). A missing column is an
:class:`InputError` naming the file and the column; a row with a null or negative length, an empty
or null ``hash_ids`` or a block size under 1 is a bad record (named by file, row and field), as in
the JSONL traces.
"""

from __future__ import annotations

from typing import Any, Iterator

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.jsonio import loads
from prefixcache.analyzer.model import BlockTrace, Provenance, Request, Skipped, Usage

#: Reader name (``Request.format``).
FORMAT = "block-trace-parquet"
#: Parquet's magic bytes: how the file is recognised.
MAGIC = b"PAR1"
#: The columns, in order, and their Arrow types (names of ``pyarrow`` factories).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("request", "int64"), ("session", "string"), ("index", "int64"), ("time", "float64"),
    ("input_length", "int64"), ("output_length", "int64"), ("block_size", "int32"), ("hash_ids", "list<int64>"),
    ("source", "string"), ("record", "int64"), ("format", "string"), ("notes", "list<string>"), ("model", "string"),
    ("pointer", "string"), ("line", "int64"), ("observed", "list<string>"), ("extra", "string"),
)
#: Columns a reader does without (files written before they were added, or by other tools).
OPTIONAL = frozenset({"source", "record", "format", "notes", "model", "pointer", "line", "observed", "extra"})
_OBSERVED = frozenset({"timestamp", "usage"})


def schema() -> Any:
    """The Arrow schema of the file (``pyarrow``; ``prefixcache[ray]`` installs it)."""
    pa = _pyarrow("")
    types = {"int64": pa.int64(), "string": pa.string(), "float64": pa.float64(), "int32": pa.int32(),
             "list<int64>": pa.list_(pa.int64()), "list<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def _pyarrow(name: str) -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise InputError("a Parquet block-hash trace needs pyarrow (pip install 'prefixcache[ray]')", name, 0) from None
    return pyarrow


def read(source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
    """One :class:`Request` with a :class:`BlockTrace` per row, in row order (record = row, from 1)."""
    pa = _pyarrow(source.name)
    with source.open() as f:
        try:
            pf = pa.parquet.ParquetFile(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"not a readable Parquet file: {exc}", source.name, 0) from None
        names = set(pf.schema_arrow.names)
        missing = [name for name, _ in COLUMNS if name not in names and name not in OPTIONAL]
        if missing:
            raise InputError(f"not a prefixcache block-hash trace: no column {missing[0]!r} (see docs/formats.md)",
                             source.name, 0)
        row = 0
        for batch in pf.iter_batches(batch_size=8192):
            cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            for i in range(batch.num_rows):
                row += 1
                yield _row(source.name, row, {k: v[i] for k, v in cols.items()})
        yield RecordsSeen(source.name, row)


def _row(name: str, row: int, rec: dict[str, Any]) -> Request | Skipped:
    """One row as a Request, or a bad :class:`Skipped` naming the field."""
    for field, ok in (("session", lambda v: isinstance(v, str)), ("index", lambda v: isinstance(v, int) and v >= 0),
                      ("input_length", lambda v: isinstance(v, int) and v >= 0),
                      ("output_length", lambda v: v is None or v >= 0), ("block_size", lambda v: isinstance(v, int) and v >= 1),
                      ("hash_ids", lambda v: isinstance(v, list) and v and None not in v)):
        if not ok(rec.get(field)):
            return Skipped(name, row, f"bad value {rec.get(field)!r:.60}", field, True)
    ids = tuple(rec["hash_ids"])
    own = "source" in rec  # written by prefixcache trace: the request as it was read
    src = rec.get("source") or name
    record = rec.get("record") if isinstance(rec.get("record"), int) else row
    line = rec.get("line") if own else row
    extra = {"request": rec.get("request")}
    if rec.get("extra"):
        try:
            extra = loads(rec["extra"])
        except ValueError:
            return Skipped(name, row, "bad value: not JSON", "extra", True)
    return Request(
        session=rec["session"], index=rec["index"], format=rec.get("format") or FORMAT,
        provenance=Provenance(src, record, rec.get("pointer") or "", line), notes=tuple(rec.get("notes") or ()),
        model=rec.get("model"), timestamp=rec.get("time"),
        usage=Usage(prompt_tokens=rec["input_length"], output_tokens=rec.get("output_length")),
        observed=frozenset(rec["observed"]) if rec.get("observed") is not None else _OBSERVED,
        trace=BlockTrace(ids, rec["block_size"], rec["input_length"], rec.get("output_length")), extra=extra,
    )
