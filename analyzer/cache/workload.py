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

from array import array
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from prefixcache.analyzer.ingest.tenancy import TENANT_KEYS
from prefixcache.analyzer.cache.base import BlockHash
from prefixcache.analyzer.cache.index.block_hash import hash_blocks
from prefixcache.analyzer.cache.index.compact import Shared
from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.index.trace_sessions import SESSIONLESS_FORMATS
from prefixcache.analyzer.model import Request
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
    reuse-in-time figures of :mod:`~prefixcache.analyzer.cache.simulate.survival`.
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


def _marks(req: Request, segments) -> tuple[Breakpoint, ...]:
    out = []
    for seg in segments:
        src = None
        if seg.kind in ("message", "system") and 0 <= seg.ref < len(req.messages):
            src = req.messages[seg.ref].cache_control
        elif seg.kind == "tool" and 0 <= seg.ref < len(req.tools):
            src = req.tools[seg.ref].cache_control
        if src:
            out.append(Breakpoint(seg.end, TTL_CODES.get(src, 300.0)))
    if out:
        return tuple(out)
    head = [s.end for s in segments if s.kind in ("system", "tool", "opaque")]
    ends = [s.end for s in segments if s.kind in _CONTENT]
    auto = ([Breakpoint(max(head))] if head else []) + ([Breakpoint(max(ends))] if ends else [])
    return tuple(auto)


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
    hidden = 0
    if r.extra.get("opaque_prefix_key") and not p.tokens.opaque_prefix_tokens and u and u.prompt_tokens:
        hidden = max(0, u.prompt_tokens - len(p.tokens.ids))
    return SimRequest(
        num_tokens=len(p.tokens.ids), tokens=tokens,
        spans=_spans((_group(s.kind, s.ref, last_a), s.start, s.end) for s in segs),
        boundaries=array("I", sorted({s.end for s in segs if s.kind in _CONTENT})),
        breakpoints=_marks(r, segs), salt=str(salt) if salt else None, hidden_tokens=hidden,
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
