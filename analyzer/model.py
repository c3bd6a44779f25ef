"""The one request model every log format is read into.

A :class:`Request` is one model call as the serving engine saw it: the system
prompt(s), the tool schemas, and the message list, in the order the client sent
them, plus what the provider reported about it (:class:`Usage`) and where it came
from (:class:`Provenance`).

Conventions
-----------
* System / developer prompts are ordinary messages (``role="system"`` or
  ``"developer"``) at the front of ``messages``. Anthropic's top-level ``system``
  becomes one system message per text block, so every format renders the same way.
* Tool results are messages with ``role="tool"`` (an Anthropic user message holding
  ``tool_result`` blocks becomes one tool message per block, followed by a user
  message for any remaining text).
* Assistant tool calls keep the arguments exactly as logged (``arguments`` is the
  raw JSON *string*), because re-serialization is itself a cache-breaking cause.
* Tool schemas keep the logged JSON (``ToolDef.schema``) with key order intact.
* ``path`` on messages and tools is the JSON path inside the original record
  (``messages[3]``, ``tools[0]``, ``system[1]``), so findings can point back at it.
* Times are seconds (float, UNIX epoch when the log has absolute times, otherwise
  relative to the log's origin). Token counts are ints.
* Everything is frozen; containers are tuples. JSON payloads (schemas, extras) are
  plain dicts by necessity: treat them as read-only.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

Role = Literal["system", "developer", "user", "assistant", "tool"]

#: Parts of a request a reader can report as observed (logged verbatim) or inferred. ``cache_control``:
#: the request body's cache marks (Anthropic ``cache_control``, OpenAI ``prompt_cache_breakpoint``) are
#: logged, so their absence means the request set none (an agent transcript does not log them).
PARTS = ("system", "tools", "messages", "usage", "timestamp", "model", "cache_control")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An assistant's call of a tool.

    ``arguments`` is the raw JSON text as logged (OpenAI ``function.arguments``);
    for formats that log an object (Anthropic ``tool_use.input``) it is the
    object serialized with the format's own serializer (``json.dumps`` defaults,
    as the Anthropic SDK sends it), and ``arguments_inferred`` is True.
    """

    id: str
    name: str
    arguments: str
    arguments_inferred: bool = False
    kind: str = "function"  # "function" | "custom" (Responses freeform) | ...


@dataclass(frozen=True, slots=True)
class ContentPart:
    """A non-text piece of a message (image, document, audio, file).

    Its presence and a stable digest matter for prefix analysis: for an image the digest
    of its content (``sha256:…``, or ``url:…`` when only a URL is logged), so the same
    picture resent is the same part; for other parts the digest of the logged JSON.
    """

    type: str
    digest: str = ""
    text: str = ""
    #: An image's size in pixels when its bytes are logged, and its requested ``detail``
    #: (OpenAI ``low`` / ``high`` / ``auto``): :mod:`prefixcache.analyzer.ingest.images`.
    width: int | None = None
    height: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the prompt.

    ``content`` is the concatenated text (text blocks joined with ``"\\n"`` only when
    the format sent a list; ``text_blocks`` keeps the blocks when it did, so a
    renderer can rebuild them). ``reasoning`` is thinking / reasoning text sent back
    to the model (Anthropic ``thinking`` blocks, DeepSeek ``reasoning_content``,
    Responses ``reasoning`` summaries); ``reasoning_opaque`` marks encrypted or
    redacted reasoning whose tokens cannot be known.
    """

    role: Role
    content: str = ""
    text_blocks: tuple[str, ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    reasoning_opaque: bool = False
    parts: tuple[ContentPart, ...] = ()
    cache_control: str | None = None  # Anthropic breakpoint TTL ("5m" / "1h") when marked
    path: str = ""


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One tool schema as sent.

    ``schema`` is the logged object (OpenAI ``{"type":"function","function":{...}}``,
    Responses flat ``{"type":"function","name":...}``, Anthropic ``{name,
    description, input_schema}``) with key order preserved; ``parameters`` is the
    JSON Schema of the arguments inside it (``{}`` when none).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    schema: Mapping[str, Any] = field(default_factory=dict)
    cache_control: str | None = None
    path: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """Provider-reported token counts for one call (tokens).

    ``prompt_tokens`` is the whole prompt (for Anthropic: input + cache_creation +
    cache_read); ``cached_tokens`` the prefix served from cache (OpenAI
    ``cached_tokens``, Anthropic ``cache_read_input_tokens``, DeepSeek
    ``prompt_cache_hit_tokens``); ``cache_write_tokens`` the tokens written to the
    cache (Anthropic ``cache_creation_input_tokens``). ``None`` = not reported.
    """

    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a request came from: file (``-`` for stdin), 1-based line or record
    number inside it, and a pointer within that record (e.g. ``trajectory[4]``).

    ``line`` is the 1-based line of the file where the record starts when that is
    known (JSONL records, a whole-file document); None for items inside one JSON
    document (a trajectory step), whose line numbers a streaming reader doesn't track.
    """

    source: str
    record: int
    pointer: str = ""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class BlockTrace:
    """A request known only by its block hashes (Mooncake, Bailian, kv-cache-tester).

    ``hash_ids`` are prefix-chained block ids (equal id ⇒ equal prefix up to and
    including that block); ``block_size`` is in tokens; ``input_length`` tokens.
    """

    hash_ids: tuple[int, ...]
    block_size: int
    input_length: int
    output_length: int | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """One model call.

    ``session`` groups the calls of one conversation (or subagent); ``index`` is
    the 0-based position inside it. ``observed`` names the :data:`PARTS` that were
    logged verbatim; anything else was inferred, and ``notes`` say how.
    ``opaque_prefix_tokens`` is the length (tokens) of a hidden shared prefix the
    log does not contain (Claude Code's system prompt and tools), inferred from
    usage. ``trace`` is set instead of messages for block-hash traces.
    ``extra`` holds routing/cache keys (``prompt_cache_key``, ``cache_salt``,
    ``user``, ``metadata``) and anything format-specific worth keeping.
    """

    session: str
    index: int
    format: str
    provenance: Provenance
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolDef, ...] = ()
    model: str | None = None
    timestamp: float | None = None
    usage: Usage | None = None
    observed: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()
    opaque_prefix_tokens: int | None = None
    trace: BlockTrace | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def system_messages(self) -> tuple[Message, ...]:
        """The leading system/developer messages (the system prompt)."""
        out = []
        for m in self.messages:
            if m.role not in ("system", "developer"):
                break
            out.append(m)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input record that was not turned into a request, and why.

    ``bad`` is True for unreadable records (truncated JSON, wrong schema): they
    make a run exit 2 unless ``--skip-bad``. ``bad=False`` marks a readable record
    that is deliberately not a model call worth noting (an unknown record type of
    a known format, an API error line): reported, never fatal.
    """

    source: str
    record: int
    reason: str
    field: str = ""
    bad: bool = True


@dataclass(frozen=True, slots=True)
class Segment:
    """A span of a rendered prompt attributable to one part of the request.

    ``kind`` is one of ``system``, ``tool``, ``message``, ``generation_prompt``,
    ``template`` (text the template adds outside any part), ``opaque`` (hidden
    prefix of known length only). ``label`` is the human/JSON-path name
    (``system``, ``tools[2]``, ``messages[5]``). ``start``/``end`` are character
    offsets in the rendered text for :class:`RenderedPrompt`, token offsets in a
    tokenized prompt; ``end`` is exclusive. ``ref`` is the index of the tool or
    message the span belongs to (-1 for none).
    """

    kind: str
    label: str
    start: int
    end: int
    ref: int = -1


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """A request rendered to the exact prompt text the engine tokenizes.

    ``segments`` cover ``text`` in order with character offsets. ``renderer`` names
    the template or provider layout; ``exact`` is False for provider layouts whose
    server-side rendering is not public. ``warnings`` list what the template dropped
    (tools, reasoning, fields). ``opaque_prefix_tokens`` carries
    :attr:`Request.opaque_prefix_tokens` (hidden prefix, tokens) through.
    """

    text: str
    segments: tuple[Segment, ...]
    renderer: str
    exact: bool = True
    warnings: tuple[str, ...] = ()
    opaque_prefix_tokens: int = 0


def compact_ids(ids: Iterable[int]) -> array:
    """Token ids as a compact array: ``array('I')`` (unsigned 32-bit, 4 bytes a token)
    when every id fits, else ``array('q')`` (signed 64-bit: hidden-prefix pseudo-ids are
    negative). An array of either kind is returned as it is. Arrays compare with ``==``
    and slice like tuples (and compare equal across the two kinds), but never equal a
    tuple or list: keep one kind per comparison (``tuple(ids)`` where a tuple is needed).
    """
    if isinstance(ids, array) and ids.typecode in ("I", "q"):
        return ids
    values = ids if isinstance(ids, (list, tuple)) else list(ids)
    try:
        return array("I", values)
    except OverflowError:
        return array("q", values)


@dataclass(frozen=True, slots=True)
class TokenizedPrompt:
    """Token ids of a rendered prompt, with segment spans in token offsets.

    ``ids`` is a compact array (:func:`compact_ids`): ``array('I')``, 4 bytes a token,
    or ``array('q')`` (8 bytes) when it holds pseudo-token ids. When the request has a
    hidden prefix (``opaque_prefix_tokens`` > 0), ``ids`` starts with that many
    pseudo-token ids (negative ints, stable for the same hidden prefix key) so prefix
    and cache models treat it as shared content. ``exact`` is False when the tokenizer
    or the layout is approximate.
    """

    ids: Sequence[int]
    segments: tuple[Segment, ...]
    tokenizer: str
    exact: bool = True
    opaque_prefix_tokens: int = 0
    #: Tokens standing for images (their placeholders replaced by the provider's published count
    #: of pseudo-ids per image, :func:`prefixcache.analyzer.tokenize.session.with_images`), included in ``ids``.
    image_tokens: int = 0

    def segment_at(self, token: int) -> Segment | None:
        """The segment holding token offset ``token`` (None past the end)."""
        for seg in self.segments:
            if seg.start <= token < seg.end:
                return seg
        return None
