"""The request stream a cache simulation replays: :class:`SimRequest` and its arrival order.

Input: :class:`~prefixcache.analyzer.prepare.Prepared` requests (token prompts from
logs, or block-hash traces). They are put in :func:`~prefixcache.analyzer.sequence.arrival_order`
(by logged timestamp, stable; input order when any time is missing) and ``now`` is
that logical clock (logged seconds, else the position). Usage-only requests (no
prompt logged) have nothing to replay and are left out.

Each request's block chain is hashed once per (block size, salt) and kept with the
request (:meth:`SimRequest.chain`), so every cache model and sweep of the run reuses
it; so are its prefix hashes at breakpoints (:meth:`SimRequest.prefix_hashes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from prefixcache.analyzer.cache.base import BlockHash
from prefixcache.analyzer.cache.block_hash import hash_blocks
from prefixcache.analyzer.cache.provider import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.trace_sessions import SESSIONLESS_FORMATS
from prefixcache.analyzer.model import Request
from prefixcache.analyzer.sequence import arrival_order

#: ``cache_control`` TTL codes of the logs (seconds).
TTL_CODES = {"5m": 300.0, "1h": 3600.0, "30m": 1800.0, "12h": 43200.0}
#: Segment kinds that are content blocks (breakpoints and lookback stop at their ends;
#: the generation prompt and template glue are not content).
_CONTENT = ("system", "tool", "message", "opaque")


@dataclass(frozen=True, slots=True)
class SimRequest:
    """A request reduced to what cache models need.

    ``tokens`` for log prompts, ``hashes`` + ``block_size`` (the trace's block size,
    tokens) for block traces; ``spans``: ``(group, start, end)`` token spans for hit
    attribution; ``boundaries``: content-block ends (tokens); ``breakpoints``:
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
    inferred from the hash chains (:mod:`.trace_sessions`), ``session`` stays the reader's.
    """

    order: int
    session: str
    index: int
    source: str
    record: int
    model: str | None
    now: float
    num_tokens: int
    tokens: tuple[int, ...] | None = None
    hashes: tuple[int, ...] | None = None
    block_size: int = 0
    spans: tuple[tuple[str, int, int], ...] = ()
    boundaries: tuple[int, ...] = ()
    breakpoints: tuple[Breakpoint, ...] = ()
    salt: str | None = None
    hidden_tokens: int = 0
    reported_prompt: int | None = None
    reported_cached: int | None = None
    exact: bool = True
    reply_ends: tuple[int, ...] = ()
    sent: float | None = None
    reported_output: int | None = None
    reported_write: int | None = None
    implicit_breakpoint: bool = True
    provider_verdict: tuple[str, int | None] | None = None
    infer_session: bool = False
    _chains: dict[tuple[int, str | None], tuple[BlockHash, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _cuts: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def chain(self, block_size: int, salted: bool = True) -> tuple[BlockHash, ...]:
        """Chained hashes of the prompt's full blocks of ``block_size`` tokens, in the
        request's ``cache_salt`` namespace (``salted``) or none; computed once per
        (block size, salt) and kept. A block trace's chain is its logged hash ids."""
        if self.hashes is not None:
            return self.hashes  # type: ignore[return-value]
        key = (block_size, self.salt if salted else None)
        got = self._chains.get(key)
        if got is None:
            extra = ("cache_salt", key[1]) if key[1] else None
            got = self._chains[key] = tuple(hash_blocks(self.tokens or (), block_size, extra))
        return got


    def prefix_hashes(self) -> dict[int, int]:
        """Hash of the prompt up to each content-block boundary and breakpoint
        (:meth:`~.provider.AnthropicCache.prefix_hashes`), computed once and kept."""
        if not self._cuts and self.tokens:
            n = len(self.tokens)
            cuts = {b for b in self.boundaries if 0 < b <= n} | {bp.end for bp in self.breakpoints if 0 < bp.end <= n}
            self._cuts.update(AnthropicCache.prefix_hashes(self.tokens, sorted(cuts)))
        return self._cuts


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


def _sim_request(p, pos: int, now: float = 0.0, sent: float | None = None) -> SimRequest | None:
    """One prepared request as a :class:`SimRequest` at position ``pos`` of the arrival
    order, logical time ``now`` and send time ``sent``; None for a usage-only request."""
    r = p.request
    u = r.usage
    common = dict(order=pos, now=now, sent=sent, session=r.session, index=r.index, source=r.provenance.source,
                  record=r.provenance.record, model=r.model, reported_prompt=u.prompt_tokens if u else None,
                  reported_cached=u.cached_tokens if u else None, reported_output=u.output_tokens if u else None,
                  reported_write=u.cache_write_tokens if u else None)
    if r.trace is not None:
        return SimRequest(num_tokens=r.trace.input_length, hashes=tuple(r.trace.hash_ids),
                          block_size=r.trace.block_size, infer_session=r.format in SESSIONLESS_FORMATS, **common)
    if p.tokens is None:
        return None
    segs = p.tokens.segments
    last_a = max((i for i, m in enumerate(r.messages) if m.role == "assistant"), default=-1)
    salt = r.extra.get("cache_salt") if isinstance(r.extra, Mapping) else None
    hidden = 0
    if r.extra.get("opaque_prefix_key") and not p.tokens.opaque_prefix_tokens and u and u.prompt_tokens:
        hidden = max(0, u.prompt_tokens - len(p.tokens.ids))
    return SimRequest(
        num_tokens=len(p.tokens.ids), tokens=tuple(p.tokens.ids),
        spans=tuple((_group(s.kind, s.ref, last_a), s.start, s.end) for s in segs),
        boundaries=tuple(sorted({s.end for s in segs if s.kind in _CONTENT})),
        breakpoints=_marks(r, segs), salt=str(salt) if salt else None, hidden_tokens=hidden,
        exact=bool(p.tokens.exact), reply_ends=_reply_ends(r, segs),
        implicit_breakpoint=_cache_mode(r) != "explicit", provider_verdict=_verdict(r), **common)


def _reply_ends(req: Request, segments) -> tuple[int, ...]:
    """End (tokens) of each assistant message's span, ascending."""
    return tuple(sorted({s.end for s in segments if s.kind == "message" and 0 <= s.ref < len(req.messages)
                         and req.messages[s.ref].role == "assistant"}))


def to_sim_requests(items: Iterable) -> list[SimRequest]:
    """``Prepared`` items (input order) as :class:`SimRequest`s in arrival order, with
    ``order`` their position in it and ``now`` the logical clock."""
    staged = [(p.request.timestamp, p, _sent(p.request)) for p in items
              if p.request.trace is not None or p.tokens is not None]
    ordered = arrival_order(staged, lambda item: item[0])
    timed = all(t is not None for t, _, _ in staged)  # else the clock is the position: send times don't apply
    return [_sim_request(p, i, now, sent if timed else None)  # type: ignore[misc]
            for i, (now, (_, p, sent)) in enumerate(ordered)]


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
