"""The plain volatile-value scan, as it was before the fast paths (test oracle for
tests/test_volatile_fast.py).

Built from :mod:`prefixcache.analyzer.volatile`'s own detectors (one set of patterns and
classifiers) with the speed-ups taken out: every detector runs over the whole text (no
literal gates, no prefix reuse across texts), and the leading fast-fail lookaheads
(``(?=[12])``, ``(?=[0-9a-f]{7})``, ``(?=[A-Z\\d])``) are stripped from the patterns, so each
pattern is the one the 12-pass scan used.
"""

from __future__ import annotations

import re
from typing import Iterator

from prefixcache.analyzer import volatile as v

#: Fast-fail prefixes the fast scan added in front of three patterns.
_FAST_FAIL = (r"(?=[12])", r"(?=[0-9a-f]{7})", r"(?=[A-Z\d])")


def _plain(pattern: re.Pattern[str]) -> re.Pattern[str]:
    src = pattern.pattern
    for prefix in _FAST_FAIL:
        if src.startswith(prefix):
            return re.compile(src[len(prefix):], pattern.flags)
    return pattern


_DETECTORS = tuple((_plain(p), classify, group) for p, classify, group, _gate in v._DETECTORS)


def _candidates(text: str) -> Iterator[tuple[int, int, int, str, float | None]]:
    for prio, (pattern, classify, group) in enumerate(_DETECTORS):
        if classify is v._git:
            classify = v._git_scan(text, 0)
        for m in pattern.finditer(text):
            found = classify(m, text)
            if found is None:
                continue
            kind, gran = found
            start, end = m.span(group)
            if kind == "nonce" and m["key"].lower() not in ("cch", "nonce", "salt"):
                kind = "request-id"
            yield start, end, prio, kind, gran


def find_volatile(text: str) -> list[v.VolatileSpan]:
    """Volatile values in ``text``: every candidate, the earliest start winning, then the longest."""
    picked: list[v.VolatileSpan] = []
    taken_until = -1
    for start, end, _prio, kind, gran in sorted(_candidates(text), key=lambda c: (c[0], -(c[1] - c[0]), c[2])):
        if start < taken_until or end <= start:
            continue
        picked.append(v.VolatileSpan(start, end, kind, gran, text[start:end]))
        taken_until = end
    return picked


assert all(p.pattern != q.pattern for (p, *_), (q, *_) in zip(_DETECTORS, v._DETECTORS) if p is not q)
assert sum(p is not q for (p, *_), (q, *_) in zip(_DETECTORS, v._DETECTORS)) == 3, "a fast-fail prefix changed"
