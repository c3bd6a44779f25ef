"""PC4xx: the conversation so far was changed instead of appended to.

Agents lose the prefix cache when they edit what they already sent: the system
prompt, the order of sections or messages, old turns dropped (sliding window),
old tool results elided or summarized (compaction), reasoning stripped.

PC401, PC403, PC404 and PC405 report what the one classifier,
:func:`~prefixcache.analyzer.lint.rules.changes.history_change`, names at the message
holding the divergence (``canonicalize`` reports the same classification). PC402
(reordering) is a rule of its own: a *specific* cause lint prefers over the fallbacks.
"""

from __future__ import annotations

import re
from collections import Counter

from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, sections
from prefixcache.analyzer.lint.rules.changes import HistoryChange, history_change, message_path


def _reported(rule: Rule, ctx: PairContext) -> Finding | None:
    """The finding of ``rule`` when :func:`history_change`, asked once per pair at the
    message holding the divergence, names its code."""
    if "history" not in ctx._cache:
        ctx._cache["history"] = history_change(ctx.sq.messages, ctx.rq.messages, at=ctx.div.ref, line=ctx.div.line)
    change: HistoryChange | None = ctx._cache["history"]
    if change is None or change.code != rule.code:
        return None
    where = {} if rule.code == "PC401" else {"json_path": change.json_path}  # PC401: the token's own field
    return ctx.finding(rule, change.message, certain=change.certain, **where)


class SystemPromptEdited(Rule):
    """The system prompt text changed between requests of one session.

    What it does:
        When the first difference lies in the system prompt (a system or developer
        message of either request: edited, added or removed) and no more specific
        cause applies (no volatile value, not whitespace only, not a reordering),
        reports the edit with its line and a before/after excerpt.
    Why it breaks caching:
        The system prompt heads the prompt (after the tools on some providers);
        any edit there re-prefills the rest of the system prompt and the entire
        conversation history behind it.
    Example:
        turn 7 appends "Remember: the user prefers short answers." to the system
        prompt after a preference was detected.
    Use instead:
        Keep the system prompt fixed for the session; deliver new instructions as
        a message appended to the conversation.
    Fix safety:
        Needs review: an instruction in a late message can carry less weight than
        in the system prompt.
    """

    code, name, group, severity = "PC401", "system-prompt-edited", "history", "warning"
    parts = frozenset({"system", "message"})
    fallback = True
    order = 90
    fix = "Keep the system prompt fixed per session; append changing instructions as a new message instead."

    def check(self, ctx: PairContext) -> Finding | None:
        return _reported(self, ctx)


class ContentReordered(Rule):
    """The same sections or messages were sent in a different order.

    What it does:
        In the system prompt: the blank-line separated sections (or lines) are the
        same multiset in another order. In the history: the message at the first
        difference still exists in the other request, further along.
    Why it breaks caching:
        A permutation keeps the content but changes the token sequence from the
        first moved section on; everything after it misses. Typical source:
        assembling sections from a hash map or from files listed in filesystem order.
    Example:
        turn 1 system: IDENTITY.md then SOUL.md; turn 2: SOUL.md then IDENTITY.md.
    Use instead:
        Assemble sections and messages in a fixed, explicit order (sorted keys, a
        list, not a set or map).
    Fix safety:
        Safe when the order carries no meaning; otherwise pick one order and keep it.
    """

    code, name, group, severity = "PC402", "content-reordered", "history", "error"
    parts = frozenset({"system", "message"})
    order = 42
    fix = "Assemble prompt sections and messages in one fixed, explicit order."

    def check(self, ctx: PairContext) -> Finding | None:
        new, old = ctx.r_msg(), ctx.s_msg()
        if new is None or old is None:
            return None
        if ctx.div.kind == "system" and new.role == old.role:
            what = reordered(new.content, old.content)
            return ctx.finding(self, f"{ctx.div.segment} has {what}") if what else None
        kr, ks, j = ctx.r_keys, ctx.s_keys, ctx.div.ref
        if kr[j] == ks[j] or kr[j] not in ks[j + 1 :] or ks[j] not in kr[j + 1 :]:
            return None
        return ctx.finding(self, f"messages from {ctx.div.segment} on were re-ordered",
                           json_path=message_path(ctx.rq.messages, j))


#: A list number heading a line or section (``1.``, ``2)``, ``Rule 3:``, ``- 4.``), ignored when
#: sections are compared as sets: a rotation renumbers them.
_NUMBERING = re.compile(r"(?im)^([ \t]*(?:[-*][ \t]*)?(?:#+[ \t]*)?)(?:(?:rule|step|section)[ \t]*)?\d+[.):][ \t]*")


def _unnumbered(items: list[str]) -> list[str]:
    return [_NUMBERING.sub(r"\1", x) for x in items]


def reordered(new: str, old: str) -> str | None:
    """What was reordered between two texts, or None when they are not a permutation.

    Sections (blank-line separated) are compared as multisets first, then lines; each
    level is tried as written and with list numbers removed (rotated sections that were
    renumbered: ``1. A / 2. B`` → ``1. B / 2. A``). Reorders are classified before edits
    (PC402 is a specific rule, PC401 a fallback)."""
    for unit, split in (("sections", sections), ("lines", lambda t: [ln for ln in t.splitlines() if ln.strip()])):
        a, b = split(new), split(old)
        if len(a) < 2 or a == b:
            continue
        if Counter(a) == Counter(b):
            return f"the same {len(a)} {unit} in a different order"
        ua, ub = _unnumbered(a), _unnumbered(b)
        if ua != ub and Counter(ua) == Counter(ub):
            return f"the same {len(a)} {unit} in a different order (renumbered)"
    return None


class HistoryTruncated(Rule):
    """The oldest turns were dropped from the front of the history (sliding window).

    What it does:
        When the first difference is at the first non-system message and the
        request's history continues the previous request's history from a later
        message, reports how many messages were dropped.
    Why it breaks caching:
        Dropping the oldest turn shifts every later turn to a new position right
        after the system prompt, so the whole history is re-prefilled on every
        turn once the window is full: the cache holds only the system prompt.
    Example:
        turn N: [system, m1, m2, ..., m40]; turn N+1: [system, m2, ..., m41]
    Use instead:
        Let the history grow and truncate rarely and in large steps (drop half the
        window at once), or summarize once at a chosen breakpoint and keep that
        summary fixed.
    Fix safety:
        Needs review: a larger window costs context length; coarse truncation
        trades a few rare full misses for hits on every other turn.
    """

    code, name, group, severity = "PC403", "history-truncated", "history", "warning"
    parts = frozenset({"message"})
    order = 41
    fix = "Truncate rarely and in large steps (or summarize once and keep it) instead of sliding the window every turn."

    def check(self, ctx: PairContext) -> Finding | None:
        return _reported(self, ctx)


class HistoryRewritten(Rule):
    """An earlier message or tool result was edited, elided or summarized.

    What it does:
        When the first difference lies inside the conversation and no more
        specific cause applies, classifies it: messages removed in the middle,
        a tool result or message replaced by a shorter placeholder (elision,
        e.g. "Old environment output: (7 lines omitted)"), several turns replaced
        by a summary (compaction), or an edit.
    Why it breaks caching:
        The cached KV of the old message and of everything after it no longer
        matches; the rest of the history is re-prefilled. History processors that
        elide a little more on every turn break the cache on every turn.
    Example:
        turn 5 sends messages[3] = 8 KB of test output; turn 6 sends
        messages[3] = "Old environment output: (98 lines omitted)".
    Use instead:
        Keep sent messages immutable; elide or compact rarely, in big steps at a
        fixed point, or truncate tool output before it is first sent.
    Fix safety:
        Needs review: keeping old outputs costs context; eliding at first send
        loses detail the model might have used.
    """

    code, name, group, severity = "PC404", "history-rewritten", "history", "warning"
    parts = frozenset({"message"})
    fallback = True
    order = 91
    fix = "Treat sent messages as immutable; elide or compact rarely and at a fixed point, or trim tool output before first sending it."

    def check(self, ctx: PairContext) -> Finding | None:
        return _reported(self, ctx)


class ReasoningDropped(Rule):
    """Reasoning (thinking) of an earlier assistant turn was dropped from the history.

    What it does:
        When the first difference lies in an earlier assistant message that carried
        reasoning in the previous request and carries none now (otherwise equal),
        reports it.
    Why it breaks caching:
        The KV of the reasoning tokens was computed when the turn was generated and
        cached with the prompt that followed. Resending the turn without them makes
        the assistant message a different token sequence: that turn and everything
        after it miss.
    Example:
        turn 4 resends assistant messages[2] with reasoning_content; turn 5 resends
        it without (the client strips reasoning from all but the latest turn).
    Use instead:
        Decide once: either always resend reasoning for every turn (when the API
        accepts it) or never. Anthropic requires thinking blocks of the current
        tool-use loop to be resent unchanged.
    Fix safety:
        Needs review: resending reasoning costs context tokens; the API may reject
        or ignore it.
    """

    code, name, group, severity = "PC405", "reasoning-dropped", "history", "warning"
    parts = frozenset({"message"})
    order = 40
    fix = "Resend reasoning of earlier turns consistently (always or never), exactly as received."

    def check(self, ctx: PairContext) -> Finding | None:
        return _reported(self, ctx)


#: A line that opens a few-shot exemplar: "Q:", "A:", "Example 2:", "Input:", "Output:", "User:", "Assistant:".
_EXEMPLAR = re.compile(r"(?im)^[ \t]*(?:example[ \t]*\d*|q|a|input|output|user|assistant)[ \t]*[:.)]")
#: Fewer exemplar markers than this is prose, not a few-shot block.
MIN_EXEMPLARS = 3


def rotated_exemplars(new: str, old: str) -> tuple[int, int] | None:
    """(exemplar markers now, exemplar lines replaced) when both texts hold a few-shot block
    (:data:`MIN_EXEMPLARS` markers or more, as many in both) and only its exemplar lines
    differ: the text around the block is the same. None otherwise."""
    a, b = _EXEMPLAR.findall(new), _EXEMPLAR.findall(old)
    if min(len(a), len(b)) < MIN_EXEMPLARS or len(a) != len(b):
        return None
    la, lb = new.splitlines(), old.splitlines()
    if len(la) != len(lb):
        return None
    changed = [(x, y) for x, y in zip(la, lb) if x != y]
    if not changed or not all(_EXEMPLAR.match(x) and _EXEMPLAR.match(y) for x, y in changed):
        return None
    return len(a), len(changed)


class FewShotRotated(Rule):
    """The few-shot examples of the system prompt were rotated or resampled.

    What it does:
        When the first difference lies in the system prompt, both requests hold a
        few-shot block (three or more lines opening with ``Q:`` / ``A:`` /
        ``Example N:`` / ``Input:`` / ``Output:``) and only those exemplar lines
        differ, reports that the examples changed.
    Why it breaks caching:
        Exemplars are long and sit above the real input; sampling or shuffling them
        per request gives every request another prefix from the first example on.
    Example:
        request 1: "Q: one / A: 1 / Q: two / A: 2"; request 2: "Q: four / A: 4 / Q: five / A: 5".
    Use instead:
        Pin one exemplar set and its order; if examples must vary, put them after
        the stable part (in the newest user message).
    Fix safety:
        Needs review: which examples the model sees can change its answers; there is
        no automatic fix.
    """

    code, name, group, severity = "PC406", "few-shot-rotated", "history", "warning"
    parts = frozenset({"system"})
    order = 43
    fix = "Pin the few-shot examples and their order; move examples that must vary after the stable prefix."

    def check(self, ctx: PairContext) -> Finding | None:
        new, old = ctx.r_msg(), ctx.s_msg()
        if new is None or old is None or new.role != old.role:
            return None
        found = rotated_exemplars(new.content, old.content)
        if found is None:
            return None
        return ctx.finding(self, f"{ctx.div.segment}: the few-shot examples changed ({found[1]} of {found[0]} "
                           "exemplar lines replaced)")


RULES = [SystemPromptEdited(), ContentReordered(), FewShotRotated(), HistoryTruncated(), HistoryRewritten(), ReasoningDropped()]
