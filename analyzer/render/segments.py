"""Segment spans of a rendered prompt: which characters belong to which request part.

Templates are code, so parts are located by rendering, not by parsing:

* message *j* starts where the render of ``messages[:j]`` (no generation prompt)
  stops agreeing with the full render (its length when it is a prefix, which is
  the normal case; the common-prefix length otherwise);
* the tools block is where the render without tools and the render with tools
  differ (common prefix .. common suffix); tool *i* starts where the render with
  ``tools[:i]`` stops agreeing with the full one;
* the generation prompt is what ``add_generation_prompt=True`` appends.

:func:`paint` then lays the spans over the text by priority (tools inside a
system message split it) and fills the gaps with ``template`` segments, so the
result covers the text in order without overlaps.
"""

from __future__ import annotations

from prefixcache.analyzer.model import Segment
from prefixcache.analyzer.sequence import common_prefix_len

#: Paint priority: later kinds win where spans overlap.
_PRIORITY = {"template": 0, "generation_prompt": 1, "message": 2, "system": 2, "tool": 3, "tools": 3}


def boundary(prefix_render: str, full: str) -> int:
    """Where ``full`` stops following ``prefix_render`` (its length when it is a prefix)."""
    if full.startswith(prefix_render):
        return len(prefix_render)
    return common_prefix_len(prefix_render, full)


def monotone(bounds: list[int], lo: int, hi: int) -> list[int]:
    """Clamp ``bounds`` into ``[lo, hi]`` and make them non-decreasing."""
    out, prev = [], lo
    for b in bounds:
        b = min(max(b, prev), hi)
        out.append(b)
        prev = b
    return out


def paint(n_chars: int, spans: list[Segment]) -> tuple[Segment, ...]:
    """Non-overlapping segments covering ``[0, n_chars)`` in order.

    Where spans overlap, the higher-priority kind wins (tool > message/system >
    generation_prompt); uncovered characters become ``template`` segments.
    Adjacent pieces of the same part are merged; empty spans are dropped.
    Spans already in order without overlaps (a provider layout's) are laid out in one pass.
    """
    out: list[Segment] = []
    if all(0 <= s.start <= s.end <= n_chars for s in spans) and all(a.end <= b.start for a, b in zip(spans, spans[1:])):
        pos = 0
        for s in spans:
            if s.start < s.end:
                if s.start > pos:
                    _put(out, "template", "template", pos, s.start, -1)
                last = out[-1] if out else None
                if last is not None and last.kind == s.kind and last.label == s.label and last.end == s.start:
                    out[-1] = Segment(s.kind, s.label, last.start, s.end, s.ref)
                else:
                    out.append(s)  # the span itself (frozen): equal to a copy, and cheaper
                pos = s.end
        if pos < n_chars:
            _put(out, "template", "template", pos, n_chars, -1)
        return tuple(out)
    cuts = sorted({0, n_chars, *(s.start for s in spans), *(s.end for s in spans)})
    cuts = [c for c in cuts if 0 <= c <= n_chars]
    by_start = sorted(range(len(spans)), key=lambda i: spans[i].start)
    by_end = sorted(range(len(spans)), key=lambda i: spans[i].end)
    active: dict[int, Segment] = {}  # the spans covering the piece at hand, by list position
    si = ei = 0
    for a, b in zip(cuts, cuts[1:]):
        if a >= b:
            continue
        while si < len(spans) and spans[by_start[si]].start <= a:
            if spans[by_start[si]].end > a:
                active[by_start[si]] = spans[by_start[si]]
            si += 1
        while ei < len(spans) and spans[by_end[ei]].end <= a:
            active.pop(by_end[ei], None)
            ei += 1
        # the highest priority wins, the later span among equals (one sweep, not every span per piece)
        best = active[max(active, key=lambda i: (_PRIORITY.get(active[i].kind, 0), i))] if active else None
        if best is None:
            _put(out, "template", "template", a, b, -1)
        else:
            _put(out, best.kind, best.label, a, b, best.ref)
    return tuple(out)


def _put(out: list[Segment], kind: str, label: str, a: int, b: int, ref: int) -> None:
    """Append ``[a, b)`` to ``out``, merged into the last segment when it is the same part and adjacent."""
    if out and out[-1].kind == kind and out[-1].label == label and out[-1].end == a:
        out[-1] = Segment(kind, label, out[-1].start, b, ref)
    else:
        out.append(Segment(kind, label, a, b, ref))
