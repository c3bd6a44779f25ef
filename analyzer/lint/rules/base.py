"""Rule base class, the Finding record, and the context a pair rule inspects.

A rule has a permanent ``code`` (``PCnnn``, never reused), a ``name`` (the cause
string used in JSON output and in ``tests/fixtures/cases/expected.json``), a default
``severity`` and a docstring in five fixed sections: *What it does*, *Why it
breaks caching*, *Example*, *Use instead*, *Fix safety*.

Pair rules (``scope = "pair"``) explain the first divergence between a request
and the earlier request it shares the longest token prefix with; request rules
(``scope = "request"``) look at one request alone.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Iterable

from prefixcache.analyzer.identity import MessageIdentity, template_identity
from prefixcache.analyzer.model import Message, Request
from prefixcache.analyzer.lint.locate import Divergence
from prefixcache.analyzer.volatile import VolatileSpan, find_volatile

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare import Prepared

#: Severities, lowest first.
SEVERITIES = ("info", "warning", "error")
#: The loss cause of a prefix that expired during an idle gap longer than the TTL (not a rule
#: code: it raises no finding), keyed beside the rule codes in lint's ``lost_tokens_by_code``;
#: the severity table (:func:`~prefixcache.analyzer.lint.rules.docs.severity_rows`) lists it.
TTL = "ttl"
#: How reports name the :data:`TTL` cause.
TTL_NAME = "idle gap past the TTL"
#: Docstring sections every rule documents, in order.
SECTIONS = ("What it does", "Why it breaks caching", "Example", "Use instead", "Fix safety")


def severity_rank(severity: str) -> int:
    """0 for info, 1 warning, 2 error; ValueError for anything else."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(f"unknown severity {severity!r} (expected one of {', '.join(SEVERITIES)})") from None


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnosed cause of lost prefix reuse (or a risk of it).

    ``session``/``request`` identify the request (``request`` = index inside the
    session); ``segment`` the part (``system``, ``tools[2]``, ``messages[5]``);
    ``json_path`` the field in the logged record; ``char`` the offset in the rendered
    prompt text and ``token`` the token index of the divergence (None for request
    rules that have none); ``line`` the 1-based line inside the part.
    ``lost_tokens`` are the prompt tokens attributed to this finding (tokens; 0 for
    all but the primary finding of a request). ``shared_with`` is the earlier
    request (session, index) compared against; ``related`` the code of an
    underlying cause (PC602 caused by a PC102 uuid). ``certain`` is False where
    the classification is a best guess. ``source``/``record`` name the log file
    and the record number inside it; ``file_line`` is the 1-based line of the
    file where the record starts (:attr:`Provenance.line`; None for items inside
    one JSON document) and ``pointer`` the item's place in the file
    (``trajectory[5]``; "" for a whole record).
    """

    code: str
    name: str
    severity: str
    session: str
    request: int
    segment: str
    json_path: str
    char: int | None
    token: int | None
    message: str
    fix: str
    line: int | None = None
    before: str = ""
    after: str = ""
    other_after: str = ""
    lost_tokens: int = 0
    shared_with: tuple[str, int] | None = None
    related: str | None = None
    certain: bool = True
    source: str = ""
    record: int = 0
    file_line: int | None = None
    pointer: str = ""


def origin(request: Request) -> dict:
    """The :class:`Finding` keywords locating ``request`` in its log file."""
    p = request.provenance
    return {"source": p.source, "record": p.record, "file_line": p.line, "pointer": p.pointer}


def _line_window(text: str, char: int, limit: int = 4000) -> tuple[int, str]:
    start = max(text.rfind("\n", 0, char) + 1, char - limit)
    end = text.find("\n", char)
    end = len(text) if end < 0 else min(end, char + limit)
    return start, text[start:end]


@dataclass
class PairContext:
    """What a pair rule sees: this request ``r``, the earlier ``s`` it shares the
    longest prefix with, the :class:`Divergence`, and derived comparisons."""

    r: "Prepared"
    s: "Prepared"
    div: Divergence
    redact: bool = False
    _cache: dict = field(default_factory=dict)

    @property
    def rq(self) -> Request:
        return self.r.request

    @property
    def sq(self) -> Request:
        return self.s.request

    @property
    def cross_session(self) -> bool:
        return self.rq.session != self.sq.session

    @property
    def r_text(self) -> str:
        return self.r.rendered.text if self.r.rendered is not None else ""

    @property
    def s_text(self) -> str:
        return self.s.rendered.text if self.s.rendered is not None else ""

    def r_msg(self) -> Message | None:
        """This request's message at the divergence (system or message part)."""
        ref = self.div.ref
        return self.rq.messages[ref] if self.div.kind in ("system", "message") and 0 <= ref < len(self.rq.messages) else None

    def s_msg(self) -> Message | None:
        """The earlier request's message at the same index as :meth:`r_msg`."""
        ref = self.div.ref
        return self.sq.messages[ref] if 0 <= ref < len(self.sq.messages) else None

    @cached_property
    def r_keys(self) -> list[MessageIdentity]:
        """This request's messages as :func:`~prefixcache.analyzer.identity.template_identity` values."""
        return [template_identity(m) for m in self.rq.messages]

    @cached_property
    def s_keys(self) -> list[MessageIdentity]:
        """The earlier request's messages as :func:`~prefixcache.analyzer.identity.template_identity` values."""
        return [template_identity(m) for m in self.sq.messages]

    @cached_property
    def volatile(self) -> tuple[VolatileSpan, VolatileSpan] | None:
        """The volatile value (this request's span, the earlier one's) holding the
        first differing character, when both texts have one starting there."""
        c = self.div.char
        if c is None:
            return None
        r0, rwin = _line_window(self.r_text, c)
        s0, swin = _line_window(self.s_text, c)
        s_spans = {sp.start + s0: sp for sp in find_volatile(swin)}
        for sp in find_volatile(rwin):
            if sp.start + r0 <= c < sp.end + r0 or (sp.start + r0 == c):
                other = s_spans.get(sp.start + r0)
                if other is not None:
                    return sp, other
        return None

    def finding(self, rule: "Rule", message: str, **kw) -> Finding:
        """A finding for this pair at the divergence, overridable by keyword."""
        d, rq = self.div, self.rq
        base = dict(
            code=rule.code, name=rule.name, severity=rule.severity, session=rq.session, request=rq.index,
            segment=d.segment, json_path=d.json_path, char=d.char, token=d.token, message=message,
            fix=rule.fix, line=d.line, before=d.before, after=d.after, other_after=d.other_after,
            shared_with=(self.sq.session, self.sq.index), **origin(rq),
        )
        base.update(kw)
        return Finding(**base)


def whitespace_only(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` differ, but only in whitespace."""
    return a != b and "".join(a.split()) == "".join(b.split())


_SECTION_SPLIT = re.compile(r"\n\s*\n")


def sections(text: str) -> list[str]:
    """Blank-line separated sections (paragraphs) of a text, stripped."""
    return [p.strip() for p in _SECTION_SPLIT.split(text) if p.strip()]


class Rule:
    """Base class of every rule; subclasses set the class attributes and implement
    :meth:`check` (pair rules) or :meth:`check_request` (request rules).

    ``parts`` lists the divergence part kinds a pair rule explains (``system``,
    ``tool``, ``message``, ``generation_prompt``, ``opaque``); ``fallback`` rules
    apply only when no specific rule matched; ``order`` sorts rules within a part;
    ``cross_session`` rules judge pairs from different sessions (all others only
    pairs within one session).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    group: ClassVar[str]
    severity: ClassVar[str] = "warning"
    scope: ClassVar[str] = "pair"
    parts: ClassVar[frozenset[str]] = frozenset()
    fallback: ClassVar[bool] = False
    cross_session: ClassVar[bool] = False
    order: ClassVar[int] = 50
    fix: ClassVar[str] = ""
    #: When a finding's severity differs from ``severity`` (tokens actually lost, whether the
    #: user can act); "" when it never does. Generated into the severity table of the rule docs.
    severity_when: ClassVar[str] = ""

    def check(self, ctx: PairContext) -> Finding | None:
        """Explain the pair's divergence, or None when this rule does not apply."""
        return None

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        """Findings on one request alone; ``state`` persists per run (for dedupe)."""
        return ()

    @classmethod
    def doc(cls) -> dict[str, str]:
        """The docstring as ``{"summary": first paragraph, section: text}`` for the five
        :data:`SECTIONS` (a missing section is "", which the rule tests forbid)."""
        lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
        out: dict[str, list[str]] = {"summary": []}
        current = "summary"
        for ln in lines:
            if ln.endswith(":") and ln[:-1] in SECTIONS:
                current = ln[:-1]
                out[current] = []
            else:
                out[current].append(ln)
        doc = {k: textwrap.dedent("\n".join(v)).strip() for k, v in out.items()}
        return {"summary": doc["summary"], **{sec: doc.get(sec, "") for sec in SECTIONS}}
