"""Readers for KV-cache block-hash traces: Mooncake, Alibaba Qwen-Bailian, kv-cache-tester.

These traces carry no text, only prefix-chained block ids (equal id ⇒ equal prefix up
to and including that block), so each record becomes a :class:`Request` with
``messages=()`` and ``trace=BlockTrace(...)``; it enters the cache models directly.

* **Mooncake** (kvcache-ai/Mooncake ``FAST25-release/README.md``): JSONL,
  ``{timestamp (ms), input_length, output_length, hash_ids}``, block = 512 tokens
  (``blksz_N`` in the file name overrides, as for Bailian; ``export`` suggests such a name).
  No session information: the whole file is one session, in line order.
* **Bailian** (alibaba-edu/qwen-bailian-usagetraces-anon ``README.md``): JSONL,
  ``{chat_id, parent_chat_id (-1 = root), timestamp (s), input_length, output_length,
  type, turn, hash_ids}``, block = 16 tokens (``blksz_N`` in the file name overrides).
  A session is one chat chain: the root chat and every turn that descends from it.
* **kv-cache-tester** (callanjfox/agentic-coding-analysis ``docs/TRACE_FORMAT.md``):
  one JSON document ``{id, block_size, tool_tokens, system_tokens, requests[]}``;
  a request is ``{t (s from conversation start), in, out, hash_ids, model, ...}``; an item
  ``{type: "subagent", t, agent_id, requests[]}`` nests a subagent whose requests'
  ``t`` count from its spawn. The parent conversation is one session, each subagent
  its own (``<id>/<agent_id>``). Subagents run in isolated cache contexts and their ids
  are numbered per conversation, so their hash ids are moved to a disjoint range
  (``+ k * 2**40`` for the k-th subagent) to rule out false sharing with the parent.

Usage is what the trace records: ``prompt_tokens`` = input length, ``output_tokens`` =
output length; cached tokens are not recorded (the hash ids *are* the ground truth).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from prefixcache.analyzer.errors import InputError
from prefixcache.analyzer.model import BlockTrace, Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.ingest.detect import first_object, reader
from prefixcache.analyzer.ingest.jsonio import FieldError, expect, field, load_json, read_lines, skip

#: Subagent hash ids are shifted by ``k * SUBAGENT_ID_STRIDE`` (k = 1, 2, ...).
SUBAGENT_ID_STRIDE = 1 << 40

_OBSERVED = frozenset({"timestamp", "usage"})


def _stem(name: str) -> str:
    return "stdin" if name == "-" else (Path(name).stem or name)


def _block_size(name: str, default: int) -> int:
    """The block size a ``blksz_N`` in the file name states (N ≥ 1), else ``default`` (tokens)."""
    m = re.search(r"blksz_(\d+)", Path(name).name)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else default


def _hash_ids(rec: dict[str, Any], path: str = "") -> tuple[int, ...]:
    """``rec["hash_ids"]`` as a tuple of ints; FieldError naming the first bad item."""
    where = f"{path}.hash_ids" if path else "hash_ids"
    ids = field(rec, "hash_ids", list, path, required=True)
    for i, h in enumerate(ids):
        if type(h) is not int:
            expect(h, int, f"{where}[{i}]")
    return tuple(ids)


def _length(rec: dict[str, Any], key: str, path: str = "", required: bool = True) -> int | None:
    value = field(rec, key, int, path, required=required)
    if value is not None and value < 0:
        raise FieldError(f"{path}.{key}" if path else key, f"negative token count {value}")
    return value


def _block_request(source: str, line: int, rec: dict[str, Any], *, fmt: str, session: str, index: int,
                   block_size: int, ts_scale: float, extra: dict[str, Any], notes: tuple[str, ...] = ()) -> Request:
    """One JSONL trace record (Mooncake / Bailian shape) as a Request; raises FieldError."""
    ts = field(rec, "timestamp", float, required=True)
    n_in = _length(rec, "input_length")
    n_out = _length(rec, "output_length", required=False)
    ids = _hash_ids(rec)
    return Request(
        session=session, index=index, format=fmt, provenance=Provenance(source, line, "", line),
        timestamp=float(ts) * ts_scale, usage=Usage(prompt_tokens=n_in, output_tokens=n_out),
        observed=_OBSERVED, notes=notes, trace=BlockTrace(ids, block_size, n_in, n_out), extra=extra,
    )


@reader(priority=70)
class MooncakeReader:
    """Mooncake FAST'25 traces (JSONL, ms timestamps, 512-token blocks, one session per file)."""

    format = "mooncake"
    block_size = 512

    def sniff(self, head: str, name: str) -> float:
        """0.9 when the first record has Mooncake's four fields and no Bailian ``chat_id``."""
        obj = first_object(head)
        if obj is not None:
            keys = {"timestamp", "input_length", "hash_ids"}
            return 0.9 if keys <= obj.keys() and "chat_id" not in obj and not head.lstrip().startswith("[") else 0.0
        return 0.5 if '"input_length"' in head and '"hash_ids"' in head and '"chat_id"' not in head else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """One request per line, ``timestamp`` ms → seconds; bad lines are bad Skipped."""
        session, index = _stem(source.name), 0
        block_size = _block_size(source.name, self.block_size)
        note = ("Mooncake trace: no session ids; read as one session in arrival order, and lint and simulate infer "
                "its conversations from the hash chains",)

        def one(line: int, rec: dict[str, Any]) -> tuple[Request]:
            nonlocal index
            req = _block_request(source.name, line, rec, fmt=self.format, session=session, index=index,
                                 block_size=block_size, ts_scale=1e-3, extra={}, notes=note)
            index += 1
            return (req,)

        yield from read_lines(source, one)


@reader(priority=71)
class BailianReader:
    """Alibaba Qwen-Bailian traces (JSONL, s timestamps, 16-token blocks, sessions = chat chains)."""

    format = "bailian"
    block_size = 16

    def sniff(self, head: str, name: str) -> float:
        """0.95 when the first record has ``chat_id``, ``parent_chat_id`` and ``hash_ids``."""
        obj = first_object(head)
        if obj is not None:
            return 0.95 if {"chat_id", "parent_chat_id", "hash_ids"} <= obj.keys() else 0.0
        return 0.6 if '"parent_chat_id"' in head and '"hash_ids"' in head else 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """One request per line; session = root of the ``parent_chat_id`` chain.

        A parent not seen earlier in the file (an excerpt) is taken as the root of its
        chain, with a note. Memory: one int per chat id.
        """
        block_size = _block_size(source.name, self.block_size)
        stem = _stem(source.name)
        root_of: dict[int, int] = {}
        count: dict[int, int] = {}

        def one(line: int, rec: dict[str, Any]) -> tuple[Request]:
            chat = field(rec, "chat_id", int, required=True)
            parent = field(rec, "parent_chat_id", int, required=True)
            root, notes = _chain_root(chat, parent, root_of)
            extra = {"chat_id": chat, "parent_chat_id": parent, **{k: rec[k] for k in ("turn", "type") if k in rec}}
            req = _block_request(source.name, line, rec, fmt=self.format, session=f"{stem}/chat-{root}",
                                 index=count.get(root, 0), block_size=block_size, ts_scale=1.0, extra=extra,
                                 notes=notes)
            root_of[chat] = root
            count[root] = req.index + 1
            return (req,)

        yield from read_lines(source, one)


def _chain_root(chat: int, parent: int, root_of: dict[int, int]) -> tuple[int, tuple[str, ...]]:
    """Root chat id of a Bailian turn (``parent_chat_id`` -1 = a root) and a note when guessed."""
    if parent < 0:
        return chat, ()
    if parent in root_of:
        return root_of[parent], ()
    return parent, (f"parent chat {parent} not earlier in the file: taken as the chain root",)


@reader(priority=72)
class KvcacheTesterReader:
    """kv-cache-tester / WEKA Claude Code traces (one JSON document, 64-token blocks)."""

    format = "kvcache-tester"

    def sniff(self, head: str, name: str) -> float:
        """0.9 for a JSON object naming ``block_size``, ``requests`` and ``hash_ids`` near its start."""
        text = head.lstrip()
        if not text.startswith("{"):
            return 0.0
        if '"block_size"' in text and '"requests"' in text and '"hash_ids"' in text:
            return 0.9
        return 0.0

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """Every item of every ``requests`` list is a record, numbered depth-first from 1.

        Raises InputError when the document is not an object with ``block_size`` and
        ``requests``.
        """
        doc = load_json(source)
        if not isinstance(doc, dict):
            raise InputError("expected a kv-cache-tester trace object", source.name, 0)
        try:
            block_size = field(doc, "block_size", int, required=True)
            items = field(doc, "requests", list, required=True)
        except FieldError as e:
            raise InputError(e.reason, source.name, 0, e.field) from None
        trace_id = str(doc.get("id") or _stem(source.name))
        walker = _TesterWalk(source.name, block_size, trace_id, doc)
        yield from walker.walk(items, "requests", session=trace_id, t0=0.0, offset=0, extra={})
        yield RecordsSeen(source.name, walker.records)


class _TesterWalk:
    """Depth-first walk of a kv-cache-tester document, numbering records and sessions."""

    def __init__(self, source: str, block_size: int, trace_id: str, doc: dict[str, Any]) -> None:
        self.source, self.block_size, self.trace_id = source, block_size, trace_id
        self.records = 0
        self.subagents = 0
        self.count: dict[str, int] = {}
        self.shared = {k: doc[k] for k in ("tool_tokens", "system_tokens", "hash_id_scope") if k in doc}

    def walk(self, items: list[Any], path: str, *, session: str, t0: float, offset: int,
             extra: dict[str, Any]) -> Iterator[Request | Skipped]:
        for i, item in enumerate(items):
            self.records += 1
            record, where = self.records, f"{path}[{i}]"
            try:
                expect(item, dict, where)
                if item.get("type") == "subagent":
                    yield from self._subagent(item, where, t0)
                    continue
                yield self._request(item, where, record, session, t0, offset, extra)
            except FieldError as e:
                yield skip(self.source, record, e)

    def _subagent(self, item: dict[str, Any], where: str, t0: float) -> Iterator[Request | Skipped]:
        self.subagents += 1
        agent = str(item.get("agent_id") or f"subagent-{self.subagents}")
        start = t0 + float(field(item, "t", float, where, default=0.0))
        sub = field(item, "requests", list, where, required=True)
        extra = {"agent_id": agent, "subagent_type": item.get("subagent_type"),
                 "hash_id_offset": self.subagents * SUBAGENT_ID_STRIDE}
        extra.update({k: item[k] for k in ("tool_tokens", "system_tokens") if k in item})
        yield from self.walk(sub, f"{where}.requests", session=f"{self.trace_id}/{agent}", t0=start,
                             offset=self.subagents * SUBAGENT_ID_STRIDE, extra=extra)

    def _request(self, item: dict[str, Any], where: str, record: int, session: str, t0: float,
                 offset: int, extra: dict[str, Any]) -> Request:
        t = float(field(item, "t", float, where, required=True))
        n_in = _length(item, "in", where)
        n_out = _length(item, "out", where, required=False)
        ids = _hash_ids(item, where)
        if offset:
            ids = tuple(h + offset for h in ids)
        more = {k: item[k] for k in ("type", "stop", "api_time", "ttft", "think_time", "input_types", "output_types")
                if k in item}
        index = self.count.get(session, 0)
        self.count[session] = index + 1
        notes: tuple[str, ...] = ()
        if offset:
            notes = (f"subagent hash ids shifted by {offset} (isolated cache context, per-conversation id space)",)
        return Request(
            session=session, index=index, format="kvcache-tester", provenance=Provenance(self.source, record, where),
            model=item.get("model") if isinstance(item.get("model"), str) else None, timestamp=t0 + t,
            usage=Usage(prompt_tokens=n_in, output_tokens=n_out), observed=frozenset({"timestamp", "usage", "model"}),
            notes=notes, trace=BlockTrace(ids, self.block_size, n_in, n_out),
            extra={**self.shared, **extra, **more},
        )
