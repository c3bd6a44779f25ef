"""PC6xx: provider cache rules and cross-session reuse.

PC601 knows each provider's minimum cacheable prompt length; PC602 looks at the
first request of a session against the most similar request of another session:
when their system prompts and tools are nearly identical but differ at one spot,
per-session content sits in what should be a prefix shared by every session.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from prefixcache.analyzer.cache.provider.rules import rules_for
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


def provider_minimum(model: str | None) -> tuple[int, str] | None:
    """(minimum cacheable prompt tokens, provider) for a model name, or None when
    the model is not a known hosted model (self-hosted engines have no minimum)."""
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
        For hosted models with a known minimum (Anthropic 1,024–4,096 tokens by
        model, OpenAI 1,024), reports the first request of a session whose prompt
        reuses an earlier prefix in theory but is too short to be cached at all.
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
        if found is None or n == 0 or n >= found[0] or shared <= 0 or prepared.tokens is None:
            return
        if req.observed and "messages" not in req.observed:  # prompt not in the log: length unknown
            return
        reported = req.usage.prompt_tokens if req.usage is not None else None
        if shared < MIN_SHARED or (reported is not None and reported >= found[0]):
            return  # a few template tokens are no reuse; the provider saw a long enough prompt
        seen = state.setdefault(self.code, set())
        if req.session in seen:
            return
        seen.add(req.session)
        minimum, provider = found
        approx = "" if prepared.tokens.exact else "~"
        yield Finding(self.code, self.name, self.severity, req.session, req.index, "prompt", "", None, None,
                      f"prompt of {approx}{n:,} tokens is below {provider}'s {minimum:,}-token minimum for "
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


RULES = [BelowProviderMinimum(), CrossSessionPrefix()]
