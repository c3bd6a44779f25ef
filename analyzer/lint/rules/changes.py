"""The one classifier of how a request's history departs from the previous request's.

:func:`history_change` names PC401 / PC403 / PC404 / PC405 for a pair of message lists,
comparing messages as :func:`~prefixcache.analyzer.identity.template_identity` values (as
the chat template receives them: not their position, cache markers or logged form).
The lint rules (:mod:`.history`) ask it at the message holding the token divergence;
``canonicalize`` asks it at the first differing message (it has no tokens). Rule
semantics and sources: the rule docstrings in :mod:`.history`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from prefixcache.analyzer.identity import MessageIdentity, template_identity
from prefixcache.analyzer.lint.locate import message_text_path
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


def message_path(msgs: Sequence[Message], j: int) -> str:
    """JSON path of message ``j`` (``messages[j]`` when the reader kept no path)."""
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
                         "were dropped", message_path(current, j))


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
                         + ("" if same else " (the message also changed otherwise)"), message_path(current, j),
                         certain=same)


def image_change(old: Sequence, new: Sequence) -> str | None:
    """How the images of a message changed (content digests, :mod:`~prefixcache.analyzer.ingest.images`),
    or None when the parts that differ are not images."""
    olds = [p for p in old if p.type == "image"]
    news = [p for p in new if p.type == "image"]
    if not olds and not news:
        return None
    if len(olds) != len(news):
        return f"{len(olds)} image(s) became {len(news)}"
    pairs = [(a, b) for a, b in zip(olds, news) if a.digest != b.digest]
    if not pairs:
        return None
    a, b = pairs[0]

    def size(p) -> str:
        return f" {p.width}x{p.height}" if p.width else ""
    return f"an image was replaced: {a.digest}{size(a)} → {b.digest}{size(b)}, a different picture (not a volatile id)"


def _rewritten(previous: Sequence[Message], current: Sequence[Message], old: list[MessageIdentity],
               new: list[MessageIdentity], j: int) -> HistoryChange | None:
    """PC404: removed in the middle, compacted, inserted, or edited / elided."""
    path, seg = message_path(current, j), f"messages[{j}]"
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
        if what == "non-text parts" and (img := image_change(a.parts, b.parts)):
            what = img
        return HistoryChange("PC404", j, f"earlier {role} {seg} changed ({what})", path)
    shorter = len(b.content) < len(a.content)
    marked = any(mark in b.content.lower() for mark in ELISION_MARKERS)
    what = "elided" if shorter and marked else ("shortened" if shorter else "edited")
    return HistoryChange("PC404", j, f"earlier {role} {seg} {what} ({len(a.content):,} → {len(b.content):,} chars)",
                         f"{path}.content" if b.content != a.content else path)
