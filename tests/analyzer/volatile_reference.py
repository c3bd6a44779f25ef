"""The plain volatile-value scan, as it was before the fast paths (test oracle for
tests/analyzer/test_volatile_fast.py).

Built from :mod:`prefixcache.analyzer.volatile`'s own detectors (one set of patterns and
classifiers) with the speed-ups taken out: every detector runs over the whole text (no
literal gates, no prefix reuse across texts), and the leading fast-fail lookaheads
(``(?=[12])``, ``(?=[0-9a-f]{7})``, ``(?=[A-Z\\d])``) are stripped from the patterns, so each
pattern is the one the 12-pass scan used.
"""

from __future__ import annotations

import re
from prefixcache.analyzer import volatile as v

#: Fast-fail prefixes the fast scan added in front of three patterns.
_FAST_FAIL = (r"(?=[12])", r"(?=[0-9a-f]{7})", r"(?=[A-Z\d])")


def _plain(pattern: re.Pattern[str]) -> re.Pattern[str]:
    src = pattern.pattern
    for prefix in _FAST_FAIL:
        if src.startswith(prefix):
            return re.compile(src[len(prefix):], pattern.flags)
    return pattern


#: The library's scan, taken at import (tests that wrap ``volatile._scan`` to count calls do not see the oracle's).
_SCAN = v._scan
#: The detectors as the 12-pass scan ran them: plain patterns, no literal gates.
_DETECTORS = tuple((_plain(p), classify, group, ()) for p, classify, group, _gate in v._DETECTORS)


def find_volatile(text: str) -> list[v.VolatileSpan]:
    """Volatile values in ``text`` by the plain scan: the library's own candidate and pick
    loops (``volatile._scan`` from offset 0, no prefix reuse) over :data:`_DETECTORS`."""
    fast = v._DETECTORS
    v._DETECTORS = _DETECTORS
    try:
        return _SCAN(text)
    finally:
        v._DETECTORS = fast


assert all(p.pattern != q.pattern for (p, *_), (q, *_) in zip(_DETECTORS, v._DETECTORS) if p is not q)
assert sum(p is not q for (p, *_), (q, *_) in zip(_DETECTORS, v._DETECTORS)) == 3, "a fast-fail prefix changed"
