"""The fast find_volatile (gates, fast-fail prefixes, prefix reuse) finds exactly what the
plain 12-pass scan found: tests/analyzer/volatile_reference.py is that scan (the same detectors, speed-ups taken out)."""

from __future__ import annotations

import json
import re
import re._constants as C
import re._parser as P

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache.analyzer import volatile
from prefixcache.analyzer.volatile import HARD_CHARS, find_volatile
from tests.analyzer import volatile_reference as ref
from tests.helpers import CASES, SAMPLES, existing

_CATS = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
         C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S"}


def _item_matches(op, av, ch: str, icase: bool) -> bool:
    """Whether one item of a character set (or a one-character node) can consume ``ch``."""
    if op is C.LITERAL:
        return chr(av) == ch or (icase and chr(av).lower() == ch.lower())
    if op is C.NOT_LITERAL:
        return chr(av) != ch
    if op is C.ANY:
        return ch != "\n"
    if op is C.RANGE:
        return av[0] <= ord(ch) <= av[1]
    if op is C.CATEGORY:
        return re.fullmatch(_CATS[av], ch) is not None
    if op is C.IN:
        negate = any(o is C.NEGATE for o, _ in av)
        hit = any(_item_matches(o, a, ch, icase) for o, a in av if o is not C.NEGATE)
        return hit != negate
    raise AssertionError(f"unexpected set item {op}")


def _consumes(tree, ch: str, icase: bool) -> bool:
    """Whether any node of a parsed pattern, lookaheads included and lookbehinds not, can consume ``ch``."""
    for op, av in tree:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            if _item_matches(op, av, ch, icase):
                return True
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if _consumes(av[2], ch, icase):
                return True
        elif op is C.SUBPATTERN:
            if _consumes(av[3], ch, icase):
                return True
        elif op is C.BRANCH:
            if any(_consumes(b, ch, icase) for b in av[1]):
                return True
        elif op in (C.ASSERT, C.ASSERT_NOT):
            if av[0] == 1 and _consumes(av[1], ch, icase):  # lookahead; -1 = lookbehind
                return True
        elif op is C.ATOMIC_GROUP:
            if _consumes(av, ch, icase):
                return True
        elif op not in (C.AT,):
            raise AssertionError(f"unexpected node {op}")
    return False


@pytest.mark.parametrize("index", range(len(volatile._DETECTORS)))
def test_hard_chars_are_never_consumed_nor_read_ahead(index: int) -> None:
    """The invariant prefix reuse rests on: no detector (nor any lookahead in it) can take a hard character."""
    pattern = volatile._DETECTORS[index][0]
    tree = P.parse(pattern.pattern, pattern.flags)
    icase = bool(pattern.flags & re.IGNORECASE)
    assert [c for c in HARD_CHARS if _consumes(tree, c, icase)] == []


def test_gates_are_consumed_by_every_match() -> None:
    """Each gate literal is needed: a detector's matches on real text each hold one."""
    texts = list(_fixture_texts()) + [_PIECE * 4]
    for pattern, _c, _g, gate in volatile._DETECTORS:
        for t in texts:
            for m in pattern.finditer(t):
                assert not gate or any(lit in m.group() for lit in gate), (pattern.pattern[:40], m.group())


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _fixture_texts():
    for folder in (existing(CASES), existing(SAMPLES)):
        for path in sorted(folder.glob("*.json*")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                yield from (s for s in _strings(rec) if len(s) > 8)


def _rows(spans) -> list[tuple]:
    return [(s.start, s.end, s.kind, s.granularity_s, s.text) for s in spans]


def _same(text: str) -> None:
    assert _rows(find_volatile(text)) == _rows(ref.find_volatile(text))


def test_fixture_strings_match_the_reference() -> None:
    seen = set()
    n = 0
    for text in _fixture_texts():
        if text not in seen:
            seen.add(text)
            _same(text)
            n += 1
    assert n > 100


_PIECE = ("the build failed at 10:31:02 after commit 1a2b3c4d; see req_8f3a2b1c9d0e4f5a and "
          "2026-03-02T10:31:02Z for details, index ad388c7..168a845 [main 3f9e2a1] {\"cch\": \"36ee5\"}\n"
          "Mon, 02 Mar 2026 10:31:02 GMT (ts 1737433799123) 0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d 03/02/2026; ")


def test_prefix_reuse_matches_a_whole_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Request after request: one long prompt with a new tail (a clock, an id, a cut inside a value)."""
    volatile._recent.clear()
    scans: list[tuple[int, int]] = []
    real = volatile._scan
    monkeypatch.setattr(volatile, "_scan", lambda text, pos=0: scans.append((pos, len(text))) or real(text, pos))
    base = _PIECE * 200
    tails = ["Current time: 2026-03-02 10:31:0%d UTC" % i for i in range(3)]
    tails += ["", "1a2b3c4", "eyJhbGciOiJIUzI1.eyJzdWIiOiIx.SflKxwRJSMeK", "; 10:3", ";{x}", "\n10:31:02 PM"]
    for tail in tails:
        _same(base + tail)
    for cut in (len(base) - 1, len(base) - 7, len(base) - 60, len(base) // 2):
        _same(base[:cut] + "2026-03-02T10:31:02Z")
        _same(base[:cut])
    assert scans[0][0] == 0 and all(len_ - pos < 300 for pos, len_ in scans[1:5]), scans


_FRAGMENTS = [
    "2026-03-02", "T10:31:02", ".123Z", " UTC", "10:31", ":02", " PM", "1737433799", "123", "ad388c7", "..", "...",
    "index ", "commit ", "\n", " ", "; ", "{", "}", "[", "] ", "(", ")", "eyJ", "abcdefgh12", ".", "-", "_", "req_",
    "8f3a2b1c9d0e4f5a", "cch=", "session_id: ", "0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d", "March 2, 2026", "Mon, ",
    "03/02/2026", "/", "deadbeef", "x", "at ", "<", ">", "!", "?", "\"", "'", "=", ",", "1", "9", "a", "f",
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=60), st.integers(0, 2000))
def test_random_texts_match_the_reference(parts: list[str], cut: int) -> None:
    text = "".join(parts)
    _same(text)
    long = "".join(parts) * 40 + "x" * (volatile._REUSE_MIN)  # long enough for the reuse path
    _same(long)
    _same(long[: max(0, len(long) - cut)] + "".join(reversed(parts)))


def test_blanked_line_keys_equal_exactly_when_the_blanked_lines_do() -> None:
    """canonicalize's constant-value slots: keys hashed incrementally compare like the
    line-with-the-value-blanked strings they replace (several values a line, values across lines)."""
    from prefixcache.analyzer.canonical.rewrite import _blanked_lines

    texts = [_PIECE * 3, _PIECE.replace("10:31:02", "11:00:00") * 3, "Now: 2026-03-02 10:31:02\nUTC x; at 10:31:02\nGMT y\n" * 4,
             "a 1a2b3c4 b\n1a2b3c5 b\n" + _PIECE, ""]
    slots = []
    for text in texts:
        for span, key in _blanked_lines(text):
            ls = text.rfind("\n", 0, span.start) + 1
            le = text.find("\n", span.end)
            blanked = text[ls : span.start] + "\x00" + text[span.end : le if le >= 0 else len(text)]
            slots.append((key, blanked))
    assert len(slots) > 50
    by_key: dict = {}
    by_text: dict = {}
    for key, blanked in slots:
        by_key.setdefault(key, set()).add(blanked)
        by_text.setdefault(blanked, set()).add(key)
    assert all(len(v) == 1 for v in by_key.values()) and all(len(v) == 1 for v in by_text.values())
