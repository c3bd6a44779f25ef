"""PC6xx: provider cache rules and cross-session reuse.

PC601 knows each provider's minimum cacheable prompt length; PC602 looks at the
first request of a session against the most similar request of another session:
when their system prompts and tools are nearly identical but differ at one spot,
per-session content sits in what should be a prefix shared by every session.

PC603–PC607 check how a request to an Anthropic model placed its ``cache_control``
breakpoints, where the log shows the request body (not agent transcripts, which
cannot show them): none on a long reused prefix, more than the 4 slots, the last one
moved back, one too far past the previous entry for the 20-block lookback, and
writes no later request reads. The breakpoints, cache scope and lookback are the
simulator's own (:func:`~prefixcache.analyzer.cache.workload.request_marks`,
:class:`~prefixcache.analyzer.cache.provider.caches.AnthropicCache`), so lint and
``simulate --cache anthropic`` never disagree.
"""

from __future__ import annotations

import functools

import re
from typing import TYPE_CHECKING, Iterable

from dataclasses import dataclass

import xxhash

from prefixcache.analyzer.cache.provider.caches import AnthropicCache, Breakpoint
from prefixcache.analyzer.cache.provider.rules import rules_for
from prefixcache.analyzer.cache.index.compact import int64_bytes
from prefixcache.analyzer.cache.workload import block_positions, cache_scope, request_marks
from prefixcache.analyzer.sequence import common_prefix_len
from prefixcache.analyzer.volatile import TIME_KINDS
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, origin
from prefixcache.analyzer.lint.rules.volatile import USER_VALUE_NAMES, changed_user_value

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare import Prepared

#: Hosted model families whose provider caches have a minimum length: (name pattern,
#: provider key in the simulator's table, provider name). The minimums themselves come
#: from that one table (:data:`prefixcache.analyzer.cache.provider.rules.PROVIDERS` and
#: ``ANTHROPIC_MIN_TOKENS``), so lint and simulate never disagree.
HOSTED_FAMILIES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(p, re.I), key, label) for p, key, label in (
        (r"claude", "anthropic", "Anthropic"),
        (r"^(gpt-|o1|o3|o4|chatgpt|codex)", "openai", "OpenAI"),
        (r"deepseek", "deepseek", "DeepSeek"),
    )
)


#: Shared tokens below this are template boilerplate, not reuse worth reporting.
MIN_SHARED = 64


@functools.lru_cache(maxsize=1024)
def provider_minimum(model: str | None) -> tuple[int, str] | None:
    """(minimum cacheable prompt tokens, provider) for a model name, or None when
    the model is not a known hosted model (self-hosted engines have no minimum). Remembered
    per name (the tables are constants; lint asks once a request per rule)."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    for pattern, key, provider in HOSTED_FAMILIES:
        if pattern.search(name):
            return rules_for(key, name).min_tokens, provider
    return None


def provider_ttl(model: str | None) -> float | None:
    """The default idle retention (seconds, refreshed on hit) of the hosted provider that serves
    ``model`` (:func:`~prefixcache.analyzer.cache.provider.rules.rules_for` ``.ttl_s``, the row
    ``simulate`` applies: Anthropic 5 min, OpenAI in-memory 5 min (GPT-5.6+ 30 min by its price
    row), DeepSeek 24 h), or None for a model no hosted family matches (a self-hosted engine
    keeps its KV until evicted: no TTL). What ``lint --ttl provider`` applies."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    for pattern, key, _provider in HOSTED_FAMILIES:
        if pattern.search(name):
            return rules_for(key, name).ttl_s
    return None


class BelowProviderMinimum(Rule):
    """The prompt is shorter than the provider's minimum cacheable length.

    What it does:
        For hosted models with a known minimum (Anthropic 512–4,096 tokens by
        model, OpenAI 1,024), reports the first request of a session whose prompt
        reuses an earlier prefix in theory but is too short to be cached at all. For
        an Anthropic request whose log shows its cache_control marks, the length is
        the prefix up to its last breakpoint: a long prompt whose marks end early
        caches nothing either.
    Why it breaks caching:
        Providers silently skip caching below the minimum: no cache write, no
        cache read, no error. The reusable tokens lint computes are never served.
    Example:
        a 2,400-token prompt on a model with a 4,096-token minimum: two identical
        calls both report cache_read_input_tokens = 0.
    Use instead:
        Nothing to fix when prompts are short by nature; for repeated short
        prompts, batch shared context into one longer stable prefix.
    Fix safety:
        Safe to ignore; padding prompts only to reach the minimum costs more than
        it saves.
    """

    code, name, group, severity = "PC601", "below-provider-minimum", "provider", "info"
    scope = "request"
    fix = "Expect no provider caching below the minimum; share a longer stable prefix if the calls repeat."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        req, n = prepared.request, prepared.prompt_tokens
        found = provider_minimum(req.model)
        shared = state.get("shared", 0)
        _, marked = _anthropic_call(prepared, state)
        what = "prompt"
        if marked is not None and marked.breakpoints:  # what is cached is the prefix up to the last breakpoint
            n, what = marked.last, "prefix up to the last cache_control breakpoint"
        if found is None or n == 0 or n >= found[0] or shared <= 0 or prepared.tokens is None:
            return
        if req.observed and "messages" not in req.observed:  # prompt not in the log: length unknown
            return
        reported = req.usage.prompt_tokens if req.usage is not None and what == "prompt" else None
        if shared < MIN_SHARED or (reported is not None and reported >= found[0]):
            return  # a few template tokens are no reuse; the provider saw a long enough prompt
        seen = state.setdefault(self.code, set())
        if req.session in seen:
            return
        seen.add(req.session)
        minimum, provider = found
        approx = "" if prepared.tokens.exact else "~"
        yield Finding(self.code, self.name, self.severity, req.session, req.index, "prompt", "", None, None,
                      f"{what} of {approx}{n:,} tokens is below {provider}'s {minimum:,}-token minimum for "
                      f"{req.model}: the {shared:,} reusable tokens will not be served from its cache",
                      self.fix, **origin(req),
                      certain=prepared.tokens.exact)


def _static_end(prepared: "Prepared") -> int:
    """End (chars) of the system prompt and tools in the rendered text."""
    rendered = prepared.rendered
    ends = [seg.end for seg in rendered.segments if seg.kind in ("system", "tool")] if rendered else []
    return max(ends, default=0)


def static_end_tokens(prepared: "Prepared") -> int:
    """End (tokens) of the system prompt and tools in the token ids (0 when none)."""
    tokens = prepared.tokens
    ends = [seg.end for seg in tokens.segments if seg.kind in ("system", "tool")] if tokens else []
    return max(ends, default=0)


class CrossSessionPrefix(Rule):
    """Per-session content sits inside the prefix every session should share.

    What it does:
        Compares a request with the most similar request of another session. When
        they first differ inside the system prompt or tools, and those parts are
        otherwise nearly identical (the common head and tail cover at least half of
        them), reports the per-session value there and the underlying cause (a
        session id is PC102, a start time PC101, a user's e-mail or locale PC104).
    Why it breaks caching:
        The system prompt and tools are the same for every session of an agent and
        could be prefilled once for all of them (provider caches are shared across
        requests of one organization; engines share the radix tree). A session id
        or start time near the top makes every session pay the full prefill of the
        system prompt and tools again.
    Example:
        session A: "Session: 7d3f5c8e-...\\nYou are a coding agent..."
        session B: "Session: 0a9b8c7d-...\\nYou are a coding agent..."
    Use instead:
        Put per-session values after the shared system prompt and tools (in the
        first user message or as metadata), so the shared part is byte-identical
        across sessions.
    Fix safety:
        Safe when the model reads the value from any place; moving it is enough.
    """

    code, name, group, severity = "PC602", "cross-session-prefix", "provider", "warning"
    parts = frozenset({"system", "tool"})
    cross_session = True
    order = 5
    fix = "Move per-session values after the shared system prompt and tools (first user message or metadata)."

    def check(self, ctx: PairContext) -> Finding | None:
        if not ctx.cross_session or ctx.div.char is None or ctx.div.other_kind not in ("system", "tool"):
            return None
        er, es, c = _static_end(ctx.r), _static_end(ctx.s), ctx.div.char
        if c >= er or c >= es:
            return None
        tail = common_prefix_len(ctx.r_text[c:er][::-1], ctx.s_text[c:es][::-1])
        if c + tail < 0.5 * max(er, es):
            return None
        hit = ctx.volatile
        related = None
        what = "per-session content"
        user = changed_user_value(ctx.r_text, ctx.s_text, c) if hit is None else None
        if hit is not None:
            related = "PC101" if hit[0].kind in TIME_KINDS else "PC102"
            what = f"per-session {hit[0].kind} ({'volatile-timestamp' if related == 'PC101' else 'volatile-id'})"
        elif user is not None:
            related, what = "PC104", f"per-session {USER_VALUE_NAMES[user[0]]} (user-data-in-prefix)"
        where = f"{ctx.div.segment}, line {ctx.div.line}" if ctx.div.line else ctx.div.segment
        msg = (f"{what} in {where}: sessions {ctx.sq.session!r} and {ctx.rq.session!r} share only the first "
               f"{ctx.div.token:,} tokens of a system prompt and tools that are otherwise the same")
        return ctx.finding(self, msg, related=related, certain=related is not None)


@dataclass(frozen=True, slots=True)
class _Call:
    """One request to an Anthropic model whose log shows its ``cache_control``: what PC603–PC607
    compare with the previous request of its session. Offsets are tokens."""

    index: int
    ids: tuple[int, ...]
    breakpoints: tuple[Breakpoint, ...]
    source: str
    slots: int
    scope: tuple[str, str]
    blocks: dict[int, int]
    head_end: int
    minimum: int
    time: float | None

    @property
    def last(self) -> int:
        """End of the last breakpoint (0: none)."""
        return max((bp.end for bp in self.breakpoints), default=0)


def _anthropic_call(prepared: "Prepared", state: dict) -> tuple[_Call | None, _Call | None]:
    """(previous request of the session under the same cache scope, this request) for a request to
    a Claude model whose log shows its cache marks; (None, None) otherwise. Computed once per
    request and shared by the rules (kept in ``state``)."""
    req, tokens = prepared.request, prepared.tokens
    key = (req.session, req.index, req.provenance.record)
    got = state.get("anthropic_call")
    if got is not None and got[0] == key:
        return got[1]
    pair: tuple[_Call | None, _Call | None] = (None, None)
    found = provider_minimum(req.model)
    if tokens is not None and found is not None and found[1] == "Anthropic" and "cache_control" in req.observed:
        marks = request_marks(req, tokens.segments)
        cur = _Call(req.index, tuple(tokens.ids), marks.breakpoints, marks.source, marks.slots, cache_scope(req),
                    block_positions(req, tokens.segments),
                    max((sg.end for sg in tokens.segments if sg.kind in ("system", "tool", "opaque")), default=0),
                    found[0], req.timestamp)
        last = state.setdefault("anthropic_last", {})
        pair = (last.get((req.session, cur.scope)), cur)
        last[(req.session, cur.scope)] = cur
    state["anthropic_call"] = (key, pair)
    return pair


def _once(rule: Rule, state: dict, session: str) -> bool:
    """True the first time ``rule`` reports in ``session`` (each of these rules reports once per session)."""
    seen = state.setdefault(rule.code, set())
    if session in seen:
        return False
    seen.add(session)
    return True


def _finding(rule: Rule, prepared: "Prepared", message: str, **kw) -> Finding:
    req = prepared.request
    return Finding(rule.code, rule.name, kw.pop("severity", rule.severity), req.session, req.index, "prompt", "",
                   None, kw.pop("token", None), message, rule.fix, **origin(req), **kw)


class NoCacheBreakpoint(Rule):
    """A long prefix is sent again and again with no cache breakpoint.

    What it does:
        For requests to Anthropic models whose log shows the request body, reports a
        session whose request has no ``cache_control`` mark and no automatic caching
        (a top-level ``cache_control``) while it shares at least the model's minimum
        cacheable length with an earlier request. Agent transcripts (Claude Code) do
        not log the marks the agent sets and are never reported.
    Why it breaks caching:
        Anthropic caches only at breakpoints: without one nothing is written and
        nothing is read, and the shared prefix is billed at the full input price on
        every request (the response reports cache_creation_input_tokens = 0 and
        cache_read_input_tokens = 0).
    Example:
        two calls with the same 6,000-token system prompt as a plain string and no
        cache_control anywhere: both bill 6,000 uncached input tokens.
    Use instead:
        Add a top-level "cache_control": {"type": "ephemeral"} (automatic caching: a
        breakpoint on the last block that moves forward as the conversation grows),
        or mark the last system block (tools and system) and the last block of the
        newest turn.
    Fix safety:
        Safe: a breakpoint changes billing and latency, never the model's output. A
        write costs 1.25× the input price (2× for 1 h), so a prefix sent only once
        gains nothing.
    """

    code, name, group, severity = "PC603", "no-cache-breakpoint", "provider", "warning"
    scope = "request"
    fix = "Add a top-level cache_control (automatic caching) or mark the last system block and the newest turn."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        _, cur = _anthropic_call(prepared, state)
        shared = state.get("shared", 0)
        if cur is None or cur.source != "none" or shared < cur.minimum or not _once(self, state, prepared.request.session):
            return
        yield _finding(self, prepared, f"no cache_control and no automatic caching: the {shared:,} tokens this "
                       f"request shares with an earlier one (at least {cur.minimum:,}, the minimum for "
                       f"{prepared.request.model}) are neither written nor read", token=shared)


class TooManyBreakpoints(Rule):
    """More than 4 cache breakpoints in one request.

    What it does:
        Counts the ``cache_control`` marks of a request to an Anthropic model (marked
        tools, system blocks, message blocks, plus one for a top-level automatic
        mark) and reports more than 4.
    Why it breaks caching:
        The API accepts at most 4 breakpoint slots per request and rejects the
        request otherwise (the automatic mark takes one of them); code that marks
        every tool result to "cache more" fails outright.
    Example:
        four marked tools and a marked system block: 5 slots.
    Use instead:
        One mark per stability boundary: end of tools and system, end of a long shared
        document, the last block of the newest turn. Entries at earlier blocks are
        found anyway by the 20-block lookback.
    Fix safety:
        Safe: fewer marks lose nothing the lookback does not find.
    """

    code, name, group, severity = "PC604", "too-many-breakpoints", "provider", "error"
    scope = "request"
    fix = "Use at most 4 cache_control marks (the automatic top-level mark counts as one)."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        _, cur = _anthropic_call(prepared, state)
        limit = rules_for("anthropic").max_breakpoints
        if cur is None or cur.slots <= limit or not _once(self, state, prepared.request.session):
            return
        yield _finding(self, prepared, f"{cur.slots} cache_control slots used (marked blocks plus the top-level "
                       f"automatic one); the API allows {limit}")


class BreakpointMovedBack(Rule):
    """The last cache breakpoint moved earlier than the previous request's.

    What it does:
        Compares a request to an Anthropic model with the previous request of its
        session (same model): the prompt still starts with everything up to the
        previous request's last breakpoint, but its own last breakpoint ends before it.
    Why it breaks caching:
        The entry written at the previous request's last breakpoint can only be read
        from a breakpoint at or after it; with the mark moved back, that tail is
        billed again (and written again if the mark moves forward later).
    Example:
        request 1 marks system and the newest turn; request 2 marks only system:
        request 1's conversation entry is never read.
    Use instead:
        Keep a breakpoint on the last block of the newest turn as the history grows
        (or use automatic caching, which moves it forward).
    Fix safety:
        Safe: where a breakpoint sits never changes the output.
    """

    code, name, group, severity = "PC605", "breakpoint-moved-back", "provider", "warning"
    scope = "request"
    fix = "Keep the last breakpoint on the newest turn's last block (or use automatic caching)."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        prev, cur = _anthropic_call(prepared, state)
        if cur is None or prev is None or cur.source == "none" or not prev.last or cur.last >= prev.last:
            return
        if prev.last > len(cur.ids) or cur.ids[:prev.last] != prev.ids[:prev.last]:
            return  # the prompt changed before the old mark: a break, not a moved mark
        if _once(self, state, prepared.request.session):
            yield _finding(self, prepared, f"last breakpoint moved back from token {prev.last:,} to {cur.last:,}: "
                           f"the {prev.last - cur.last:,} tokens written at the previous request's last breakpoint "
                           "are not read", token=cur.last)


class LookbackExceeded(Rule):
    """The breakpoint is more than 20 blocks past the previous entry.

    What it does:
        For a request to an Anthropic model that extends the previous request of its
        session, counts the content blocks (text, tool_use, tool_result, image,
        thinking) from the previous request's last breakpoint to this request's
        nearest breakpoint after it, and reports more than 20 with no breakpoint
        in between.
    Why it breaks caching:
        A lookup checks the breakpoint and the 20 content blocks before it for an
        earlier entry, no further. An agent turn that appends more (eleven parallel
        tool calls and their results) misses the previous turn's entry, and the whole
        conversation is written again at 1.25×.
    Example:
        request 1 marks its last block; request 2 appends 25 tool results and marks
        only its new last block.
    Use instead:
        Put an intermediate breakpoint within every 20 blocks of a long turn (up to 4
        slots: one for tools and system, the rest rolling through the messages).
    Fix safety:
        Safe: breakpoints never change the output.
    """

    code, name, group, severity = "PC606", "lookback-exceeded", "provider", "warning"
    scope = "request"
    fix = "Add a breakpoint within 20 blocks of the previous request's last breakpoint."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        prev, cur = _anthropic_call(prepared, state)
        if cur is None or prev is None or not prev.last or prev.last < cur.minimum or cur.last < prev.last:
            return
        if cur.ids[:prev.last] != prev.ids[:prev.last]:
            return
        rules = rules_for("anthropic", prepared.request.model)
        if AnthropicCache(rules).reachable(prev.last, sorted(cur.blocks), cur.breakpoints, len(cur.ids), cur.blocks):
            return
        at = cur.blocks.get(prev.last, 0)
        nearest = min(bp.end for bp in cur.breakpoints if bp.end >= prev.last)
        if _once(self, state, prepared.request.session):
            yield _finding(self, prepared, f"{cur.blocks.get(nearest, at) - at} content blocks from the previous "
                           f"request's last breakpoint (token {prev.last:,}) to this request's next one (token "
                           f"{nearest:,}); a lookup looks back {rules.lookback_blocks}", token=prev.last)


class WritesNeverRead(Rule):
    """Every request writes a cache entry that no later request reads.

    What it does:
        From reported usage: a request to an Anthropic model that wrote to the cache
        and read nothing, after an earlier request with the same model and the same
        system prompt and tools did the same within the cache's retention, while
        neither has a breakpoint at the end of that shared head.
    Why it breaks caching:
        The only breakpoints sit after per-request content (the newest question), so
        each request writes an entry of its own at 1.25× the input price and no other
        request ever has that prefix: caching costs more than it saves.
    Example:
        single-turn calls with one large system prompt, each marking only its user
        message: cache_creation_input_tokens on every call, cache_read_input_tokens 0.
    Use instead:
        Mark the last system block (or the last tool) so the shared head is one entry
        every request reads.
    Fix safety:
        Safe: moving a mark never changes the output.
    """

    code, name, group, severity = "PC607", "writes-never-read", "provider", "warning"
    scope = "request"
    fix = "Put a breakpoint at the end of the shared system prompt and tools."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        _, cur = _anthropic_call(prepared, state)
        u = prepared.request.usage
        if cur is None or u is None or not u.cache_write_tokens or u.cached_tokens or not cur.head_end:
            return
        head = (cur.scope[0], xxhash.xxh3_64_intdigest(int64_bytes(cur.ids[:cur.head_end])))
        writes = state.setdefault("anthropic_writes", {})  # head -> (time, head marked, longest TTL) of its last write
        prev = writes.get(head)
        marked = any(bp.end <= cur.head_end for bp in cur.breakpoints)
        writes[head] = (cur.time, marked, max((bp.ttl_s for bp in cur.breakpoints), default=300.0))
        if prev is None or marked or prev[1]:
            return  # a marked head that is not read is a provider-side miss, not placement
        if cur.time is not None and prev[0] is not None and cur.time - prev[0] > prev[2]:
            return
        if _once(self, state, prepared.request.session):
            yield _finding(self, prepared, f"wrote {u.cache_write_tokens:,} tokens and read none, like an earlier "
                           "request with the same system prompt and tools: every breakpoint sits after per-request "
                           f"content (the shared head, {cur.head_end:,} tokens, is not marked)", token=cur.head_end)


RULES = [BelowProviderMinimum(), CrossSessionPrefix(), NoCacheBreakpoint(), TooManyBreakpoints(),
         BreakpointMovedBack(), LookbackExceeded(), WritesNeverRead()]
