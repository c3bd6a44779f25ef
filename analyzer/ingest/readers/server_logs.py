"""Readers for inference-server request logs: vLLM ``--enable-log-requests`` and SGLang ``--log-requests``.

These are the exact server-side prompts, as **token ids**: each logged request becomes a
:class:`~prefixcache.analyzer.model.Request` with a :class:`BlockTrace` (prefix-chained
block hashes of its token ids, :func:`block_hashes`), which the cache models read
directly (no template, no tokenizer). Lines that are not request lines (startup, metrics,
access logs) are context: one ``Skipped(bad=False)`` per file says how many.

* **vLLM** (``vllm/entrypoints/logger.py`` ``RequestLogger``): older versions log one INFO
  line ``Received request <id>: prompt: '<repr>', params: ..., prompt_token_ids: [...], ...``;
  newer ones log ``Received request <id>: params: ...`` at INFO and, at DEBUG, ``Request <id>
  details: prompt: '<repr>', prompt_token_ids: [...]``. A request whose token ids are not
  logged (INFO only) is a note. ``--max-log-len`` cuts the ids without a marker, so a
  server run with it gives shorter prompts (not detectable from the log). No usage or cached tokens are logged. Block size 16 (vLLM's default).
  At DEBUG, newer versions also log each request's body (``Request <id> JSON body: {...}``,
  ``RequestLogger.log_request_body``; the engine's request id is ``chatcmpl-<id>``): its
  routing keys (:data:`BODY_KEYS`: ``user``, ``prompt_cache_key``, ``metadata``, ...) go to
  the request's ``extra``, so a server log names its tenants and sessions where clients sent them,
  and its ``messages`` become the request's, so conversations are chained by their messages
  (ingest's rule 4) rather than inferred from block hashes.
* **SGLang** (``tokenizer_manager.py``, ``--log-requests``): ``Finish: obj=GenerateReqInput(...,
  input_ids=[...], rid='<id>', ...), out={..., 'meta_info': {'id': ..., 'prompt_tokens': N,
  'completion_tokens': M, 'cached_tokens': K, ...}}``. Usage (prompt, cached = the radix
  cache hit) is the ground truth ``simulate`` compares with; ``input_ids`` appear at
  ``--log-requests-level`` ≥ 2 (truncated below 3); without them the request is usage-only.
  Block size 1 (SGLang's radix cache is token-granular by default).

Times: the line's ``MM-DD HH:MM:SS`` (vLLM, year not logged: seconds from 1 January of a
leap year) or ``[YYYY-MM-DD HH:MM:SS]`` (SGLang).
"""

from __future__ import annotations

import ast
import json
import re
from abc import ABC, abstractmethod
from datetime import datetime, timezone
from typing import Any, Iterator

import xxhash

from prefixcache.analyzer.model import BlockTrace, Provenance, Request, Skipped, Usage
from prefixcache.analyzer.ingest.base import RecordsSeen, Source
from prefixcache.analyzer.sequence import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.ingest.detect import reader
from prefixcache.analyzer.ingest.jsonio import FieldError
from prefixcache.analyzer.ingest.readers.openai_chat import messages_of

VLLM, SGLANG = "vllm-log", "sglang-log"
_VLLM_LINE = re.compile(r"(?:Received request|Request) (\S+?):? (?:details: )?(prompt: |params: )")
_VLLM_TIME = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?\b")
_SGL_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_STR = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
_BODY = re.compile(r"Request (\S+) JSON body: (\{.*)$")
#: Fields of a logged request body that name a tenant, a session or a cache namespace.
BODY_KEYS = ("user", "safety_identifier", "metadata", "end_user", "prompt_cache_key", "cache_salt")
_IDS = re.compile(r"(?:prompt_token_ids|input_ids)[:=] ?\[([\d,\s]*)(\]|\.\.\.)")


def block_hashes(ids: list[int], block: int) -> tuple[int, ...]:
    """Prefix-chained 63-bit hashes of ``ids`` in blocks of ``block`` tokens (last block may be partial)."""
    out, prev = [], 0
    for i in range(0, len(ids), block):
        h = xxhash.xxh64(f"{prev}:{','.join(map(str, ids[i:i + block]))}".encode()).intdigest() >> 1
        out.append(h)
        prev = h
    return tuple(out)


def _ids(text: str) -> list[int] | None:
    m = _IDS.search(text)
    if not m:
        return None
    return [int(x) for x in m.group(1).replace(",", " ").split()]


def _vllm_time(text: str) -> float | None:
    m = _VLLM_TIME.search(text[:80])
    if not m:
        return None
    mo, d, hh, mi, ss, frac = m.groups()
    try:
        t = datetime(2000, int(mo), int(d), int(hh), int(mi), int(ss), tzinfo=timezone.utc)
    except ValueError:
        return None
    return t.timestamp() - datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp() + float(f"0.{frac or 0}")


class _LogReader(ABC):
    """Common loop: every non-blank line is a record; request lines become requests."""

    format = ""
    block = DEFAULT_BLOCK_SIZE

    def read(self, source: Source) -> Iterator[Request | Skipped | RecordsSeen]:
        """Every non-blank line through :meth:`parse` (``state`` is per file), then the notes of :meth:`finish`."""
        n = other = 0
        state: dict[str, Any] = {}
        with source.open() as f:
            for line_no, raw in enumerate(f, 1):
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if not text.strip():
                    continue
                n += 1
                item = self.parse(source.name, line_no, text, state)
                if item is None:
                    other += 1
                else:
                    yield item
        yield from self.finish(source.name, state)
        if other:
            yield Skipped(source.name, 0, f"{other} line(s) are not request lines (server context)", "", False)
        yield RecordsSeen(source.name, n)

    @abstractmethod
    def parse(self, name: str, line: int, text: str, state: dict[str, Any]) -> Request | Skipped | None:
        """One line: a request, a note, or None for a line that is not a request line."""

    def finish(self, name: str, state: dict[str, Any]) -> Iterator[Skipped]:
        """Notes owed at the end of the file (none by default)."""
        return iter(())

    def trace(self, ids: list[int], output: int | None = None) -> BlockTrace:
        return BlockTrace(block_hashes(ids, self.block), self.block, len(ids), output)


def _body(rid: str, text: str, state: dict[str, Any]) -> None:
    """Keep the routing keys (:data:`BODY_KEYS`) of one logged request body under ``state``; a body
    cut by ``--max-log-len`` (not JSON) keeps none."""
    try:
        body = json.loads(text)
    except ValueError:
        return
    if not isinstance(body, dict):
        return
    keys: dict[str, Any] = {k: body[k] for k in BODY_KEYS if body.get(k) not in (None, "", {}, [])}
    try:  # the messages sent: conversations are chained by them (not by the block hashes alone)
        keys["\0messages"] = messages_of(body.get("messages"))
    except FieldError:
        pass
    state.setdefault("\0bodies", {})[rid] = keys


@reader(priority=140)
class VllmLogReader(_LogReader):
    """vLLM request logs (``--enable-log-requests``, DEBUG for prompts and ids in newer versions)."""

    format = VLLM
    block = DEFAULT_BLOCK_SIZE

    def finish(self, name: str, state: dict[str, Any]) -> Iterator[Skipped]:
        """A note for every request whose DEBUG details line never came (``state``: id → line)."""
        for rid, line in state.items():
            if not isinstance(line, int):
                continue
            yield Skipped(name, line, f"request {rid}: prompt and token ids not logged (the server logs them at "
                          "DEBUG level)", "", False)

    def sniff(self, head: str, name: str) -> float:
        """0.9 when the head holds a vLLM ``Received request`` / ``Request ... details`` line."""
        return 0.9 if re.search(r"(Received request \S+: (prompt|params): |Request \S+ details: prompt: )", head) else 0.0

    def parse(self, name: str, line: int, text: str, state: dict[str, Any]) -> Request | Skipped | None:
        m = _VLLM_LINE.search(text)
        if not m:
            if (b := _BODY.search(text)) is not None:
                _body(b.group(1), b.group(2), state)
            return None
        rid = m.group(1)
        ids = _ids(text)
        if ids is None:
            if m.group(2) == "params: ":
                if rid not in state.get("\0seen", ()):  # vLLM 0.3x logs the details line first
                    state[rid] = line
                return Skipped(name, line, f"request {rid}: sampling parameters (the prompt is on its DEBUG "
                               "'details' line)", "", False)
            return Skipped(name, line, f"request {rid}: no prompt_token_ids logged", "", False)
        state.pop(rid, None)
        state.setdefault("\0seen", set()).add(rid)
        prompt = _STR.search(text[m.end() - len(m.group(2)):]) if m.group(2) == "prompt: " else None
        notes = ["exact server-side prompt as token ids (vLLM request log); no usage logged"]
        extra: dict = {"request_id": rid}
        bodies = state.get("\0bodies", {})
        keys = dict(bodies.pop(rid, None) or bodies.pop(rid.removeprefix("chatcmpl-"), None) or {})
        messages = keys.pop("\0messages", ())
        if keys:
            extra.update(keys)
            notes.append("routing keys from the request's logged JSON body")
        if messages:
            notes.append("messages from the request's logged JSON body: conversations chained by them")
        if prompt is not None:
            try:
                extra["prompt_chars"] = len(ast.literal_eval(prompt.group(0)))
            except (ValueError, SyntaxError):
                pass
        ts = _vllm_time(text)
        return Request("", 0, VLLM, Provenance(name, line, "", line), messages=messages, timestamp=ts,
                       trace=self.trace(ids), observed=frozenset({"timestamp"} if ts is not None else ()),
                       notes=tuple(notes), extra=extra)


@reader(priority=141)
class SglangLogReader(_LogReader):
    """SGLang request logs (``--log-requests``): ``Finish:`` lines with ``meta_info``."""

    format = SGLANG
    block = 1

    def sniff(self, head: str, name: str) -> float:
        """0.9 when the head holds an SGLang ``Finish: obj=GenerateReqInput`` line."""
        return 0.9 if re.search(r"Finish: obj=\w*ReqInput\(", head) else 0.0

    def parse(self, name: str, line: int, text: str, state: dict[str, int]) -> Request | Skipped | None:
        pos = text.find("Finish: obj=")
        if pos < 0:
            return None
        meta = text.find("'meta_info'", pos)
        tail = text[meta:] if meta >= 0 else ""

        def num(key: str) -> int | None:
            m = re.search(rf"'{key}': (\d+)", tail)
            return int(m.group(1)) if m else None
        rid = re.search(r"'id': '([^']*)'", tail) or re.search(r"rid='([^']*)'", text)
        usage = Usage(num("prompt_tokens"), num("cached_tokens"), None, num("completion_tokens"))
        ids = _ids(text[pos:meta if meta >= 0 else len(text)])
        t = _SGL_TIME.search(text[:40])
        ts = datetime.fromisoformat(t.group(1)).replace(tzinfo=timezone.utc).timestamp() if t else None
        if ids is not None and usage.prompt_tokens is not None and len(ids) < usage.prompt_tokens:
            ids = None  # truncated by --log-requests-level < 3: the block hashes would be wrong
        notes = ["exact server-side prompt as token ids (SGLang request log)" if ids is not None
                 else "input_ids not logged in full (--log-requests-level < 3): usage only"]
        observed = {"usage"} | ({"timestamp"} if ts is not None else set())
        return Request("", 0, SGLANG, Provenance(name, line, "", line), timestamp=ts, usage=usage,
                       trace=self.trace(ids, usage.output_tokens) if ids is not None else None,
                       observed=frozenset(observed), notes=tuple(notes),
                       extra={"request_id": rid.group(1)} if rid else {})
