"""The request stream a cache simulation replays: :class:`SimRequest` and its arrival order.

Input: :class:`~prefixcache.analyzer.prepare.Prepared` requests (token prompts from
logs, or block-hash traces). They are put in :func:`~prefixcache.analyzer.sequence.arrival_order`
(by logged timestamp, stable; input order when any time is missing) and ``now`` is
that logical clock (logged seconds, else the position). Usage-only requests (no
prompt logged) have nothing to replay and are left out.

Each request's block chain is hashed once per (block size, salt) and kept with the
request (:meth:`SimRequest.chain`), so every cache model and sweep of the run reuses
it; so are its prefix hashes at breakpoints (:meth:`SimRequest.prefix_hashes`).

Memory: token ids, block-trace hash ids and block chains are kept as
:class:`~.compact.Shared` sequences, each request extending the previous one of its
session (a block trace: the latest one starting with the same block), so a log costs
about its distinct ids at 4–8 bytes each (:class:`SimStream` builds them one prepared
request at a time; the prepared request itself need not be kept).
"""

from __future__ import annotations

import json
import sys
from array import array
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Sequence as SequenceABC
from typing import Iterable, Mapping, Sequence

import numpy as np

from prefixcache.analyzer.ingest.tenancy import TENANT_KEYS
from prefixcache.analyzer.cache.base import BlockHash
from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.provider.prices import provider_of
from prefixcache.analyzer.cache.index.trace_sessions import SESSIONLESS_FORMATS
from prefixcache.analyzer.model import Provenance, Request, Usage
from prefixcache.analyzer.sequence import InputOrder, arrival_order

#: ``cache_control`` TTL codes of the logs (seconds).
TTL_CODES = {"5m": 300.0, "1h": 3600.0, "30m": 1800.0, "12h": 43200.0}
#: Segment kinds that are content blocks (breakpoints and lookback stop at their ends;
#: the generation prompt and template glue are not content).
_CONTENT = ("system", "tool", "message", "opaque")


@dataclass(frozen=True, slots=True)
class SimRequest:
    """A request reduced to what cache models need.

    ``tokens`` for log prompts, ``hashes`` + ``block_size`` (the trace's block size,
    tokens) for block traces (any ``Sequence[int]``; :class:`SimStream` gives
    :class:`~.compact.Shared` ones); ``spans``: ``(group, start, end)`` token spans for hit
    attribution (contiguous runs of a group joined); ``boundaries``: content-block ends (tokens, ascending;
    compact arrays from :class:`SimStream`); ``breakpoints``:
    Anthropic marks (automatic mode — end of the system/tools prefix and end of
    prompt — when the log has none); ``salt``: vLLM ``cache_salt`` namespace, if
    logged; ``hidden_tokens``: size of a prefix the log lacks and the prompt does not
    represent (Claude Code's system prompt and tools: reported prompt tokens minus
    ours), counted toward provider minimum lengths only. ``reply_ends``: where each
    assistant message of the prompt ends (tokens, ascending): what the engine generated
    for the earlier calls, as the log renders it (llama.cpp slots keep prompt + output); ``sent``: when the request
    was sent (seconds on the clock of ``now``; Claude Code: its parent line's time,
    while ``now`` is the response's), None when not logged or when the clock is the
    position; ``reported_output`` / ``reported_write``: the call's reported completion
    and cache-write tokens;
    ``implicit_breakpoint``: False when the request disabled the provider's implicit
    breakpoint (OpenAI ``prompt_cache_options.mode: explicit``); ``provider_verdict``:
    the provider's logged cache verdict (reason, missed tokens), if any
    (:mod:`prefixcache.analyzer.ingest.diagnostics`); ``infer_session``: a block trace
    whose format logs no session (Mooncake): the session its drift is judged in is
    inferred from the hash chains (:mod:`.trace_sessions`), ``session`` stays the reader's;
    ``tool_spans``: the ``(start, end)`` token spans of tool-output messages (role ``tool``), for the
    reuse-in-time figures of :mod:`~prefixcache.analyzer.cache.simulate.survival`; ``mark_source``:
    where ``breakpoints`` come from (:data:`MARK_SOURCES`; ``none``: the log shows the request set no
    breakpoint, and ``breakpoints`` holds only the agent placement OpenAI's implicit rule still uses —
    :attr:`anthropic_breakpoints` is empty); ``scope``: the cache scope (:func:`cache_scope`);
    ``head_end``: where the system prompt and tools end (tokens); ``block_pos``: content blocks up to
    each of ``boundaries`` (:func:`block_positions`, the lookback's unit; a compact array aligned with
    ``boundaries``; empty: one block per boundary).
    """

    order: int
    session: str
    index: int
    source: str
    record: int
    model: str | None
    now: float
    num_tokens: int
    tokens: Sequence[int] | None = None
    hashes: Sequence[int] | None = None
    block_size: int = 0
    spans: tuple[tuple[str, int, int], ...] = ()
    boundaries: Sequence[int] = ()
    breakpoints: tuple[Breakpoint, ...] = ()
    salt: str | None = None
    hidden_tokens: int = 0
    reported_prompt: int | None = None
    reported_cached: int | None = None
    exact: bool = True
    reply_ends: Sequence[int] = ()
    sent: float | None = None
    reported_output: int | None = None
    reported_write: int | None = None
    implicit_breakpoint: bool = True
    provider_verdict: tuple[str, int | None] | None = None
    infer_session: bool = False
    tool_spans: tuple[tuple[int, int], ...] = ()
    mark_source: str = "agent"
    scope: tuple[str, str] = ("", "")
    head_end: int = 0
    block_pos: Sequence[int] = ()
    _chains: dict[tuple[int, str | None], Sequence[BlockHash]] | None = field(
        default=None, init=False, repr=False, compare=False)
    _cuts: dict[int, int] | None = field(default=None, init=False, repr=False, compare=False)

    def chain(self, block_size: int, salted: bool = True) -> Sequence[BlockHash]:
        """Chained hashes of the prompt's full blocks of ``block_size`` tokens, in the
        request's ``cache_salt`` namespace (``salted``) or none; computed once per
        (block size, salt) and kept (shared with the request it extends when the tokens
        are :class:`~.compact.Shared`). A block trace's chain is its logged hash ids."""
        if self.hashes is not None:
            return self.hashes.ids() if isinstance(self.hashes, Shared) else self.hashes
        key = (block_size, self.salt if salted else None)
        extra = ("cache_salt", key[1]) if key[1] else None
        if isinstance(self.tokens, Shared):
            return self.tokens.blocks(block_size, key, lambda ids, parent: hash_blocks(ids, block_size, extra, parent)).ids()
        if self._chains is None:
            object.__setattr__(self, "_chains", {})
        got = self._chains.get(key)  # type: ignore[union-attr]
        if got is None:
            got = self._chains[key] = tuple(hash_blocks(self.tokens or (), block_size, extra))  # type: ignore[index]
        return got

    @property
    def anthropic_breakpoints(self) -> tuple[Breakpoint, ...]:
        """The breakpoints Anthropic applies: none when the log shows the request set none (no
        ``cache_control``, no automatic caching), else :attr:`breakpoints`."""
        return () if self.mark_source == "none" else self.breakpoints

    def blocks(self) -> dict[int, int] | None:
        """``block_pos`` as boundary → content blocks up to it (None when not kept)."""
        if not self.block_pos or len(self.block_pos) != len(self.boundaries):
            return None
        return dict(zip(self.boundaries, self.block_pos))

    def prefix_hashes(self) -> dict[int, int]:
        """Hash of the prompt up to each content-block boundary and breakpoint
        (:meth:`~.provider.caches.AnthropicCache.prefix_hashes`), computed once and kept."""
        if self._cuts is None:
            cuts: dict[int, int] = {}
            if self.tokens:
                n = len(self.tokens)
                ends = {b for b in self.boundaries if 0 < b <= n} | {bp.end for bp in self.breakpoints if 0 < bp.end <= n}
                cuts = AnthropicCache.prefix_hashes(self.tokens, sorted(ends))
            object.__setattr__(self, "_cuts", cuts)
        return self._cuts  # type: ignore[return-value]


def _group(kind: str, ref: int, last_assistant: int) -> str:
    if kind in ("system", "opaque"):
        return "system"
    if kind == "tool":
        return "tools"
    if kind == "message":
        return "newest_turn" if ref > last_assistant else "history"
    return "other"


#: Where a request's breakpoints come from (:class:`Marks`): its logged ``cache_control`` marks
#: (``logged``), only the top-level automatic mark (``automatic``), none although the log would show
#: them (``none``: the provider caches nothing), or an agent transcript that cannot show them
#: (``agent``: the agent's usual placement is assumed — end of the system prompt and tools, end of
#: the prompt — as Claude Code places them), or a body without marks sent to another provider's model
#: (``other``: a what-if for Anthropic; the same placement is assumed).
MARK_SOURCES = ("logged", "automatic", "none", "agent", "other")


@dataclass(frozen=True, slots=True)
class Marks:
    """A request's cache breakpoints as the provider applies them (Anthropic prompt caching,
    platform.claude.com "Prompt caching", checked 2026-12-07).

    ``breakpoints``: token ends (ascending) and TTLs — the logged ``cache_control`` marks (one per
    marked message or tool: a mark on an inner block is placed at its message's end), plus one on
    the last content block when the request turned on automatic caching (a top-level
    ``cache_control``); the agent's placement when the log cannot show marks (``source ==
    "agent"``); empty when the log shows the request set none. ``source``: one of
    :data:`MARK_SOURCES`. ``slots``: breakpoint slots the body uses (marked blocks, plus one for
    the automatic mark; 0 when not logged) — more than 4 is rejected by the API. ``guess``: the
    agent placement, which OpenAI's GPT-5.6+ model keeps using where the log has no marks (its
    implicit breakpoint is added there, :class:`~.models.providers.OpenAIModel`).
    """

    breakpoints: tuple[Breakpoint, ...]
    source: str
    slots: int = 0
    guess: tuple[Breakpoint, ...] = ()


def request_marks(req: Request, segments) -> Marks:
    """The :class:`Marks` of ``req`` whose prompt is cut into token ``segments``
    (``TokenizedPrompt.segments``)."""
    out = []
    for seg in segments:
        src = None
        if seg.kind in ("message", "system") and 0 <= seg.ref < len(req.messages):
            src = req.messages[seg.ref].cache_control
        elif seg.kind == "tool" and 0 <= seg.ref < len(req.tools):
            src = req.tools[seg.ref].cache_control
        if src:
            out.append(Breakpoint(seg.end, TTL_CODES.get(src, 300.0)))
    head = [s.end for s in segments if s.kind in ("system", "tool", "opaque")]
    ends = [s.end for s in segments if s.kind in _CONTENT]
    guess = tuple(([Breakpoint(max(head))] if head else []) + ([Breakpoint(max(ends))] if ends else []))
    extra = req.extra if isinstance(req.extra, Mapping) else {}
    auto = extra.get("cache_control")
    if auto and ends:  # automatic caching: a breakpoint on the last cacheable block
        if not any(bp.end == max(ends) for bp in out):
            out.append(Breakpoint(max(ends), TTL_CODES.get(str(auto), 300.0)))
    # a body sent to another provider's model (a what-if) carries no Anthropic marks: its lack of them says nothing
    other = provider_of(req.model) not in (None, "anthropic") and req.format != "anthropic-messages"
    logged = "cache_control" in req.observed and not (other and not out)
    marked = int(extra.get("cache_control_blocks") or 0) or sum(1 for bp in out if not auto or bp.end != max(ends))
    slots = (marked + (1 if auto else 0)) if logged else 0
    if out:
        source = "logged" if marked else "automatic"
        return Marks(tuple(sorted(out, key=lambda b: b.end)), source, slots, guess)
    if logged:
        return Marks((), "none", slots, guess)
    return Marks(guess, "other" if other and "cache_control" in req.observed else "agent", 0, guess)


def cache_scope(req: Request) -> tuple[str, str]:
    """What a cache entry is scoped by besides its prefix, as ``(head, messages)``: entries are
    per model (a model switch starts a new cache); a change of ``speed`` invalidates the system and
    message entries (here the tools entries too: the head is not split), and a change of ``thinking``
    or ``tool_choice`` the message entries only (Anthropic's "what invalidates the cache" table; tool,
    system and image changes are in the prompt itself). ``head`` scopes entries ending within the system prompt and tools, ``messages``
    the others."""
    extra = req.extra if isinstance(req.extra, Mapping) else {}

    def part(key: str) -> str:
        v = extra.get(key)
        return "" if v is None else json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)

    head = sys.intern(f"{(req.model or '').lower()}|speed={part('speed')}")  # one string per distinct scope
    return head, sys.intern(f"{head}|thinking={part('thinking')}|tool_choice={part('tool_choice')}")


def message_blocks(req: Request, seg) -> int:
    """Content blocks of the part behind token segment ``seg`` (the unit of Anthropic's 20-block
    lookback): a message's text blocks, tool calls, non-text parts and thinking; 1 for a tool, a
    string message or a hidden prefix."""
    if seg.kind in ("message", "system") and 0 <= seg.ref < len(req.messages):
        m = req.messages[seg.ref]
        texts = len(m.text_blocks) if m.text_blocks is not None else int(bool(m.content))
        return max(1, texts + len(m.tool_calls) + len(m.parts) + int(bool(m.reasoning or m.reasoning_opaque)))
    return 1


def block_positions(req: Request, segments) -> dict[int, int]:
    """Token end of each content part → how many content blocks end at or before it
    (:func:`message_blocks`), ascending: the positions the 20-block lookback counts."""
    out: dict[int, int] = {}
    n = 0
    for seg in sorted((s for s in segments if s.kind in _CONTENT), key=lambda s: s.end):
        n += message_blocks(req, seg)
        out[seg.end] = n
    return out


def _sim_request(p, tokens: Sequence[int] | None, hashes: Sequence[int] | None) -> SimRequest:
    """One prepared request (with a prompt or a block trace) as a :class:`SimRequest` whose
    ``order``, ``now`` and ``sent`` are set once the arrival order is known
    (:meth:`SimStream.requests`); ``tokens`` / ``hashes``: its ids as kept."""
    r = p.request
    u = r.usage
    common = dict(order=0, now=0.0, sent=None, session=r.session, index=r.index, source=r.provenance.source,
                  record=r.provenance.record, model=r.model, reported_prompt=u.prompt_tokens if u else None,
                  reported_cached=u.cached_tokens if u else None, reported_output=u.output_tokens if u else None,
                  reported_write=u.cache_write_tokens if u else None)
    if r.trace is not None:
        return SimRequest(num_tokens=r.trace.input_length, hashes=hashes,
                          block_size=r.trace.block_size, infer_session=r.format in SESSIONLESS_FORMATS and not r.messages, **common)
    segs = p.tokens.segments
    last_a = max((i for i, m in enumerate(r.messages) if m.role == "assistant"), default=-1)
    salt = r.extra.get("cache_salt") if isinstance(r.extra, Mapping) else None
    marks = request_marks(r, segs)
    hidden = 0
    if r.extra.get("opaque_prefix_key") and not p.tokens.opaque_prefix_tokens and u and u.prompt_tokens:
        hidden = max(0, u.prompt_tokens - len(p.tokens.ids))
    return SimRequest(
        num_tokens=len(p.tokens.ids), tokens=tokens,
        spans=_spans((_group(s.kind, s.ref, last_a), s.start, s.end) for s in segs),
        boundaries=array("I", sorted({s.end for s in segs if s.kind in _CONTENT})),
        breakpoints=marks.breakpoints if marks.source != "none" else marks.guess, mark_source=marks.source,
        scope=cache_scope(r), head_end=max((s.end for s in segs if s.kind in ("system", "tool", "opaque")), default=0),
        block_pos=array("I", block_positions(r, segs).values()), salt=str(salt) if salt else None, hidden_tokens=hidden,
        exact=bool(p.tokens.exact), reply_ends=_reply_ends(r, segs),
        tool_spans=tuple((s.start, s.end) for s in segs
                         if s.kind == "message" and 0 <= s.ref < len(r.messages) and r.messages[s.ref].role == "tool"),
        implicit_breakpoint=_cache_mode(r) != "explicit", provider_verdict=_verdict(r), **common)


class SimStream:
    """The simulator's requests, built one ``Prepared`` request at a time (input order) so
    the prepared request (text, messages, token tuple) can be dropped right after
    :meth:`add`. Ids are kept :class:`~.compact.Shared` with the previous request of the
    session (block traces: the latest trace starting with the same block id).
    :meth:`requests` gives them in arrival order; :attr:`in_input_order` says whether
    that order is the input order (so far), i.e. whether a consumer fed in input order
    (lint's drift causes) saw the arrival order."""

    def __init__(self) -> None:
        self._reqs: list[SimRequest] = []
        self._times: list[float | None] = []
        self._sent: list[float | None] = []
        self._last_tokens: dict[str, Shared] = {}
        self._last_trace: dict[object, Shared] = {}
        self._order = InputOrder()

    @property
    def in_input_order(self) -> bool:
        """True while the arrival order of what was added is its input order (a time is
        missing, or the logged times never go back)."""
        return self._order.holds

    def add(self, p) -> None:
        """Stage one prepared request (usage-only ones have nothing to replay: skipped)."""
        r = p.request
        if r.trace is None and p.tokens is None:
            return
        t = r.timestamp
        self._order.see(t)
        self._times.append(t)
        self._sent.append(_sent(r))
        if r.trace is not None:
            ids = r.trace.hash_ids
            first = ids[0] if len(ids) else None
            hashes = Shared.of(ids, self._last_trace.get(first))
            if first is not None:
                self._last_trace[first] = hashes
            self._reqs.append(_sim_request(p, None, hashes))
        else:
            tokens = self._last_tokens[r.session] = Shared.of(p.tokens.ids, self._last_tokens.get(r.session))
            self._reqs.append(_sim_request(p, tokens, None))

    def requests(self) -> list[SimRequest]:
        """Everything added, in arrival order, with ``order`` its position in it, ``now``
        the logical clock and ``sent`` the send time (None unless every request is timed)."""
        ordered = arrival_order(range(len(self._reqs)), self._times.__getitem__)
        timed = not self._order.missing
        out = []
        for pos, (now, i) in enumerate(ordered):
            r = self._reqs[i]  # private until now: set in place rather than copied
            object.__setattr__(r, "order", pos)
            object.__setattr__(r, "now", now)
            object.__setattr__(r, "sent", self._sent[i] if timed else None)
            out.append(r)
        return out


def _spans(spans: Iterable[tuple[str, int, int]]) -> tuple[tuple[str, int, int], ...]:
    """``(group, start, end)`` spans with contiguous runs of one group joined (hit attribution
    per group is the same; a long history is one span, not one per message)."""
    out: list[tuple[str, int, int]] = []
    for g, a, b in spans:
        if out and out[-1][0] == g and out[-1][2] == a and a <= b:
            out[-1] = (g, out[-1][1], b)
        else:
            out.append((g, a, b))
    return tuple(out)


def _reply_ends(req: Request, segments) -> Sequence[int]:
    """End (tokens) of each assistant message's span, ascending (a compact array)."""
    return array("I", sorted({s.end for s in segments if s.kind == "message" and 0 <= s.ref < len(req.messages)
                              and req.messages[s.ref].role == "assistant"}))


def to_sim_requests(items: Iterable) -> list[SimRequest]:
    """``Prepared`` items (input order) as :class:`SimRequest`s in arrival order, with
    ``order`` their position in it and ``now`` the logical clock (:class:`SimStream`)."""
    stream = SimStream()
    for p in items:
        stream.add(p)
    return stream.requests()


def _verdict(r: Request) -> tuple[str, int | None] | None:
    """The provider's logged cache verdict of the request (reason, missed tokens), if any."""
    v = r.extra.get("provider_diagnostics") if isinstance(r.extra, Mapping) else None
    if not isinstance(v, Mapping) or not v.get("reason"):
        return None
    n = v.get("missed_tokens")
    return str(v["reason"]), n if isinstance(n, int) else None


def _cache_mode(r: Request) -> str | None:
    """OpenAI ``prompt_cache_options.mode`` of the request (``implicit`` / ``explicit``), if logged."""
    opts = r.extra.get("prompt_cache_options") if isinstance(r.extra, Mapping) else None
    return opts.get("mode") if isinstance(opts, Mapping) else None


def _sent(r: Request) -> float | None:
    """The request's logged send time (``extra["sent_at"]``, seconds), if a reader set one."""
    v = r.extra.get("sent_at") if isinstance(r.extra, Mapping) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def idle_gap(prev: Request, r: Request) -> float | None:
    """Seconds the cache sat idle between ``prev`` and ``r`` on the clock of ``now`` and
    ``sent`` (:class:`SimRequest`): from ``prev``'s logged time (when its response landed and
    its prefix was last used) to ``r``'s send time, or ``r``'s logged time when the log keeps
    no send time. None when either logged time is missing (no clock: position is no time).
    What ``lint --ttl`` compares with the TTL; a provider cache's entries expire on the same
    clock (:meth:`~.provider.caches.AnthropicCache.step` refreshes an entry at ``now``)."""
    if prev.timestamp is None or r.timestamp is None:
        return None
    start = _sent(r)
    return (r.timestamp if start is None else start) - prev.timestamp


@dataclass(frozen=True, slots=True)
class Kept:
    """What the simulate reports read of a prepared request once its prompt is dropped:
    ``request`` without content (names, provenance, model, time, usage, and of ``extra`` only
    the provider cache settings :data:`KEPT_EXTRA`) and whether the log held only usage for it
    (:attr:`~prefixcache.analyzer.prepare.Prepared.usage_only`)."""

    request: Request
    usage_only: bool

    @classmethod
    def of(cls, p) -> "Kept":
        """The kept part of a ``Prepared`` request."""
        r = p.request
        kept = {k: r.extra[k] for k in KEPT_EXTRA if k in r.extra} if r.extra else None
        return cls(Request(session=r.session, index=r.index, format=r.format, provenance=r.provenance,
                           model=r.model, timestamp=r.timestamp, usage=r.usage, extra=kept or _NO_EXTRA), p.usage_only)


#: The ``extra`` of every kept request without provider cache settings: one shared empty mapping, not a dict each.
_NO_EXTRA: Mapping = MappingProxyType({})
#: The ``extra`` keys a kept request keeps: the provider cache settings the provider-call split reads,
#: and where it names its tenant (simulate's per-tenant table).
KEPT_EXTRA = tuple(dict.fromkeys(("prompt_cache_key", "prompt_cache_retention",
                                  *(k.split(".")[0] for k in TENANT_KEYS))))


#: An absent (None) int in :class:`KeptItems`' columns.
_NONE = -(2 ** 63)


class KeptItems(SequenceABC):
    """The :class:`Kept` parts of a stream of prepared requests in columns (input order): a
    sequence of :class:`Kept` equal to ``[Kept.of(p) for p in prepared]``, each rebuilt when read.

    A long block trace is millions of requests whose kept parts are only names, a time and
    counts: as objects (the request, its provenance and usage) they cost about 350 bytes
    each; here 80 bytes (ints and a float in arrays; strings — sessions, sources, formats,
    models — interned once; a request's kept ``extra`` only where it logs provider cache
    settings). A request a column cannot hold as is (a count that is not an int) is kept whole."""

    def __init__(self) -> None:
        self._strings: dict[str | None, int] = {}
        self._names: list[str | None] = []
        self._str = array("i")  # 5 a request: session, format, source, pointer, model
        self._int = array("q")  # 9 a request: index, record, line, usage ×4, usage given, usage only
        self._time = array("d")
        self._timed = array("b")
        self._extra: dict[int, Mapping] = {}
        self._whole: dict[int, Kept] = {}
        self._n = 0

    def _name(self, s: str | None) -> int:
        k = self._strings.get(s)
        if k is None:
            k = self._strings[s] = len(self._names)
            self._names.append(s)
        return k

    def append(self, p) -> None:
        """Keep the kept part of prepared request ``p`` (:meth:`Kept.of`)."""
        kept = Kept.of(p)
        r, pv, u = kept.request, kept.request.provenance, kept.request.usage
        ints = (r.index, pv.record, pv.line, *((u.prompt_tokens, u.cached_tokens, u.cache_write_tokens, u.output_tokens)
                                              if u is not None else (None,) * 4), u is not None, kept.usage_only)
        i = self._n
        self._n += 1
        if type(u) not in (Usage, type(None)) or type(pv) is not Provenance or not all(
                v is None or (type(v) in (int, bool) and v != _NONE) for v in ints) or not all(
                type(s) is str for s in (r.session, r.format, pv.source, pv.pointer)) or not (
                r.timestamp is None or type(r.timestamp) is float):
            self._whole[i] = kept
            ints, r_time = (0,) * 9, None
        else:
            r_time = r.timestamp
        try:
            packed = array("q", [_NONE if v is None else int(v) for v in ints])
        except OverflowError:
            self._whole[i] = kept
            packed = array("q", [0] * 9)
        self._int.extend(packed)
        self._str.extend((self._name(r.session), self._name(r.format), self._name(pv.source), self._name(pv.pointer),
                          self._name(r.model)))
        self._time.append(0.0 if r_time is None else r_time)
        self._timed.append(r_time is not None)
        if r.extra:
            self._extra[i] = r.extra

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        whole = self._whole.get(i)
        if whole is not None:
            return whole
        s, names = self._str[5 * i:5 * i + 5], self._names
        v = [None if x == _NONE else x for x in self._int[9 * i:9 * i + 9]]
        usage = Usage(v[3], v[4], v[5], v[6]) if v[7] else None
        return Kept(Request(session=names[s[0]], index=v[0], format=names[s[1]],
                            provenance=Provenance(names[s[2]], v[1], names[s[3]], v[2]), model=names[s[4]],
                            timestamp=self._time[i] if self._timed[i] else None, usage=usage,
                            extra=self._extra.get(i, _NO_EXTRA)), bool(v[8]))

    def __iter__(self):
        return (self[i] for i in range(self._n))

    def permuted(self, order: Sequence[int]) -> "KeptItems":
        """These parts in ``order`` (positions in this sequence, each once): a new
        :class:`KeptItems` whose item ``k`` is this one's ``order[k]``; columns gathered with
        numpy, the interned strings shared."""
        idx = np.asarray(order, dtype=np.int64)
        if len(idx) != self._n:
            raise ValueError(f"an order of {len(idx)} positions for {self._n} kept parts")
        back = np.empty(self._n, dtype=np.int64)
        back[idx] = np.arange(self._n, dtype=np.int64)  # old position -> new
        out = KeptItems()
        out._strings, out._names, out._n = self._strings, self._names, self._n
        out._str = array("i", np.frombuffer(self._str, dtype=np.int32).reshape(-1, 5)[idx].tobytes())
        out._int = array("q", np.frombuffer(self._int, dtype=np.int64).reshape(-1, 9)[idx].tobytes())
        out._time = array("d", np.frombuffer(self._time, dtype=np.float64)[idx].tobytes())
        out._timed = array("b", np.frombuffer(self._timed, dtype=np.int8)[idx].tobytes())
        out._extra = {int(back[i]): v for i, v in self._extra.items()}
        out._whole = {int(back[i]): v for i, v in self._whole.items()}
        return out

    def facts(self) -> "ItemFacts":
        """:func:`item_facts` from the columns (no request rebuilt)."""
        names, ints = self._names, self._int
        models = [names[k] for k in self._str[4::5]]
        usages = [Usage(*(None if x == _NONE else x for x in ints[9 * i + 3:9 * i + 7])) if ints[9 * i + 7] else None
                  for i in range(self._n)]
        only = sum(ints[8::9])
        for i, kept in self._whole.items():
            models[i], usages[i] = kept.request.model, kept.request.usage
            only += kept.usage_only
        return ItemFacts(models, usages, only, bool(self._extra) or any(k.request.extra for k in self._whole.values()))


@dataclass(frozen=True, slots=True)
class ItemFacts:
    """What a simulate report reads of every prepared item: each one's ``models`` and ``usages``
    (input order), how many held only usage (``usage_only``), and whether any kept an ``extra``."""

    models: list[str | None]
    usages: list[Usage | None]
    usage_only: int
    any_extra: bool


def item_facts(items: Sequence) -> ItemFacts:
    """The :class:`ItemFacts` of prepared items (``Prepared``, :class:`Kept`, or :class:`KeptItems`:
    read from its columns)."""
    if isinstance(items, KeptItems):
        return items.facts()
    return ItemFacts([p.request.model for p in items], [p.request.usage for p in items],
                     sum(p.usage_only for p in items), any(p.request.extra for p in items))
