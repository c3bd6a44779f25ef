"""Where a prompt's reusable prefix breaks: the first differing token, mapped back to the request.

:func:`locate` maps the first differing token back to the request: the rendered
segment (system, ``tools[i]``, ``messages[j]``, generation prompt), a JSON path, the
character offset in the rendered text, the line inside the part, and a short
before/after excerpt (or lengths and hashes with ``redact``).
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixcache.analyzer.model import Message, RenderedPrompt, Request, Segment, TokenizedPrompt
from prefixcache.analyzer.redact import redact_text
from prefixcache.analyzer.sequence import common_prefix_len


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a prompt first differs from the earlier prompt it shares most with.

    ``token`` is the first differing token index (= shared prefix, tokens);
    ``char`` the first differing character of the rendered texts (None without
    text). ``segment`` is the part of *this* request there (``system``,
    ``tools[2]``, ``messages[5]``, ``generation prompt``, ``hidden prefix``), with
    its ``kind`` and ``ref`` (tool or message index, -1 for none);
    ``other_kind``/``other_ref`` the same for the earlier request. ``json_path``
    points into the logged record; ``line`` is the 1-based line inside the part's
    text (None when not found). ``before``/``after``/``other_after`` are excerpts
    (or ``<N chars, h:…>`` when redacted).
    """

    token: int
    char: int | None
    segment: str
    kind: str
    ref: int
    other_kind: str
    other_ref: int
    json_path: str
    line: int | None
    before: str
    after: str
    other_after: str


def excerpt(text: str, redact: bool) -> str:
    """``text`` itself, or its length and a keyed hash when redacting (:mod:`prefixcache.analyzer.redact`)."""
    return redact_text(text) if redact else text


def _char_segment(rendered: RenderedPrompt, char: int) -> Segment | None:
    """The rendered part at ``char``; template glue resolves to the next real part
    (a removed message shows up as a difference in the glue before the next one)."""
    segs = rendered.segments
    for i, seg in enumerate(segs):
        if seg.start <= char < seg.end or (char == seg.end == len(rendered.text) and i == len(segs) - 1):
            if seg.kind != "template":
                return seg
            for nxt in segs[i + 1 :]:
                if nxt.kind != "template":
                    return nxt
            for prev in reversed(segs[:i]):
                if prev.kind != "template":
                    return prev
            return seg
    return segs[-1] if segs else None


def segment_name(seg: Segment | None) -> str:
    """Human name of a part: ``system``, ``tools[i]``, ``messages[j]``, ..."""
    if seg is None:
        return "end of prompt"
    if seg.kind == "system":
        return "system"
    if seg.kind == "tool":
        return f"tools[{seg.ref}]" if seg.ref >= 0 else "tools"
    if seg.kind == "message":
        return f"messages[{seg.ref}]" if seg.ref >= 0 else seg.label
    if seg.kind == "generation_prompt":
        return "generation prompt"
    if seg.kind == "opaque":
        return "hidden prefix"
    return seg.label or seg.kind


def part_text_offset(request: Request, rendered: RenderedPrompt, seg: Segment, char: int) -> tuple[str, int] | None:
    """(field, offset) of rendered ``char`` inside the request part's own text.

    ``field`` is ``content``, ``reasoning``, ``description`` or
    ``tool_calls[k].function.arguments``; the offset is in characters of that
    field. Found by searching the field text inside the segment; None when the
    template transformed the text beyond recognition.
    """
    seg_text = rendered.text[seg.start : seg.end]
    rel = char - seg.start
    fields: list[tuple[str, str]] = []
    if seg.kind in ("system", "message") and 0 <= seg.ref < len(request.messages):
        m = request.messages[seg.ref]
        fields = [("reasoning", m.reasoning or ""), ("content", m.content)]
        fields += [(f"tool_calls[{k}].function.arguments", tc.arguments) for k, tc in enumerate(m.tool_calls)]
    elif seg.kind == "tool" and 0 <= seg.ref < len(request.tools):
        fields = [("description", request.tools[seg.ref].description)]
    pos = 0
    for name, text in fields:
        if not text:
            continue
        at = seg_text.find(text[:200], pos)
        if at < 0:
            continue
        if at <= rel <= at + len(text):
            return name, rel - at
        pos = at
    return None


def message_text_path(m: Message, i: int) -> str:
    """JSON path of message ``i``'s text in the logged record: ``system`` (an Anthropic
    string system prompt), ``system[k].text`` (an Anthropic system block), else
    ``<path>.content`` (``messages[i].content`` when the reader kept no path)."""
    if m.path == "system":
        return "system"
    if m.path.startswith("system["):
        return f"{m.path}.text"
    return f"{m.path or f'messages[{i}]'}.content"


def json_path_of(request: Request, seg: Segment | None, field: str | None) -> str:
    """JSON path of a part in the logged record (``messages[3].content``)."""
    if seg is None:
        return ""
    if seg.kind in ("system", "message") and 0 <= seg.ref < len(request.messages):
        base = request.messages[seg.ref].path or f"messages[{seg.ref}]"
    elif seg.kind == "tool" and 0 <= seg.ref < len(request.tools):
        base = request.tools[seg.ref].path or f"tools[{seg.ref}]"
    else:
        return segment_name(seg)
    return f"{base}.{field}" if field else base


def locate(
    request: Request,
    rendered: RenderedPrompt | None,
    tokens: TokenizedPrompt | None,
    other: RenderedPrompt | None,
    other_tokens: TokenizedPrompt | None,
    token: int,
    redact: bool = False,
    width: int = 40,
) -> Divergence:
    """Map the first differing token ``token`` of ``request`` to its place.

    The part is taken at the first differing *character* of the two rendered texts
    (exact even when tokens merge across a boundary); a divergence inside the hidden
    prefix (pseudo-token ids) reports the ``hidden prefix`` part.
    """
    opaque = tokens.opaque_prefix_tokens if tokens is not None else 0
    if rendered is None or other is None or token < opaque:
        seg = tokens.segment_at(token) if tokens is not None else None
        oseg = other_tokens.segment_at(token) if other_tokens is not None else None
        return Divergence(token, None, segment_name(seg), seg.kind if seg else "end", seg.ref if seg else -1,
                          oseg.kind if oseg else "end", oseg.ref if oseg else -1, segment_name(seg), None, "", "", "")
    char = common_prefix_len(rendered.text, other.text)
    seg = _char_segment(rendered, char)
    oseg = _char_segment(other, char) if char < len(other.text) else None
    line, field = None, None
    if seg is not None:
        found = part_text_offset(request, rendered, seg, char)
        if found is not None:
            field, off = found
            line = _field_text(request, seg, field).count("\n", 0, off) + 1
    text, otext = rendered.text, other.text
    return Divergence(
        token=token, char=char, segment=segment_name(seg), kind=seg.kind if seg else "end",
        ref=seg.ref if seg else -1, other_kind=oseg.kind if oseg else "end", other_ref=oseg.ref if oseg else -1,
        json_path=json_path_of(request, seg, field), line=line,
        before=excerpt(text[max(0, char - width) : char], redact), after=excerpt(text[char : char + width], redact),
        other_after=excerpt(otext[char : char + width], redact),
    )


def _field_text(request: Request, seg: Segment, field: str) -> str:
    if seg.kind == "tool":
        return request.tools[seg.ref].description
    m = request.messages[seg.ref]
    if field == "content":
        return m.content
    if field == "reasoning":
        return m.reasoning or ""
    k = int(field.split("[", 1)[1].split("]", 1)[0])
    return m.tool_calls[k].arguments
