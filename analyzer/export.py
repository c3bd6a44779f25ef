"""Text-free block-hash traces for the peers: ``prefixcache export LOGS --to mooncake|aiperf``.

Users share traffic shapes without sharing prompts: each logged request becomes one JSONL
record of lengths and block ids, no text, in the record shape the peers read.

* ``mooncake`` — Mooncake's FAST'25 trace (kvcache-ai/Mooncake ``FAST25-release``):
  ``{"timestamp": ms (int), "input_length", "output_length", "hash_ids": [...]}``, one
  line per request in arrival order. ``prefixcache`` reads it back (the Mooncake reader,
  :mod:`prefixcache.analyzer.ingest.readers.traces`; a ``blksz_N`` in the file name sets
  its block size, else 512).
* ``aiperf`` — NVIDIA AIPerf's ``mooncake_trace`` custom dataset (its ``MooncakeTrace``
  record: ``timestamp`` in ms, float allowed; ``input_length``; ``output_length``;
  ``hash_ids``), which AIPerf replays with ``--custom-dataset-type mooncake_trace``
  and ``--prompt-input-tokens-block-size N`` (N = the export's block size), synthesizing
  one block of text per hash id so equal ids give equal prefixes. The timestamps keep
  their sub-millisecond part. No ``session_id`` is written: AIPerf's Mooncake sessions
  prepend the earlier turns to each turn, and our records are whole prompts already —
  the sharing between turns is in the hash ids.

Block ids: the prompt's chained block hashes (:func:`~prefixcache.analyzer.columnar.block_ids`:
vLLM's chain over full blocks, the partial last block chained too, as Mooncake's traces
carry one id per started block), renumbered 0, 1, 2, … in first-seen order across the
file — so an id says which block it is equal to and nothing about the tokens. Timestamps:
the one arrival order's logical clock (:func:`~prefixcache.analyzer.sequence.arrival_order`:
logged seconds from the first request; without logged times, one second per request,
counted in :attr:`ExportCounts.untimed`). Output length: the logged
``usage.output_tokens`` (a block-hash trace's own), else 1 (counted in
:attr:`ExportCounts.no_output_length`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Iterable

import orjson

from prefixcache.analyzer.columnar import block_ids
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.prepare.prepared import Prepared
from prefixcache.analyzer.sequence import arrival_order

#: The formats ``export --to`` writes.
FORMATS = ("mooncake", "aiperf")
#: Tokens per block when ``--block-size`` is not given: Mooncake's and AIPerf's default.
DEFAULT_BLOCK_SIZE = 512


@dataclass(frozen=True, slots=True)
class ExportCounts:
    """What an export wrote: ``requests`` (records), ``blocks`` (distinct block ids, one per
    *started* block as Mooncake's traces carry: a prompt's partial last block has an id too),
    ``full_blocks`` (those of them that are full blocks of ``block_size`` tokens: what vLLM
    caches, and what ``simulate --cache blocks`` counts as the log's unique blocks), ``sessions``; left out: ``without_prompt`` (usage-only logs: no prompt to hash);
    ``no_output_length`` records written with output length 1 (none logged); ``untimed``:
    True when the log had no timestamps (records one second apart, in log order)."""

    requests: int
    blocks: int
    sessions: int
    without_prompt: int
    no_output_length: int
    untimed: bool
    full_blocks: int = 0


@dataclass(frozen=True, slots=True)
class _Row:
    session: str
    timestamp: float | None
    input_length: int
    output_length: int | None
    hashes: list[int]


def _row(p: Prepared, block_size: int) -> _Row | None:
    got = block_ids(p, block_size)
    if got is None:
        return None
    ids, size = got
    r = p.request
    if size != block_size:
        raise ConfigError(f"{r.provenance.source}:{r.provenance.record}: a block-hash trace of {size}-token blocks; "
                          f"export it with --block-size {size} (its ids cannot be re-cut)")
    if r.trace is not None:
        n_in, n_out = r.trace.input_length, r.trace.output_length
    else:
        n_in = len(p.tokens.ids) if p.tokens is not None else 0
        n_out = r.usage.output_tokens if r.usage is not None else None
    return _Row(r.session, r.timestamp, n_in, n_out, ids)


def export_trace(prepared: Iterable[Prepared], out: IO[bytes], fmt: str, block_size: int = DEFAULT_BLOCK_SIZE
                 ) -> ExportCounts:
    """Write ``prepared`` requests to the binary stream ``out`` as a ``fmt`` trace (JSONL; see the
    module docstring), in arrival order. Memory: the block hashes of every request (they
    are renumbered across the file). ConfigError for an unknown format, a block size below
    1, or a block-hash trace of another block size."""
    if fmt not in FORMATS:
        raise ConfigError(f"--to {fmt}: choose from {', '.join(FORMATS)}")
    if block_size < 1:
        raise ConfigError(f"--block-size {block_size}: must be ≥ 1")
    rows: list[_Row] = []
    without = 0
    for p in prepared:
        row = _row(p, block_size)
        if row is None:
            without += 1
        else:
            rows.append(row)
    staged = arrival_order(rows, lambda r: r.timestamp)
    untimed = bool(rows) and any(r.timestamp is None for r in rows)
    t0 = staged[0][0] if staged else 0.0
    number: dict[int, int] = {}
    full: set[int] = set()  # ids of full blocks (a partial last block's id is never a full block's: chained hash)
    no_out = 0
    for now, r in staged:
        ids = [number.setdefault(h, len(number)) for h in r.hashes]
        full.update(ids[:r.input_length // block_size])
        if r.output_length is None:
            no_out += 1
        ms = (now - t0) * 1000.0
        rec = {"timestamp": int(round(ms)) if fmt == "mooncake" else round(ms, 3), "input_length": r.input_length,
               "output_length": r.output_length if r.output_length is not None else 1, "hash_ids": ids}
        out.write(orjson.dumps(rec) + b"\n")
    return ExportCounts(len(rows), len(number), len({r.session for r in rows}), without, no_out, untimed, len(full))
