"""PC1xx: volatile values (clock readings, generated ids) inside the prefix.

Detection is :func:`prefixcache.analyzer.volatile.find_volatile`; these rules decide
whether such a value is *the* cause of a divergence (pair rules PC101/PC102) or a
risk in a single request's system prompt or tools (PC103).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from prefixcache.analyzer.lint.locate import excerpt
from prefixcache.analyzer.volatile import ID_KINDS, TIME_KINDS, VolatileSpan, find_volatile
from prefixcache.analyzer.lint.rules.base import Finding, PairContext, Rule, origin

if TYPE_CHECKING:
    from prefixcache.analyzer.prepare import Prepared


def granularity_severity(granularity_s: float | None) -> str:
    """Severity of a clock value by how often it changes: ≤ 1 s (per request) is an
    error, ≤ 1 h a warning (a new prefix every minute or hour), a date is info
    (one miss per day)."""
    if granularity_s is None or granularity_s <= 1.0:
        return "error"
    return "warning" if granularity_s <= 3600.0 else "info"


def describe_granularity(granularity_s: float | None) -> str:
    """``every millisecond`` / ``every second`` / ``every minute`` / ``every day``."""
    if granularity_s is None:
        return "on every request"
    for limit, word in ((0.0011, "millisecond"), (1.0, "second"), (60.0, "minute"), (3600.0, "hour")):
        if granularity_s <= limit:
            return f"every {word}"
    return "every day"


class VolatileTimestamp(Rule):
    """A clock reading (timestamp, date or time) in the prefix changed between requests.

    What it does:
        At the first token where a request differs from the earlier request it
        shares most with, looks for a timestamp, date, clock time or epoch value
        covering that point in both prompts. Severity follows the value's
        granularity: milliseconds or seconds are errors (every request misses),
        minutes and hours warnings, a date is info (one miss a day).
    Why it breaks caching:
        Prefix caches (vLLM, SGLang, provider prompt caches) reuse KV only up to the
        first differing token. A clock rendered into the system prompt makes every
        token after it — the rest of the system prompt, the tools and the whole
        history — a miss, re-prefilled and billed at the uncached rate.
    Example:
        system: "Current time: 2026-03-02 10:31:02 UTC\\nYou are a coding agent..."
        next turn: "Current time: 2026-03-02 10:31:40 UTC\\nYou are a coding agent..."
    Use instead:
        Leave the clock out of the prompt, or put it at the end of the latest user
        message; if the model needs the date, render the date only, once per session.
    Fix safety:
        Safe for caching; the model sees a coarser or later-placed time, which can
        change answers that depend on the exact time.
    """

    code, name, group, severity = "PC101", "volatile-timestamp", "volatile", "error"
    severity_when = 'by how often the value changes: error ≤ 1 s (every request misses), warning ≤ 1 h, info for a date (one miss a day)'
    parts = frozenset({"system", "tool", "message"})
    order = 10
    fix = "Remove the clock value from the prefix, or move it to the end of the newest message; render a date, not a time."

    def check(self, ctx: PairContext) -> Finding | None:
        hit = ctx.volatile
        if ctx.cross_session or hit is None or hit[0].kind not in TIME_KINDS:
            return None
        new, old = hit
        where = f"{ctx.div.segment}, line {ctx.div.line}" if ctx.div.line else ctx.div.segment
        msg = (f"{new.kind} {excerpt(new.text, ctx.redact)!r} (was {excerpt(old.text, ctx.redact)!r}) in {where} "
               f"changes {describe_granularity(new.granularity_s)}; everything after it is re-prefilled")
        return ctx.finding(self, msg, severity=granularity_severity(new.granularity_s))


class VolatileId(Rule):
    """A generated identifier (uuid, nonce, request id, random hex) in the prefix changed.

    What it does:
        At the first differing token between a request and the earlier request it
        shares most with, looks for a uuid, nonce (``cch=…``), request/session id,
        JWT or random hex string covering that point in both prompts.
    Why it breaks caching:
        A value that is new on every request makes the prompt unique from that
        token on: no prefix cache can serve anything after it.
    Example:
        system[0]: "x-anthropic-billing-header: cc_version=1.0; cch=36ee5;"
        next request: "...; cch=0aaa9;"
    Use instead:
        Send ids as request metadata or headers, not prompt text; if the model must
        see one, keep it stable for the whole session and place it after the
        stable prefix.
    Fix safety:
        Safe when the model does not need the id; check that nothing parses it out
        of the prompt.
    """

    code, name, group, severity = "PC102", "volatile-id", "volatile", "error"
    parts = frozenset({"system", "tool", "message"})
    order = 11
    fix = "Move the id out of the prompt (headers/metadata), or keep it constant per session after the stable prefix."

    def check(self, ctx: PairContext) -> Finding | None:
        hit = ctx.volatile
        if ctx.cross_session or hit is None or hit[0].kind not in ID_KINDS:
            return None
        new, old = hit
        where = f"{ctx.div.segment}, line {ctx.div.line}" if ctx.div.line else ctx.div.segment
        msg = (f"{new.kind} {excerpt(new.text, ctx.redact)!r} (was {excerpt(old.text, ctx.redact)!r}) in {where} "
               "differs per request; everything after it is re-prefilled")
        return ctx.finding(self, msg)


class VolatileValueEarly(Rule):
    """A timestamp- or id-like value sits in the system prompt or tool definitions.

    What it does:
        Looks at one request alone: scans the system prompt and the tool
        descriptions for timestamps, dates, uuids, nonces and random hex, and
        reports the first per session and field. It needs no second request, so it
        works as a pre-flight check on a single logged call.
    Why it breaks caching:
        The system prompt and tools head every prompt. A value there that changes
        per request, per session or per day invalidates the whole cached prefix
        each time it changes. Whether it changes cannot be known from one request:
        this is a risk, not a measured break (PC101/PC102/PC602 report measured ones).
    Example:
        system: "Session: 7d3f5c8e-1b2a-4c6d-9e0f-a1b2c3d4e5f6\\nYou are a coding agent..."
    Use instead:
        Keep the system prompt and tools byte-stable; pass per-request or
        per-session values at the end of the newest message or as metadata.
    Fix safety:
        Needs review: the value may be meaningful to the model (e.g. today's date).
    """

    code, name, group, severity = "PC103", "volatile-value-early", "volatile", "warning"
    scope = "request"
    fix = "Keep system prompt and tools byte-stable; move per-request values after the stable prefix."

    def check_request(self, prepared: "Prepared", state: dict) -> Iterable[Finding]:
        req = prepared.request
        seen = state.setdefault(self.code, set())
        fields = [(i, m.path or f"messages[{i}]", "system", m.content) for i, m in enumerate(req.system_messages)]
        fields += [(i, (t.path or f"tools[{i}]") + ".description", f"tools[{i}]", t.description) for i, t in enumerate(req.tools)]
        redact = state.get("redact", False)
        scanned = state.setdefault(self.code + ".scanned", set())
        for ref, path, segment, text in fields:
            memo = (req.session, segment, ref, hash(text))  # paths differ per record (trajectory[i]...)
            if memo in scanned:  # the same system prompt / tool again: nothing new to find
                continue
            scanned.add(memo)
            spans = [sp for sp in find_volatile(text) if not fixed_date(text, sp)]
            if not spans:
                continue
            span = spans[0]
            key = (req.session, segment, ref, span.kind)
            if key in seen:
                continue
            seen.add(key)
            sev = "info" if span.kind == "date" else "warning"
            line = text.count("\n", 0, span.start) + 1
            yield Finding(
                self.code, self.name, sev, req.session, req.index, segment, f"{path}" if segment != "system" else f"{path}.content",
                _rendered_char(prepared, segment, ref, text, span), None,
                f"{span.kind} {excerpt(span.text, redact)!r} at {segment} line {line}: if it changes, the whole prefix after it misses",
                self.fix, line=line, before=excerpt(text[max(0, span.start - 40) : span.start], redact),
                after=excerpt(text[span.start : span.start + 40], redact),
                **origin(req),
            )


#: A line that names its date as a fixed reference point: a knowledge / training-data cutoff.
_FIXED_DATE = re.compile(r"(?i)\b(?:knowledge|training)(?:[ -]?data)?[ -]?cut-?off\b|\bcut-?off(?:[ -]?date)?\s*[:=]?")


def fixed_date(text: str, span: VolatileSpan) -> bool:
    """True when ``span`` is a date (day granularity) on a line that names it a knowledge or
    training-data cutoff: a date that is constant by definition, so PC103's "if it changes"
    does not apply (kvlint's ``test_dynamic_time_ignores_an_unchanged_timestamp``:
    ``Knowledge cutoff 2024-06-01``). Pair rules still report it if it does change."""
    if span.kind != "date":
        return False
    start = text.rfind("\n", 0, span.start) + 1
    return _FIXED_DATE.search(text, start, span.start) is not None


def _rendered_char(prepared: "Prepared", segment: str, ref: int, text: str, span: VolatileSpan) -> int | None:
    """Offset of the value in the rendered prompt (None when not found)."""
    rendered = prepared.rendered
    if rendered is None:
        return None
    kind = "system" if segment == "system" else "tool"
    for seg in rendered.segments:
        if seg.kind == kind and seg.ref == ref:
            at = rendered.text.find(text[: span.end], seg.start, seg.end + len(text))
            return at + span.start if at >= 0 else None
    return None


#: Per-user values: e-mail addresses, locale codes (``en-GB``) and labelled user fields.
_USER_VALUE = re.compile(
    r"(?P<email>(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w-]))"
    r"|(?P<locale>(?<![\w-])[a-z]{2}[-_][A-Z]{2}(?![\w-]))"
    r"|(?i:(?<![\w])(?:user(?:[ _]?name)?|name|email|locale|language|timezone|time zone|tz|country|plan)"
    r"\s*[:=]\s*)(?P<field>[^\s,;]{2,})"
)


def _line_at(text: str, char: int) -> str:
    start = text.rfind("\n", 0, char) + 1
    end = text.find("\n", char)
    return text[start : end if end >= 0 else len(text)]


def user_values(line: str) -> list[tuple[str, str]]:
    """(kind, value) of every per-user value in ``line``: ``email``, ``locale`` or ``field``."""
    return [(k, v) for m in _USER_VALUE.finditer(line) for k, v in m.groupdict().items() if v]


#: How findings name each kind of :func:`user_values`.
USER_VALUE_NAMES = {"email": "e-mail address", "locale": "locale", "field": "user field"}


def changed_user_value(text: str, other: str, char: int) -> tuple[str, str, str] | None:
    """(kind, value in ``text``, value in ``other``) of the first per-user value of the same
    kind that differs between the lines of ``text`` and ``other`` holding ``char`` (the first
    differing character); None when the line holds none that differs."""
    a, b = user_values(_line_at(text, char)), user_values(_line_at(other, char))
    changed = [(x, y) for x, y in zip(a, b) if x[0] == y[0] and x[1] != y[1]]
    return (changed[0][0][0], changed[0][0][1], changed[0][1][1]) if changed else None


class UserDataInPrefix(Rule):
    """A per-user value (e-mail address, locale, user name) in the system prompt changed.

    What it does:
        When the first difference lies in the system prompt and its line holds a
        per-user value in both requests (an e-mail address, a locale code such as
        ``en-GB``, a labelled field such as ``user: ada``) that differs, reports it.
    Why it breaks caching:
        A system prompt personalized per user is a different prefix for every user
        (and for one user whose locale changes): the system prompt after the value,
        the tools and the history miss, and no two users share the cached prefix.
    Example:
        request 1 system: "user ada@example.com asks"; request 2: "user bob@example.com asks".
    Use instead:
        Keep the system prompt the same for every user; pass who the user is in the
        newest user message (or as request metadata).
    Fix safety:
        Needs review: the model may rely on the value early (tone, language); moving
        it to the newest turn keeps it in the prompt.
    """

    code, name, group, severity = "PC104", "user-data-in-prefix", "volatile", "warning"
    parts = frozenset({"system"})
    order = 12
    fix = "Keep the system prompt identical for every user; put per-user values in the newest user message."

    def check(self, ctx: PairContext) -> Finding | None:
        c = ctx.div.char
        if c is None:
            return None
        changed = changed_user_value(ctx.r_text, ctx.s_text, c)
        if changed is None:
            return None
        kind, new, old = changed
        what = USER_VALUE_NAMES[kind]
        redact = ctx.redact
        return ctx.finding(self, f"{what} in the system prompt changed: {excerpt(old, redact)!r} → "
                           f"{excerpt(new, redact)!r}")


RULES = [VolatileTimestamp(), VolatileId(), VolatileValueEarly(), UserDataInPrefix()]
