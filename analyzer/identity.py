"""Message identity, in the shared kernel: when two logged messages are "the same message".

Two identities, for two different questions, named for what they are:

* :func:`template_identity` — **exact**: the message as the chat template receives
  it (role, text as text parts, tool calls with their raw arguments, ids, name,
  reasoning, non-text parts). Equal identities render equal, whatever the logged
  *form* (a string vs a list holding one text block, the message's JSON path, an
  Anthropic cache breakpoint). Used wherever a change of the prompt is judged:
  the lint rules (``PairContext.r_keys``, the history classifier) and
  ``canonicalize`` (which text was appended to which message, reported history
  changes).
* :func:`chaining_key` — **deliberately loose**: a 64-bit digest that ignores
  exactly the bytes that drift between calls of one conversation (whitespace
  runs, tool-call arguments, system prompts are not passed to it), so session
  grouping (:mod:`prefixcache.analyzer.ingest.sessions`, rule 4) still recognises a
  conversation whose prompt drifted. Never use it to judge a cache break.
"""

from __future__ import annotations

from dataclasses import dataclass

import xxhash

from prefixcache.analyzer.model import ContentPart, Message


@dataclass(frozen=True, slots=True)
class MessageIdentity:
    """A message as the chat template receives it (hashable, compared field by field).

    ``text_parts`` are the text blocks as the template gets them (one part for a
    plain string); ``tool_calls`` are ``(id, name, arguments as logged)``;
    ``reasoning`` is None when there is none or it is opaque (encrypted or
    redacted reasoning is sent as a blob the template never sees as text:
    ``reasoning_opaque`` marks it); ``parts`` are the non-text parts.
    """

    role: str
    text_parts: tuple[str, ...]
    tool_calls: tuple[tuple[str, str, str], ...]
    tool_call_id: str | None
    name: str | None
    reasoning: str | None
    reasoning_opaque: bool
    parts: tuple[ContentPart, ...]


def template_identity(m: Message) -> MessageIdentity:
    """The exact identity of ``m`` as the chat template receives it (see module doc):
    its JSON ``path``, ``cache_control`` breakpoint and whether its text was logged as
    a string or as one text block do not count."""
    return MessageIdentity(
        role=m.role,
        text_parts=m.text_blocks if m.text_blocks is not None else (m.content,),
        tool_calls=tuple((c.id, c.name, c.arguments) for c in m.tool_calls),
        tool_call_id=m.tool_call_id,
        name=m.name,
        reasoning=None if m.reasoning_opaque else m.reasoning,
        reasoning_opaque=m.reasoning_opaque,
        parts=m.parts,
    )


def chaining_key(m: Message) -> int:
    """The loose 64-bit session-chaining key of ``m``: role, whitespace-collapsed text,
    tool-call ids and names (not their arguments), ``tool_call_id``, ``name`` and the
    non-text parts' types (not their digests: a replaced image is named by lint, PC404). Equal for re-sends whose whitespace or tool-call
    serialization drifted; not an identity (see module doc)."""
    h = xxhash.xxh64()
    h.update(m.role.encode())
    h.update(b"\x00" + " ".join(m.content.split()).encode("utf-8", "surrogatepass"))
    for tc in m.tool_calls:
        h.update(b"\x01" + tc.id.encode() + b"\x02" + tc.name.encode())
    h.update(b"\x03" + (m.tool_call_id or "").encode() + b"\x04" + (m.name or "").encode())
    for p in m.parts:  # the type only: an image re-encoded or replaced in the history is the same conversation
        h.update(b"\x05" + p.type.encode())
    return h.intdigest()
