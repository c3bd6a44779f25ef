"""PC4xx: the conversation so far was changed instead of appended to.

Agents lose the prefix cache when they edit what they already sent: the system
prompt, the order of sections or messages, old turns dropped (sliding window),
old tool results elided or summarized (compaction), reasoning stripped.

:func:`history_change` is the one classifier of PC401 / PC403 / PC404 / PC405: it
compares two message lists structurally (messages as
:func:`~prefixcache.analyzer.identity.template_identity` values: as the chat
template receives them, without their position or cache markers) from the first
message that differs. The lint rules below ask it at the message where the token
divergence lies; ``canonicalize`` asks it at the first differing message (it has no
tokens). PC402 (reordering) stays a rule of its own: a *specific* cause lint prefers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from prefixcache.analyzer.identity import MessageIdentity, template_identity
from prefixcache.analyzer.lint.locate import message_text_path
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, sections
from prefixcache.analyzer.model import Message
from prefixcache.analyzer.sequence import common_prefix_len

ELISION_MARKERS = ("omitted", "elided", "truncated", "removed", "snipped", "[...]", "…", "summar")
_SYSTEM = ("system", "developer")
#: What else than the text can differ in one message, as a history report names it.
_FIELDS = (("tool calls", "tool_calls"), ("text blocks", "text_parts"), ("reasoning", "reasoning"),
           ("reasoning", "reasoning_opaque"), ("non-text parts", "parts"), ("tool call id", "tool_call_id"),
           ("name", "name"))


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """How a request's messages depart from the previous request's, at message ``index``
    (0-based, of the current request): the rule ``code`` (PC401 system prompt edited,
    PC403 oldest turns dropped, PC404 history rewritten, PC405 reasoning dropped), what
    happened (``message``), the ``json_path`` of the part concerned in the logged record,
    and whether the classification is ``certain``."""

    code: str
    index: int
    message: str
    json_path: str
    certain: bool = True


def removed_block(new: Sequence, old: Sequence, j: int) -> int:
    """d ≥ 1 when ``new[j:]`` continues ``old[j+d:]`` (d old messages dropped at j), else 0."""
    for d in range(1, len(old) - j):
        span = min(len(new) - j, len(old) - j - d)
        if span >= 1 and new[j : j + span] == old[j + d : j + d + span]:
            return d
    return 0


def _leading_system(msgs: Sequence[Message]) -> int:
    """Number of leading system/developer messages (the system prompt)."""
    return next((i for i, m in enumerate(msgs) if m.role not in _SYSTEM), len(msgs))


def _msg_path(msgs: Sequence[Message], j: int) -> str:
    m = msgs[j] if j < len(msgs) else None
    return m.path if m is not None and m.path else f"messages[{j}]"


def history_change(previous: Sequence[Message], current: Sequence[Message], at: int | None = None,
                   line: int | None = None) -> HistoryChange | None:
    """The one classification of how ``current`` (a request's messages) departs from
    ``previous`` (the previous request's of its session), or None when it does not.

    ``at`` is the index of the message where the caller saw the first difference (lint:
    the message holding the first differing token); by default the first message whose
    template identity differs. ``line`` is the 1-based line of the first difference in
    that message's text when the caller knows it (lint: from the rendered text, where an
    appended line starts); by default the line of the first differing character. None when ``current`` extends ``previous`` (append-only)
    or is a prefix of it (nothing already computed is lost), or when the messages at
    ``at`` are equal. Decision order (first that holds):

    * **PC401** the message at ``at`` is a system/developer message in either request:
      the system prompt was edited, or a system message was added or removed (certain
      when both requests have a message there);
    * **PC403** ``at`` is the first message after the system prompt in both and the
      history continues the previous one from a later message (oldest turns dropped);
    * **PC405** both messages are assistant turns and the earlier one's reasoning is
      gone (certain when the message is otherwise equal);
    * **PC404** otherwise: messages removed in the middle, a compaction (several
      messages replaced by one), a message inserted, or an edit / elision.
    """
    old = [template_identity(m) for m in previous]
    new = [template_identity(m) for m in current]
    j = at if at is not None else next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), None)
    if j is None or not 0 <= j < len(new):
        return None
    if current[j].role in _SYSTEM or (j < len(old) and previous[j].role in _SYSTEM):
        return _system_edited(previous, current, old, new, j, line)
    if j >= len(old):
        return None
    return (_truncated(previous, current, old, new, j) or _reasoning_dropped(previous, current, old, new, j)
            or _rewritten(previous, current, old, new, j))


def _system_edited(previous: Sequence[Message], current: Sequence[Message], old: list[MessageIdentity],
                   new: list[MessageIdentity], j: int, line: int | None) -> HistoryChange | None:
    """PC401 at a system message of either request (edited, added or removed)."""
    m = current[j]
    if j < len(old) and old[j] == new[j]:
        return None
    if j >= len(previous) or previous[j].role not in _SYSTEM:
        what = f": a {m.role} message was added at messages[{j}]" if j < len(previous) else ""
    elif m.role not in _SYSTEM:
        what = f": the {previous[j].role} message at messages[{j}] was removed"
    else:
        a, b = previous[j].content, m.content
        if line is None and a != b:
            line = b.count("\n", 0, common_prefix_len(a, b)) + 1
        what = f" at line {line}" if line else ""
    return HistoryChange("PC401", j, f"system prompt edited{what}", message_text_path(m, j), certain=j < len(old))


def _truncated(previous: Sequence[Message], current: Sequence[Message], old: list[MessageIdentity],
               new: list[MessageIdentity], j: int) -> HistoryChange | None:
    """PC403: the oldest turns after the system prompt were dropped (sliding window)."""
    if j != _leading_system(current) or j != _leading_system(previous):
        return None
    d = removed_block(new, old, j)
    if d == 0:
        return None
    return HistoryChange("PC403", j, f"history truncated: the {d} oldest message(s) after the system prompt "
                         "were dropped", _msg_path(current, j))


def _reasoning_dropped(previous: Sequence[Message], current: Sequence[Message], old: list[MessageIdentity],
                       new: list[MessageIdentity], j: int) -> HistoryChange | None:
    """PC405: an earlier assistant turn is resent without its reasoning."""
    a, b = previous[j], current[j]
    if a.role != "assistant" or b.role != "assistant":
        return None
    if not (a.reasoning or a.reasoning_opaque) or (b.reasoning or b.reasoning_opaque):
        return None
    same = dataclasses.replace(old[j], reasoning=None, reasoning_opaque=False) == new[j]
    return HistoryChange("PC405", j, f"reasoning of earlier assistant turn messages[{j}] was dropped"
                         + ("" if same else " (the message also changed otherwise)"), _msg_path(current, j),
                         certain=same)


def _rewritten(previous: Sequence[Message], current: Sequence[Message], old: list[MessageIdentity],
               new: list[MessageIdentity], j: int) -> HistoryChange | None:
    """PC404: removed in the middle, compacted, inserted, or edited / elided."""
    path, seg = _msg_path(current, j), f"messages[{j}]"
    d = removed_block(new, old, j)
    if d:
        return HistoryChange("PC404", j, f"{d} earlier message(s) removed at {seg}", path)
    if j + 1 < len(new) and (d2 := removed_block(new[j + 1 :], old[j:], 0)) >= 2:
        return HistoryChange("PC404", j, f"compaction: {d2} earlier messages replaced by one new message at {seg}",
                             path)
    a, b = previous[j], current[j]
    if a.role != b.role:
        return HistoryChange("PC404", j, f"a {b.role} message was inserted before an earlier {a.role} message at "
                             f"{seg}", path, certain=False)
    if old[j] == new[j]:
        return None
    role = "tool result" if b.role == "tool" else f"{b.role} message"
    if a.content == b.content:
        what = next(label for label, field in _FIELDS if getattr(old[j], field) != getattr(new[j], field))
        return HistoryChange("PC404", j, f"earlier {role} {seg} changed ({what})", path)
    shorter = len(b.content) < len(a.content)
    marked = any(mark in b.content.lower() for mark in ELISION_MARKERS)
    what = "elided" if shorter and marked else ("shortened" if shorter else "edited")
    return HistoryChange("PC404", j, f"earlier {role} {seg} {what} ({len(a.content):,} → {len(b.content):,} chars)",
                         f"{path}.content" if b.content != a.content else path)


def _reported(rule: Rule, ctx: PairContext) -> Finding | None:
    """The finding of ``rule`` when :func:`history_change`, asked once per pair at the
    message holding the divergence, names its code."""
    if "history" not in ctx._cache:
        ctx._cache["history"] = history_change(ctx.sq.messages, ctx.rq.messages, at=ctx.div.ref, line=ctx.div.line)
    change = ctx._cache["history"]
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
            a, b = sections(new.content), sections(old.content)
            if len(a) < 2:
                a, b = new.content.splitlines(), old.content.splitlines()
            if a != b and Counter(a) == Counter(b):
                return ctx.finding(self, f"{ctx.div.segment} has the same {len(a)} sections in a different order")
            return None
        kr, ks, j = ctx.r_keys, ctx.s_keys, ctx.div.ref
        if kr[j] == ks[j] or kr[j] not in ks[j + 1 :] or ks[j] not in kr[j + 1 :]:
            return None
        return ctx.finding(self, f"messages from {ctx.div.segment} on were re-ordered",
                           json_path=_msg_path(ctx.rq.messages, j))


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


RULES = [SystemPromptEdited(), ContentReordered(), HistoryTruncated(), HistoryRewritten(), ReasoningDropped()]
