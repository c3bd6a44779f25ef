"""PC001 and the dispatcher that explains a divergence with the pair rules.

Order of judgment, for the part (system, tool, message, ...) holding the first
differing character: every *specific* rule registered for that part is asked and
all that match are reported (several causes may hold at once); *fallback* rules
(system prompt edited, history rewritten) only when none matched; PC001 when
nothing explains the divergence — the cause is then stated as not certain.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule


class UnclassifiedDivergence(Rule):
    """The prompt diverged from the earlier one, and no rule can say why for sure.

    What it does:
        Reports a divergence that no specific rule explains, with its location and
        a before/after excerpt, and says plainly that the cause is not certain.
        Typical: the hidden part of a prompt changed (Claude Code's system prompt
        is not in its logs), or an edit mixes several kinds of change.
    Why it breaks caching:
        Whatever the cause, every token after the first difference is re-prefilled.
    Example:
        two requests of one session whose hidden system prompt differs in length.
    Use instead:
        Inspect the excerpt; make the prompt append-only from the reported point on.
    Fix safety:
        Unknown until the cause is known.
    """

    code, name, group, severity = "PC001", "unclassified-divergence", "-", "warning"
    parts = frozenset()
    fix = "Inspect the excerpt at the reported location and make the prompt append-only from there."

    def check(self, ctx: PairContext) -> Finding | None:
        d = ctx.div
        if d.kind == "opaque" or d.other_kind == "opaque":
            a = ctx.r.tokens.opaque_prefix_tokens if ctx.r.tokens is not None else 0
            b = ctx.s.tokens.opaque_prefix_tokens if ctx.s.tokens is not None else 0
            if a != b and d.token == min(a, b):
                # Inferred from reported usage minus our count of the visible part: an
                # approximate tokenizer makes the estimate wobble between requests.
                msg = (f"the hidden prefix (not in the log) is {a:,} tokens here and {b:,} in the earlier request "
                       "(inferred from usage; may be estimation noise); cause not certain")
                return ctx.finding(self, msg, certain=False, severity="info")
            msg = "the hidden prefix (not in the log) differs from the earlier request's; cause not certain"
        else:
            msg = f"prompt diverges in {d.segment}; cause not certain"
        return ctx.finding(self, msg, certain=False)


UNCLASSIFIED = UnclassifiedDivergence()


def classify(ctx: PairContext, rules: Sequence[Rule]) -> list[Finding]:
    """Findings explaining the pair's divergence, primary cause first.

    Across sessions only rules marked ``cross_session`` (PC602) apply: two
    conversations naturally differ once their own messages start.
    Returns ``[]`` for divergences that lose nothing worth reporting: the other
    request diverged inside its own generation prompt (the turn was simply
    answered), or this request ends where the other goes on.
    """
    kind, other = ctx.div.kind, ctx.div.other_kind
    pair_rules = sorted((r for r in rules if r.scope == "pair" and kind in r.parts
                         and r.cross_session == ctx.cross_session), key=lambda r: r.order)
    found = [f for f in _run(ctx, (r for r in pair_rules if not r.fallback))]
    if found:
        return found
    if ctx.cross_session or kind in ("generation_prompt", "end") or other in ("generation_prompt", "end"):
        return []
    found = [f for f in _run(ctx, (r for r in pair_rules if r.fallback))][:1]
    return found or [UNCLASSIFIED.check(ctx)]


def _run(ctx: PairContext, rules: Iterable[Rule]) -> Iterable[Finding]:
    for rule in rules:
        finding = rule.check(ctx)
        if finding is not None:
            yield finding
