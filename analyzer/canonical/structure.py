"""The structure of a prompt text, re-parsed after every rewrite to prove the rewrite kept it.

A cache-stable rewrite may move a volatile line or replace a volatile value with a stable
placeholder; it must never leave an orphan ``</memory>``, open a code fence it does not
close, drop a Markdown heading or break a JSON value (issue 24 item 1). :func:`structure`
reads what a rewrite has to keep, and :func:`structure_changes` names every difference:

* **tag blocks**: the sequence of XML-like opening and closing tags (``<memory …>``,
  ``</memory>``; self-closing tags and tags with spaces or ``｜`` in the name, such as chat
  special tokens, are not blocks), in order;
* **code fences**: how many lines open or close a fence (```` ``` ```` or ``~~~``);
* **Markdown sections**: the levels of the ``#`` headings outside fences, in order;
* **JSON values**: how many paragraphs (blank-line separated) and fenced blocks parse as
  JSON objects or arrays.

The original need not be well-formed (real prompts quote half a fence in prose): a rewrite
is judged on whether it changed any of these, not on an ideal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prefixcache.analyzer.ingest.jsonio import loads as json_loads

_TAG = re.compile(r"<(/?)([A-Za-z][\w.:-]*)(?:\s[^<>]*?)?(/?)>")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+\S")
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True, slots=True)
class Structure:
    """What a rewrite must keep of a text: its tag sequence (``("open"|"close", name)``), the
    number of fence lines, the heading levels in order and the number of JSON blocks."""

    tags: tuple[tuple[str, str], ...]
    fences: int
    headings: tuple[int, ...]
    json_blocks: int


def _is_json(block: str) -> bool:
    block = block.strip()
    if not block or block[0] not in "{[":
        return False
    try:
        json_loads(block)  # the one JSON entry point: depth-limited, never a RecursionError
    except ValueError:
        return False
    return True


def structure(text: str) -> Structure:
    """The :class:`Structure` of ``text`` (linear in its length)."""
    tags = tuple(("close" if m.group(1) else "open", m.group(2)) for m in _TAG.finditer(text) if not m.group(3))
    fences, headings, fenced, body = 0, [], False, []
    json_blocks = 0
    for line in text.splitlines():
        if _FENCE.match(line):
            fences += 1
            if fenced:
                json_blocks += _is_json("\n".join(body))
                body = []
            fenced = not fenced
            continue
        if fenced:
            body.append(line)
        elif (m := _HEADING.match(line)) is not None:
            headings.append(len(m.group(1)))
    json_blocks += sum(_is_json(p) for p in _PARAGRAPHS.split(text))
    return Structure(tags, fences, tuple(headings), json_blocks)


def structure_changes(before: str, after: str) -> list[str]:
    """How ``after`` departs from ``before``'s structure, one phrase per kind ([] when it kept it)."""
    a, b = structure(before), structure(after)
    out = []
    if a.tags != b.tags:
        out.append(f"tag blocks changed ({len(a.tags)} → {len(b.tags)} tags, or in another order)")
    if a.fences != b.fences:
        out.append(f"code fences changed ({a.fences} → {b.fences} fence lines)")
    if a.headings != b.headings:
        out.append(f"Markdown sections changed ({len(a.headings)} → {len(b.headings)} headings)")
    if a.json_blocks != b.json_blocks:
        out.append(f"JSON values changed ({a.json_blocks} → {b.json_blocks} valid JSON blocks)")
    return out


def structural_line(line: str) -> bool:
    """True when moving ``line`` out of its text could break a structure: it holds an XML-like
    tag, opens or closes a fence, is a heading, or looks like part of a JSON value."""
    s = line.strip()
    return bool(_TAG.search(s) or _FENCE.match(s) or _HEADING.match(s)
                or (s != "" and s[0] in "{[]}\"") or s.endswith((",", "{", "[")))
