"""PC002: a block-hash trace request that does not extend its predecessor.

Traces carry block hashes, not text, so lint can say where and how much, never why:
the cause is stated as unknown. The divergence itself is computed by
:func:`prefixcache.analyzer.cache.index.trace_sessions.trace_break`.
"""

from __future__ import annotations

from prefixcache.analyzer.lint.rules.base import Finding, Rule, origin
from prefixcache.analyzer.cache.index.trace_sessions import TraceBreak
from prefixcache.analyzer.model import Request


class TraceDivergence(Rule):
    """A block-hash trace request stops sharing blocks with the previous request of its session.

    What it does:
        For traces (Mooncake, Bailian, kv-cache-tester), which carry prefix-chained block
        hashes and no text, reports every request whose hash chain is not an extension of
        its predecessor's: the first differing block, its first token, and the tokens
        the session had computed that are no longer reusable. The cause is unknown: the
        trace has no text to explain it.
    Why it breaks caching:
        Equal block ids mean equal prefixes, so the first differing block is where the
        prompt changed; every token after it is prefilled again.
    Example:
        request 40 of a Claude Code trace shares only its first 269 blocks (the tools and
        system prompt, 17,216 tokens) with request 39 after a /compact.
    Use instead:
        Find the text log of the same session and lint it: the text says why (compaction,
        an edited system prompt, a sliding window).
    Fix safety:
        Unknown until the cause is known from the text log.
    """

    code, name, group, severity = "PC002", "trace-divergence", "-", "warning"
    severity_when = "info when only the earlier request's last full block differs (its end was replaced, as a generation prompt is)"
    parts = frozenset()
    fix = ("Lint the text log of the same session to learn the cause; the trace records only where the "
           "prefix stopped being shared.")

    def finding(self, req: Request, session: str, index: int, brk: TraceBreak, lost: int,
                previous: tuple[str, int], blocks: int) -> Finding:
        """The finding for ``req`` (named ``session``/``index``) diverging at ``brk`` from
        ``previous`` (a predecessor of ``blocks`` hashed blocks), ``lost`` tokens lost.
        Severity ``info`` when only the predecessor's last block differs."""
        where = f"{req.provenance.pointer}.hash_ids[{brk.block}]" if req.provenance.pointer else f"hash_ids[{brk.block}]"
        what = ("only the last block of the previous request differs (its end was replaced)" if brk.tail else
                f"shares {brk.block:,} of the previous request's {blocks:,} blocks")
        return Finding(
            code=self.code, name=self.name, severity="info" if brk.tail else self.severity, session=session,
            request=index, segment="blocks", json_path=where, char=None, token=brk.token,
            message=(f"unknown: no text; block {brk.block} (token {brk.token:,}) differs from request "
                     f"{previous[1]}: {what}"),
            fix=self.fix, lost_tokens=lost, shared_with=previous, certain=False, **origin(req),
        )


TRACE_DIVERGENCE = TraceDivergence()
RULES = [TRACE_DIVERGENCE]
