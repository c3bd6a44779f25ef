"""Find volatile values in prompt text: timestamps, dates, clock times, ids, nonces.

A volatile value is text that changes between otherwise identical renders of a
prompt (``Utc::now()``, ``uuid4()``, a per-request nonce). Inside a shared prefix
it breaks every KV prefix cache from that point on (reported upstream: block/goose
#2431, opencode-agent-memory #20, the claude-code ``cch=`` nonce, oh-my-openagent
CONVERSATION_ID; docs/references.md lists them).

:func:`find_volatile` is regex-based and tuned for precision: a match must look
like a clock reading or a generated identifier, not merely like a number.
Version strings (``1.0.98``), line numbers, file sizes, model snapshot suffixes
(``claude-sonnet-4-20250514``) and English words made of hex letters
(``decade``) are not reported. Short hex hashes are reported only in git-like
contexts (``index ad388c7..168a845``, ``commit 1a2b3c4``).

Kinds and their :data:`TIME_KINDS` / :data:`ID_KINDS` groups map onto the rule
codes PC101 (volatile-timestamp) and PC102 (volatile-id).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

from prefixcache.analyzer.sequence import common_prefix_len

#: Kinds that are clock readings (rule PC101, severity by ``granularity_s``).
TIME_KINDS = frozenset({"timestamp", "date", "time", "epoch"})
#: Kinds that are generated identifiers (rule PC102).
ID_KINDS = frozenset({"uuid", "hex-id", "nonce", "request-id", "jwt", "counter"})


@dataclass(frozen=True, slots=True)
class VolatileSpan:
    """One volatile value found in a text.

    ``start``/``end`` are character offsets (``end`` exclusive) and ``text`` is
    ``source[start:end]``. ``kind`` is one of :data:`TIME_KINDS` or
    :data:`ID_KINDS`. ``granularity_s`` is how often a clock value changes, in
    seconds (0.001 for a millisecond ISO stamp, 1 for ``HH:MM:SS``, 60 for
    ``HH:MM``, 86400 for a date); ``None`` for identifiers.
    """

    start: int
    end: int
    kind: str
    granularity_s: float | None
    text: str


_MONTHS = (
    "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    "|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
_DAYS = "Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?"
_TZ = r"(?:Z|[+-]\d{2}:?\d{2}|\s?(?:UTC|GMT)(?:[+-]\d{1,4})?)"
_TIME = r"(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<frac>\d{1,9}))?)?"
_AMPM = r"(?:\s?(?P<ampm>[AaPp]\.[Mm]\.|[AaPp][Mm]))"

# ISO 8601 / RFC 3339 / SQL style: 2026-03-02T10:31:02.123Z, 2026-03-02 10:31 UTC
_ISO = re.compile(
    r"(?<![\w.])(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:[T ]" + _TIME + _TZ + r"?)?(?![\w])"
)
# Compact ISO basic format only with a time part: 20260302T103102Z
_ISO_BASIC = re.compile(
    r"(?<![\w.])(?P<y>\d{4})(?P<mo>\d{2})(?P<d>\d{2})T(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})?"
    r"(?:\.(?P<frac>\d{1,9}))?Z?(?![\w])"
)
# 03/02/2026, 2026/03/02 (slash dates), optionally followed by a time
_SLASH = re.compile(
    r"(?<![\w./])(?:(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})|(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y2>\d{4}))"
    r"(?:,?\s" + _TIME + _AMPM + r"?" + _TZ + r"?)?(?![\w/])"
)
# Monday, March 2, 2026 10:31 AM  |  2 March 2026  |  Mon, 02 Mar 2026 10:31:02 GMT
# | Mon Mar 02 2026 10:31:02 GMT+0000 (JS Date.toString)
_TEXTUAL = re.compile(
    r"(?=[A-Z\d])(?<![\w])(?:(?:" + _DAYS + r"),?\s+)?"
    r"(?:(?P<mname>" + _MONTHS + r")\.?\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})"
    r"|(?P<d2>\d{1,2})(?:st|nd|rd|th)?\s+(?P<mname2>" + _MONTHS + r")\.?,?\s+(?P<y2>\d{4}))"
    r"(?:,?\s+(?:at\s+)?" + _TIME + _AMPM + r"?" + _TZ + r"?)?(?![\w])"
)
# A bare clock reading: 10:31:02, 10:31:02.123, 10:31 PM, or "time: 10:31"
_CLOCK = re.compile(r"(?<![\w.:/\\-])" + _TIME + _AMPM + r"?" + _TZ + r"?(?![\w:.]\d|[\w:])")
_CLOCK_LABEL = re.compile(r"(?i)(?:time|now|clock|at|as of|updated|generated)\W{0,3}$")
# UNIX epoch seconds (2001-09 .. 2039) or milliseconds, optionally fractional
_EPOCH = re.compile(r"(?=[12])(?<![\w.,])(?P<n>1\d{9}|1\d{12}|2[01]\d{8}|2[01]\d{11})(?:\.(?P<frac>\d{1,9}))?(?![\w.,]?\d)")
_UUID = re.compile(
    r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)
_JWT = re.compile(r"(?<![\w-])eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}(?![\w-])")
# Provider / framework ids with a known prefix: req_…, msg_…, toolu_…, chatcmpl-…
_PREFIXED = re.compile(
    r"(?<![\w-])(?:req|msg|msgbatch|toolu|call|resp|run|thread|sess|conv|evt|file|batch|chatcmpl|cmpl|gen)"
    r"[_-](?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,}(?![\w-])"
)
# Short correlation ids with a known prefix (issue 24, kvlint's positives): trace_9fbc21aa, req-20a7c1
_CORRELATION = re.compile(
    r"(?<![\w-])(?:trace|span|txn|corr|job|req|request|sess|session|conv|run)[_-](?=[A-Za-z0-9]*\d)"
    r"[A-Za-z0-9]{6,}(?![\w-])"
)
# A labelled long counter: "seq 1000241", "request 4820113", "turn: 1000002" (six digits or more)
_COUNTER = re.compile(
    r"(?i)(?<![\w])(?:seq(?:uence)?|counter|serial|tick|iteration|request|turn|step|event)"
    r"(?:\s+(?:no\.?|number))?\s*[:=]?\s*(?P<v>\d{6,})(?![\w.,]?\d)"
)
# A weekday or month name said to be the current one: "Today is Monday", "current month: March"
_DAYNAME = re.compile(
    r"(?<![\w])(?P<v>(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|January|February|March|April|June|July|August"
    r"|September|October|November|December)(?![\w])"
)
_DAYNAME_LABEL = re.compile(r"(?i)(?:today|current|day|date|month|now|it is|it's|this week)\W{0,4}(?:is\W{1,2})?$")
# key=value nonces: cch=36ee5; nonce: k3J9x…; request_id=…; CONVERSATION_ID: 7f3a…
_LABELLED = re.compile(
    r"(?i)(?<![\w])(?P<key>cch|nonce|salt|(?:session|conversation|request|trace|span|run|correlation|"
    r"message|client|device|install(?:ation)?|chat|thread)[ _-]?id)\b[\"']?\s*[:=]\s*[\"']?"
    r"(?P<v>(?=[\w-]*\d)[A-Za-z0-9][\w-]{3,})"
)
# Long random hex (md5/sha1/sha256, 16-hex trace ids): must mix digits and letters
_HEX = re.compile(r"(?<![\w-])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])(?:[0-9a-f]{16,128}|[0-9A-F]{16,128})(?![\w-])")
# Short git object names in git-like contexts
_GIT = re.compile(
    r"(?=[0-9a-f]{7})(?:(?<=index )|(?<=\.\.)|(?<=\.\.\.)|(?<=commit )|(?<=HEAD is now at )|(?<=Merge: )|(?<=revert )"
    r"|(?<=^)|(?<=\n)|(?<=\[)(?=[\w./-]+ [0-9a-f]{7,12}\])|(?<=\] )|(?<=\s\*\s))"
    r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?=\.\.|\s|$|\]|\))"
)
_GIT_LINE = re.compile(r"[0-9a-f]{7,12}(?:\.\.\.?[0-9a-f]{7,12}| [A-Z(\[]|$)")


def _valid_date(y: str | None, mo: str | None, d: str | None) -> bool:
    if not (y and mo and d):
        return False
    return 1970 <= int(y) <= 2100 and 1 <= int(mo) <= 12 and 1 <= int(d) <= 31


def _time_granularity(m: re.Match[str]) -> float | None:
    """Seconds between changes of the clock part of a match; None when it has none."""
    gd = m.groupdict()
    if gd.get("h") is None:
        return None
    if int(gd["h"]) > 23 or int(gd["mi"]) > 59 or (gd.get("s") and int(gd["s"]) > 60):
        return -1.0
    if gd.get("frac"):
        return 10.0 ** -len(gd["frac"])
    return 1.0 if gd.get("s") else 60.0


def _iso(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    if not _valid_date(m["y"], m["mo"], m["d"]):
        return None
    g = _time_granularity(m)
    if g is not None and g < 0:
        return None
    return ("date", 86400.0) if g is None else ("timestamp", g)


def _slash(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    if m["y"]:
        ok = _valid_date(m["y"], m["mo"], m["d"])
    else:  # month/day order is ambiguous: either reading must be a valid date
        ok = _valid_date(m["y2"], m["a"], m["b"]) or _valid_date(m["y2"], m["b"], m["a"])
    g = _time_granularity(m)
    if not ok or (g is not None and g < 0):
        return None
    return ("date", 86400.0) if g is None else ("timestamp", g)


def _textual(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    y, d = m["y"] or m["y2"], m["d"] or m["d2"]
    if not (1970 <= int(y) <= 2100 and 1 <= int(d) <= 31):
        return None
    g = _time_granularity(m)
    if g is not None and g < 0:
        return None
    return ("date", 86400.0) if g is None else ("timestamp", g)


def _clock(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    g = _time_granularity(m)
    if g is None or g < 0:
        return None
    if m["ampm"]:
        return None if int(m["h"]) > 12 else ("time", g)
    if m["s"] is not None and len(m["h"]) == 2:
        return ("time", g)
    # HH:MM alone is a ratio, a score or a file position unless labelled as a time
    return ("time", g) if _CLOCK_LABEL.search(text, max(0, m.start() - 16), m.start()) else None


def _epoch(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    if m["frac"]:
        return ("epoch", 10.0 ** -len(m["frac"]) * (0.001 if len(m["n"]) == 13 else 1))
    return ("epoch", 0.001 if len(m["n"]) == 13 else 1.0)


def _dayname(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
    """A weekday or month name only where the text says it is today's (a date, one value a day)."""
    return ("date", 86400.0) if _DAYNAME_LABEL.search(text, max(0, m.start() - 24), m.start()) else None


def _fixed(kind: str) -> Callable[[re.Match[str], str], tuple[str, float | None] | None]:
    return lambda m, text: (kind, None)


def _git(m: re.Match[str], text: str, line_start: int | None = None) -> tuple[str, float | None] | None:
    if line_start is None:
        line_start = text.rfind("\n", 0, m.start()) + 1
    if m.start() == line_start or text[m.start() - 2 : m.start()] == "* ":
        # a line that starts with a hash: `git log --oneline` / `git branch -v` output
        if not _GIT_LINE.match(text, m.start()):
            return None
    return ("hex-id", None)


def _git_scan(text: str, pos: int = 0) -> Callable[[re.Match[str], str], tuple[str, float | None] | None]:
    """:func:`_git` for one left-to-right scan of ``text`` from ``pos``: the line start is
    found from the previous match onwards, not from the text's start (linear on a huge
    text without newlines)."""
    seen = [pos, text.rfind("\n", 0, pos) + 1]  # position looked up to, start of the line there

    def classify(m: re.Match[str], text: str) -> tuple[str, float | None] | None:
        nl = text.rfind("\n", seen[0], m.start())
        if nl >= 0:
            seen[1] = nl + 1
        seen[0] = m.start()
        return _git(m, text, seen[1])

    return classify


#: (pattern, classifier, group holding the value, literal gate) in priority order: on
#: equal start offsets the longer match wins, then the earlier entry. The gate lists
#: substrings of which every match consumes at least one: a detector runs only where
#: one occurs (``()`` = always runs).
_DETECTORS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], str], tuple[str, float | None] | None], int | str, tuple[str, ...]], ...] = (
    (_ISO, _iso, 0, ("-",)),
    (_ISO_BASIC, _iso, 0, ("T",)),
    (_TEXTUAL, _textual, 0, ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")),
    (_SLASH, _slash, 0, ("/",)),
    (_UUID, _fixed("uuid"), 0, ("-",)),
    (_JWT, _fixed("jwt"), 0, ("eyJ",)),
    (_LABELLED, _fixed("nonce"), "v", (":", "=")),
    (_PREFIXED, _fixed("request-id"), 0, ("_", "-")),
    (_CORRELATION, _fixed("request-id"), 0, ("_", "-")),
    (_COUNTER, _fixed("counter"), "v", ()),
    (_DAYNAME, _dayname, "v", ("day", "uary", "March", "April", "June", "July", "August", "ber")),
    (_HEX, _fixed("hex-id"), 0, ()),
    (_GIT, _git, 0, ()),
    (_CLOCK, _clock, 0, (":",)),
    (_EPOCH, _epoch, 0, ()),
)

#: Characters no detector can consume and no lookahead reads past (checked against
#: the parsed patterns by tests/analyzer/test_volatile_fast.py). No match crosses one, and
#: a match attempt left of one reads nothing right of it: the scan of a text up to
#: such a character depends only on the text up to it.
HARD_CHARS = ";!?{}<>|&%$#@^~`(["
#: Texts shorter than this are scanned whole, without the reuse cache (characters).
_REUSE_MIN = 4096
#: How many long texts (and their spans) the reuse cache keeps.
_REUSE_SLOTS = 4
_recent: list[tuple[str, tuple[VolatileSpan, ...]]] = []


def _candidates(text: str, pos: int = 0) -> Iterator[tuple[int, int, int, str, float | None]]:
    """Every detector's accepted matches starting at ``pos`` or later (lookbehinds see
    the whole text), as (start, end, priority, kind, granularity)."""
    for prio, (pattern, classify, group, gate) in enumerate(_DETECTORS):
        if gate and not any(text.find(lit, pos) >= 0 for lit in gate):
            continue
        if classify is _git:
            classify = _git_scan(text, pos)
        for m in pattern.finditer(text, pos):
            found = classify(m, text)
            if found is None:
                continue
            kind, gran = found
            start, end = m.span(group)
            if kind == "nonce" and m["key"].lower() not in ("cch", "nonce", "salt"):
                kind = "request-id"
            yield start, end, prio, kind, gran


def _scan(text: str, pos: int = 0) -> list[VolatileSpan]:
    """:func:`find_volatile` of ``text`` restricted to spans starting at ``pos`` or later
    (exact when ``pos`` is 0 or follows a :data:`HARD_CHARS` character)."""
    picked: list[VolatileSpan] = []
    taken_until = -1
    for start, end, _prio, kind, gran in sorted(_candidates(text, pos), key=lambda c: (c[0], -(c[1] - c[0]), c[2])):
        if start < taken_until or end <= start:
            continue
        picked.append(VolatileSpan(start, end, kind, gran, text[start:end]))
        taken_until = end
    return picked


def _last_hard(text: str, end: int) -> int:
    """Offset of the last :data:`HARD_CHARS` character before ``end``; -1 when none."""
    lo = max(0, end - 65536)
    best = max(text.rfind(c, lo, end) for c in HARD_CHARS)
    if best < 0 and lo > 0:
        best = max(text.rfind(c, 0, lo) for c in HARD_CHARS)
    return best


def _reuse(text: str) -> tuple[int, tuple[VolatileSpan, ...]]:
    """(offset to scan from, spans before it) from the cached text sharing the longest
    prefix with ``text``: spans left of the last hard character inside that prefix are
    the same in both texts."""
    best, spans = 0, ()
    for old, old_spans in _recent:
        if old is text or old == text:
            return len(text), old_spans
        n = common_prefix_len(old, text)
        if n > best:
            best, spans = n, old_spans
    cut = _last_hard(text, best) + 1 if best else 0
    if cut <= 0:
        return 0, ()
    return cut, tuple(s for s in spans if s.start < cut)


def find_volatile(text: str) -> list[VolatileSpan]:
    """Volatile values in ``text``, sorted by offset and non-overlapping.

    Returns :class:`VolatileSpan` s with character offsets into ``text``. Where
    detectors overlap, the match starting first wins, then the longer one (so
    ``2026-03-02 10:31:02 UTC`` is one timestamp, not a date and a time).
    Deterministic; raises nothing. Long texts that share a prefix with one of the
    last :data:`_REUSE_SLOTS` long texts scanned (the same system prompt with a new
    clock at its end, request after request) reuse its spans up to the last
    :data:`HARD_CHARS` character of the shared prefix and scan only the rest: the
    result is the same as a whole scan.
    """
    if len(text) < _REUSE_MIN:
        return _scan(text)
    cut, kept = _reuse(text)
    spans = (*kept, *_scan(text, cut)) if cut < len(text) else kept
    _recent[:] = [(text, spans)] + [e for e in _recent if e[0] is not text][: _REUSE_SLOTS - 1]
    return list(spans)


def rule_code(span: VolatileSpan) -> str:
    """The permanent rule code for a span's kind: PC101 for clock values, PC102 for ids."""
    return "PC101" if span.kind in TIME_KINDS else "PC102"
