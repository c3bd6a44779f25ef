"""Automatic variations of a template context, for ``prefixcache check``.

A cache-stable prompt template renders the same prefix when only things that
should not matter change: the wall clock, freshly generated ids, the iteration
order of mappings and of lists whose order carries no meaning, and stray
whitespace at the end of free-text values. Each variation yields a changed
context (:class:`Varied`, with a changed clock for the template's ``now()``),
deterministically from a seed, so the check can render both and compare tokens.

Where the values come from: clock values and ids are found with
:func:`prefixcache.analyzer.volatile.find_volatile` in every string of the context,
plus ids under id-like keys (``id``, ``session_id``, ``requestId``, ``nonce``).
Lists are treated as unordered when every item is a mapping with a distinct
``name`` (tool lists, MCP servers, files) or when the context declares their
path in ``"_prefixcache": {"unordered": ["tools", "memory.files"]}``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping

from prefixcache.analyzer.volatile import ID_KINDS, TIME_KINDS, VolatileSpan, find_volatile

#: Default base clock when the context does not declare ``_prefixcache.now``.
BASE_NOW = datetime(2026, 3, 2, 10, 31, 2, 123000, tzinfo=timezone.utc)
#: The two clock moves: "by seconds" (crosses a minute boundary for minute
#: granularity) and "by a day".
CLOCK_SHIFTS = {"clock+90s": timedelta(seconds=90), "clock+1d": timedelta(days=1)}
VARIATIONS = ("clock+90s", "clock+1d", "ids", "order", "whitespace")
_ID_KEY = re.compile(r"(?i)^(?:id|uuid|nonce|salt|.*[_-]id|.*[a-z]Id|session|request|trace|run|conversation)$")
_ISO_PARTS = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:(?P<sep>[T ])(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:(?P<dot>[.,])(?P<frac>\d{1,9}))?)?)?(?P<tz>.*)"
)
_PROSE = re.compile(r"\s")
#: Subtrees holding JSON Schemas (tool parameters): code-defined, not free text.
_SCHEMA_KEYS = frozenset({"parameters", "input_schema", "inputSchema", "schema", "properties", "json_schema"})
_STRPTIME = ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%m/%d/%Y", "%Y/%m/%d", "%H:%M:%S", "%H:%M")


@dataclass(frozen=True, slots=True)
class Varied:
    """A context after one variation: ``context`` (JSON-like), ``now`` (the clock the
    template's ``now()`` returns) and how many values were ``changed``."""

    name: str
    context: Mapping[str, Any]
    now: datetime
    changed: int


def meta(context: Mapping[str, Any]) -> tuple[datetime, frozenset[str]]:
    """The base clock and declared unordered list paths from ``_prefixcache``."""
    m = context.get("_prefixcache") or {}
    now = BASE_NOW
    if isinstance(m.get("now"), str):
        now = datetime.fromisoformat(m["now"].replace("Z", "+00:00"))
    return now, frozenset(m.get("unordered") or ())


def _shift_span(span: VolatileSpan, delta: timedelta) -> str:
    """The same clock value, moved by ``delta``, in the same format where it can be
    parsed; otherwise its last digit bumped (a change of the same shape)."""
    text = span.text
    if span.kind == "epoch":
        scale = 1000 if len(text.split(".")[0]) == 13 else 1
        value = float(text) + delta.total_seconds() * scale
        return f"{value:.{len(text.split('.')[1])}f}" if "." in text else str(int(value))
    m = _ISO_PARTS.fullmatch(text)
    if m:
        return _shift_iso(m, delta)
    if span.granularity_s and delta.total_seconds() < span.granularity_s:
        return text  # e.g. a date does not change when the clock moves 90 s
    for fmt in _STRPTIME:
        try:
            t = datetime.strptime(text, fmt)
        except ValueError:
            continue
        for out_fmt in (fmt, fmt.replace("%d", "%-d").replace("%m", "%-m").replace("%H", "%-H")):
            if t.strftime(out_fmt) == text:
                return (t + delta).strftime(out_fmt)
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    i = digits[-1]
    return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]


def _shift_iso(m: re.Match[str], delta: timedelta) -> str:
    """An ISO 8601 value moved by ``delta``, keeping its fields, widths and zone suffix."""
    frac = m["frac"] or ""
    micro = int((frac + "000000")[:6]) if frac else 0
    t = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0), micro)
    t += delta
    out = t.strftime("%Y-%m-%d")
    if m["sep"]:
        out += m["sep"] + t.strftime("%H:%M" if len(m["h"]) == 2 else "%-H:%M")
        if m["s"] is not None:
            out += t.strftime(":%S")
        if frac:
            out += m["dot"] + f"{t.microsecond:06d}{'0' * 3}"[: len(frac)]
    return out + m["tz"]


def _regen(text: str, rng: random.Random) -> str:
    """A fresh id of the same shape: hex stays hex, digits digits, letters keep case."""
    out = []
    for c in text:
        if c in "0123456789abcdef":
            out.append(rng.choice("0123456789abcdef"))
        elif c in "ABCDEF":
            out.append(rng.choice("0123456789ABCDEF"))
        elif c.isdigit():
            out.append(rng.choice("0123456789"))
        elif c.isalpha():
            out.append(rng.choice("abcdefghijklmnopqrstuvwxyz" if c.islower() else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        else:
            out.append(c)
    new = "".join(out)
    return new if new != text else _regen(text, rng)


def _replace_spans(text: str, spans: list[VolatileSpan], repl: Callable[[VolatileSpan], str]) -> str:
    for s in reversed(spans):
        text = text[: s.start] + repl(s) + text[s.end :]
    return text


class _Walker:
    """Rebuilds a JSON-like value, applying ``leaf(key, value)`` to strings and
    numbers and reversing mappings / unordered lists when ``reorder`` is set."""

    def __init__(self, leaf: Callable[[str, Any], Any], unordered: frozenset[str], reorder: bool,
                 skip: frozenset[str] = frozenset()) -> None:
        self.leaf, self.unordered, self.reorder, self.changed = leaf, unordered, reorder, 0
        self.skip = skip

    def walk(self, value: Any, key: str = "", path: str = "") -> Any:
        if key in self.skip:
            return value
        if isinstance(value, Mapping):
            items = [(k, self.walk(v, str(k), f"{path}.{k}" if path else str(k))) for k, v in value.items()]
            if self.reorder and len(items) > 1:
                items.reverse()
                self.changed += 1
            return dict(items)
        if isinstance(value, list):
            out = [self.walk(v, key, path) for v in value]
            if self.reorder and len(out) > 1 and (path in self.unordered or _named_set(out)):
                out.reverse()
                self.changed += 1
            return out
        new = self.leaf(key, value)
        self.changed += new != value
        return new


def _named_set(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, Mapping)]
    return len(names) == len(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def vary(context: Mapping[str, Any], name: str, seed: int = 0) -> Varied:
    """Apply variation ``name`` (one of :data:`VARIATIONS`) to ``context``.

    Returns a new context; the input is not modified. ``_prefixcache`` is
    carried through untouched. Deterministic for a given ``seed``.
    """
    now, unordered = meta(context)
    rng = random.Random(f"{seed}:{name}")
    body = {k: v for k, v in context.items() if k != "_prefixcache"}
    if name in CLOCK_SHIFTS:
        delta = CLOCK_SHIFTS[name]

        def leaf(key: str, v: Any) -> Any:
            if not isinstance(v, str):
                return v
            spans = [s for s in find_volatile(v) if s.kind in TIME_KINDS]
            return _replace_spans(v, spans, lambda s: _shift_span(s, delta))

        walker, now = _Walker(leaf, unordered, False), now + delta
    elif name == "ids":

        def leaf(key: str, v: Any) -> Any:
            if isinstance(v, (str, int)) and not isinstance(v, bool) and _ID_KEY.match(key) and str(v):
                return type(v)(_regen(str(v), rng)) if isinstance(v, str) else int(_regen(str(v), rng))
            if not isinstance(v, str):
                return v
            spans = [s for s in find_volatile(v) if s.kind in ID_KINDS]
            return _replace_spans(v, spans, lambda s: _regen(s.text, rng))

        walker = _Walker(leaf, unordered, False)
    elif name == "order":
        walker = _Walker(lambda k, v: v, unordered, True)
    elif name == "whitespace":
        # free text (values that already hold whitespace) gains stray trailing whitespace;
        # identifiers and enum-like values ("user", "read_file") and JSON Schemas are left alone
        walker = _Walker(lambda k, v: f"{v} \n" if isinstance(v, str) and _PROSE.search(v.strip()) else v,
                         unordered, False, _SCHEMA_KEYS)
    else:
        raise ValueError(f"unknown variation {name!r}; expected one of {', '.join(VARIATIONS)}")
    out = walker.walk(body)
    if "_prefixcache" in context:
        out["_prefixcache"] = context["_prefixcache"]
    return Varied(name, out, now, walker.changed)
