"""Write the columnar block-hash trace (Parquet) of some logs: ``prefixcache trace LOGS -o FILE.parquet``.

Tokenizing is what costs in a fleet of agent logs; the cache models need only each request's
block ids. So the logs are read, rendered and tokenized once (on Ray workers with
``--executor ray``, :mod:`~prefixcache.analyzer.prepare.parallel`) and written as one Parquet
file of block ids (the schema: :mod:`prefixcache.analyzer.ingest.readers.columnar`), which
``simulate`` and ``lint`` then read like any block-hash trace, as often as wanted.

Block ids of a prompt with text are vLLM's chained block hashes (:func:`~prefixcache.analyzer.cache.
index.block_hash.hash_blocks`, xxh3-64 over int64 token ids, block 0 chained to the empty seed)
of its full blocks (the unsigned 64-bit hash stored as the int64 of the same bits), then, when the length is not a multiple of the block size, one id for the
partial last block chained the same way (as Mooncake's traces carry one). Requests that are
already block-hash traces keep their ids and block size. A request without a prompt (usage-only
logs) has no block ids: it is counted in :attr:`TraceCounts.without_prompt`, not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Iterable

from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.cache.index.compact import int64_bytes
from prefixcache.analyzer.ingest.readers.columnar import COLUMNS, _pyarrow, schema
from prefixcache.analyzer.prepare.prepared import Prepared

#: Rows per Parquet row group (memory while writing: one group).
ROW_GROUP = 8192


@dataclass(frozen=True, slots=True)
class TraceCounts:
    """What a write did: ``rows`` written, ``blocks`` (ids) written, ``without_prompt`` requests left
    out because their log holds no prompt (usage-only)."""

    rows: int
    blocks: int
    without_prompt: int


def block_ids(p: Prepared, block_size: int) -> tuple[list[int], int] | None:
    """``(ids, block size)`` of a prepared request (see the module docstring); None without a prompt."""
    import xxhash

    if p.request.trace is not None:
        return list(p.request.trace.hash_ids), p.request.trace.block_size
    if p.tokens is None:
        return None
    ids = p.tokens.ids
    full = hash_blocks(ids, block_size)
    rest = len(ids) - len(full) * block_size
    if rest:
        parent = full[-1] if full else None
        tail = int64_bytes(ids[len(ids) - rest:])
        full.append(xxhash.xxh3_64_intdigest(tail, parent if parent is not None else 0))
    return [h - (1 << 64) if h >= 1 << 63 else h for h in full], block_size  # 64-bit hashes as int64


def _extra(extra: dict) -> str:
    """``Request.extra`` as JSON text (a value JSON cannot hold is written as its ``str``)."""
    import json

    return json.dumps(extra, ensure_ascii=False, separators=(",", ":"), default=str) if extra else ""


def write_trace(prepared: Iterable[Prepared], out: IO[bytes], block_size: int) -> TraceCounts:
    """Write the rows of ``prepared`` (in its order) to the binary stream ``out`` as Parquet.

    ``block_size`` is in tokens (for prompts with text). Memory: one row group of
    :data:`ROW_GROUP` rows. Raises InputError when pyarrow is missing."""
    pa = _pyarrow("")
    import pyarrow.parquet as pq

    names = [name for name, _ in COLUMNS]
    rows = blocks = without = 0
    cols: dict[str, list] = {name: [] for name in names}

    def flush() -> None:
        if cols["request"]:
            writer.write_table(pa.table(cols, schema=schema()))
            for v in cols.values():
                v.clear()

    with pq.ParquetWriter(out, schema(), compression="zstd") as writer:
        for pos, p in enumerate(prepared):
            got = block_ids(p, block_size)
            if got is None:
                without += 1
                continue
            ids, size = got
            r = p.request
            row = (pos, r.session, r.index, r.timestamp, p.prompt_tokens,
                   r.usage.output_tokens if r.usage is not None else None, size, ids,
                   r.provenance.source, r.provenance.record, r.format, list(r.notes), r.model,
                   r.provenance.pointer, r.provenance.line, sorted(r.observed), _extra(r.extra))
            for name, value in zip(names, row):
                cols[name].append(value)
            rows += 1
            blocks += len(ids)
            if len(cols["request"]) >= ROW_GROUP:
                flush()
        flush()
    return TraceCounts(rows, blocks, without)
