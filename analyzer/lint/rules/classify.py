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
    severity_when = "info when only the hidden prefix's size differs, as estimated from the usage (estimation noise)"
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

#: At most this many tokens at the end of the earlier prompt may be template markup its answer
#: replaced (DeepSeek's thinking mode opens ``<think>`` after the last user turn and renders the
#: answered turn with ``</think>``: 1 token).
ANSWERED_TAIL_TOKENS = 8


def answered_tail(ctx: PairContext) -> bool:
    """True when the divergence only replaces the markup that ended the earlier prompt after its
    last (user or tool) message, which this request answers: the history is kept (the earlier
    messages are a prefix of this request's, as the template receives them), the earlier
    prompt's text after the divergence holds no content of its last message and is at most
    :data:`ANSWERED_TAIL_TOKENS` tokens, and the earlier text is not a prefix of this one (that
    is PC502's tokenizer seam). Such a tail plays the part of a generation prompt: what it
    loses is the turn being answered, not cached work (docs/methods/reusable-prefix.md)."""
    d, s = ctx.div, ctx.sq
    if ctx.cross_session or d.char is None or ctx.s.tokens is None or d.other_kind != "message":
        return False
    if not s.messages or d.other_ref != len(s.messages) - 1 or s.messages[-1].role not in ("user", "tool"):
        return False
    if len(ctx.rq.messages) <= len(s.messages) or ctx.r_keys[: len(s.messages)] != ctx.s_keys:
        return False
    rest = ctx.s_text[d.char:]
    tail = s.messages[-1].content.rstrip()[-12:]
    return (len(ctx.s.tokens.ids) - d.token <= ANSWERED_TAIL_TOKENS and not ctx.r_text.startswith(ctx.s_text)
            and (not tail or tail not in rest))


def classify(ctx: PairContext, rules: Sequence[Rule]) -> list[Finding]:
    """Findings explaining the pair's divergence, primary cause first.

    Across sessions only rules marked ``cross_session`` (PC602) apply: two
    conversations naturally differ once their own messages start.
    Returns ``[]`` for divergences that lose nothing worth reporting: the other
    request diverged inside its own generation prompt, or in the markup that ended it
    after its last turn (:func:`answered_tail`: the turn was simply answered), or this
    request ends where the other goes on.
    """
    kind, other = ctx.div.kind, ctx.div.other_kind
    if answered_tail(ctx):
        return []
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
