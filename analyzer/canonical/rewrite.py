"""Cache-stable rewriting of logged requests (``prefixcache canonicalize``, ``lint --fix``).

Each rewrite keeps what the model is told and makes the rendered prefix identical
wherever only the *form* drifted (the upstream reports in docs/references.md; rule
codes as ``prefixcache rules`` lists them):

======  =====================================================================
PC302   whitespace drift only: a message, system prompt or tool description
        that was sent before in the same form *modulo whitespace* (CRLF/CR vs
        LF, spaces/tabs at line ends, trailing whitespace at the end) is
        restored to the form first sent. Whitespace that is content
        (indentation, blank lines, trailing spaces in a diff, CRLF in a tool
        output seen only once) is never touched
PC101   clock values and (PC102) ids / nonces found by
PC102   :func:`~prefixcache.analyzer.volatile.find_volatile` in the system prompt
        (leading system/developer messages) move, with their line, to the end of
        the newest user turn (or are removed with ``strip_volatile``)
PC303   a message or system prompt sent before as the same text in another
        Unicode normalization form (NFC/NFD) is restored to the form first sent
PC304   the same for a text whose inline JSON objects came back with their keys
        in another order
PC402   a system prompt whose sections (blank-line separated) or lines were sent
        before in another order (the same multiset of lines) is restored to the
        text first sent in the input, as lint's
        :func:`~prefixcache.analyzer.lint.rules.history.reordered` judges it
PC201   a tool set sent before in another order is restored to the order
        first sent in the input (codex #2610, redpanda #157)
PC203   a tool schema sent before with other key order is restored to the
        form first sent (Bifrost #2347)
PC301   a tool call sent before whose arguments come back re-serialized (same
        JSON value, other text) is restored to the text first sent
======  =====================================================================

Only what differs from what the session (tools: the input) already sent is rewritten,
to the form it was first sent in: a log that is already cache-stable comes back
byte-identical, and model-generated tool-call arguments are never re-serialized just
because their form is not canonical (PC301's own advice). Volatile values move only
when their line takes more than one value across the input (:func:`constant_values`).
``CanonicalOptions(normalize=True)`` (``--normalize``) instead writes the canonical forms
everywhere: tools sorted by name, schema keys sorted, arguments compact with sorted
keys (``separators=(",", ":")``, ``ensure_ascii=False``), for inputs whose first forms
are themselves unstable across deployments.

This module only rewrites; it classifies nothing. What the rewrite cannot repair
(system-prompt edits, history rewrites, dropped reasoning, ...) is *reported* by lint
itself: :func:`~prefixcache.analyzer.canonical.causes.with_lint_causes` adds lint's own
findings (``applied=False``), so canonicalize never names a cause lint would not. Messages
are compared by :func:`~prefixcache.analyzer.identity.template_identity` (as the chat
template receives them), so a string and a one-text-block list with the same text are the
same message, as for ``lint``.

Moved values stay attached to the message they were appended to: a
:class:`SessionMemory` remembers, per session, which text was appended to which
user/tool message, so when that message is history in the next request it carries
the same text and the prefix stays append-only.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import ChainMap
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import orjson

from prefixcache.analyzer.identity import MessageIdentity, template_identity
from prefixcache.analyzer.lint.locate import message_text_path
from prefixcache.analyzer.canonical.structure import structural_line, structure_changes
from prefixcache.analyzer.lint.rules.history import reordered
from prefixcache.analyzer.lint.rules.serialization import sorted_json_text
from prefixcache.analyzer.model import Message, Request, ToolDef
from prefixcache.analyzer.sequence import common_prefix_len, common_suffix_len
from prefixcache.analyzer.volatile import TIME_KINDS, VolatileSpan, find_volatile, rule_code
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

#: Codes of the rewrites this module applies (``only`` / ``skip`` filter on them).
APPLIED_CODES = ("PC101", "PC102", "PC201", "PC203", "PC301", "PC302", "PC303", "PC304", "PC402")
#: A line holding a volatile value is moved whole when it is at most this long (chars).
MAX_MOVED_LINE = 160
_TRAILING_WS = re.compile(r"[ \t]+$", re.M)


@dataclass(frozen=True, slots=True)
class Transformation:
    """One rewrite (or, with ``applied=False``, one reported change left as is):
    rule ``code``, a human ``description`` and the ``json_path`` in the request."""

    code: str
    description: str
    json_path: str
    applied: bool = True


@dataclass(frozen=True, slots=True)
class CanonicalOptions:
    """Which rewrites to apply: ``only`` (None = all) and ``skip`` hold rule codes;
    ``strip_volatile`` removes volatile values instead of moving them; ``normalize``
    writes canonical forms everywhere instead of restoring the forms first sent."""

    only: frozenset[str] | None = None
    skip: frozenset[str] = frozenset()
    strip_volatile: bool = False
    normalize: bool = False

    def allows(self, code: str) -> bool:
        return (self.only is None or code in self.only) and code not in self.skip


@dataclass
class SessionMemory:
    """Per-session state across requests: text appended to messages (by
    :func:`~prefixcache.analyzer.identity.template_identity`) and the first whitespace
    form of each text sent (for PC302 drift)."""

    appended: dict[MessageIdentity, str] = field(default_factory=dict)
    #: first form sent, by (role, tool_call_id, whitespace key): messages of this session
    forms: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    #: first form sent of system prompts and tool descriptions (shared by all sessions
    #: of one input, see :func:`canonicalize_all`)
    shared_forms: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)
    #: requests canonicalized in this session, and in the whole input (a counter shared
    #: like ``shared_forms``), for the "first sent in request n" of PC302
    requests: int = 0
    input_requests: list[int] = field(default_factory=lambda: [0])
    #: first arguments text sent per tool call (its id, else (message, call, name)): this session
    arguments: dict[Any, str] = field(default_factory=dict)
    #: first (schema, parameters) sent per tool name and value (keys sorted), and first order per
    #: tool-name set: shared by all sessions of one input, like ``shared_forms``
    tool_forms: dict[tuple[str, bytes], tuple[Any, Any]] = field(default_factory=dict)
    tool_orders: dict[frozenset[str], tuple[str, ...]] = field(default_factory=dict)
    #: first text (and request number) sent per system-message line multiset: shared like ``shared_forms``
    section_forms: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)


def _normalize_ws(text: str) -> str:
    return _TRAILING_WS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def whitespace_key(text: str) -> str:
    """``text`` with the whitespace that drifts without meaning taken out: CRLF/CR → LF,
    spaces/tabs at line ends, and trailing whitespace at the end. Indentation and
    blank lines inside stay, so two texts with equal keys differ only in that drift."""
    return _normalize_ws(text).rstrip()


def _set_text(m: Message, text: str) -> Message:
    """``m`` with new text; ``text_blocks`` follow when the text is one block, the change
    is an append to the last block, or the change lies inside one block (else one block)."""
    if m.text_blocks is None:
        return replace(m, content=text)
    blocks = list(m.text_blocks)
    joined = "\n".join(blocks)
    if blocks and text.startswith(joined):
        blocks[-1] += text[len(joined) :]
    elif len(blocks) <= 1:
        blocks = [text]
    else:
        blocks = _edit_one_block(blocks, joined, text) or [text]
    return replace(m, content=text, text_blocks=tuple(blocks))


def _edit_one_block(blocks: list[str], joined: str, text: str) -> list[str] | None:
    """``blocks`` with the one block that holds every changed character replaced, so
    that ``"\n".join`` gives ``text``; None when the change spans several blocks."""
    p = common_prefix_len(joined, text)
    s = common_suffix_len(joined, text, floor=p)
    start = 0
    for i, b in enumerate(blocks):
        end = start + len(b)
        if start <= p and len(joined) - s <= end:
            out = blocks[:i] + [text[start : len(text) - (len(joined) - end)]] + blocks[i + 1 :]
            return out if "\n".join(out) == text else None
        start = end + 1
    return None


def sort_keys(value: Any) -> Any:
    """A JSON value with every object's keys sorted (lists keep their order)."""
    if isinstance(value, Mapping):
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


def canonical_arguments(arguments: str, inferred: bool = False) -> str | None:
    """Tool-call arguments in the canonical form, or None when they are not JSON.

    Logged strings become compact with sorted keys. Arguments the log held as an
    object (``inferred``: Anthropic ``tool_use.input``) keep the format's own
    serialization (``json.dumps`` defaults) and only get their keys sorted, since
    the provider, not the client, turns that object into text.
    """
    try:
        value = json_loads(arguments, lenient=True)
    except (ValueError, TypeError):
        return None
    if inferred:
        return json.dumps(sort_keys(value))
    return json.dumps(sort_keys(value), ensure_ascii=False, separators=(",", ":"))


def _first_form(forms: dict[tuple[str, str, str], tuple[str, int]], key: tuple[str, str, str], text: str,
                n: int) -> tuple[str, int] | None:
    """The first form (text, request number) sent under ``key`` when it differs from
    ``text``; else None (``text`` is remembered as the first form when the key is new)."""
    first = forms.setdefault(key, (text, n))
    return first if first[0] != text else None


def _whitespace(req: Request, memory: SessionMemory, out: list[Transformation]) -> Request:
    """PC302: restore texts sent before in another whitespace form (drift), never normalize content."""
    msgs = []
    for i, m in enumerate(req.messages):
        system = m.role in ("system", "developer")
        forms = memory.shared_forms if system else memory.forms
        n = memory.input_requests[0] if system else memory.requests
        key = (m.role, m.tool_call_id or "", whitespace_key(m.content))
        first = _first_form(forms, key, m.content, n) if m.content else None
        if first is not None:
            scope = "input" if system else "session"
            out.append(Transformation("PC302", "line endings / trailing whitespace drifted: restored the form "
                                      f"first sent in request {first[1] + 1} of the {scope}", message_text_path(m, i)))
            m = _set_text(m, first[0])  # the logged block structure (images, parts) stays
        msgs.append(m)
    tools = []
    for i, t in enumerate(req.tools):
        first = _first_form(memory.shared_forms, ("tool", t.name, whitespace_key(t.description)), t.description,
                            memory.input_requests[0]) \
            if t.description else None
        if first is not None:
            out.append(Transformation("PC302", f"whitespace of the description of tool {t.name!r} drifted: restored "
                                      f"the form first sent", f"{_tpath(t, i)}.description"))
            t = replace(t, description=first[0], schema=_with_description(t.schema, first[0]))
        tools.append(t)
    return replace(req, messages=tuple(msgs), tools=tuple(tools))


#: Same-meaning drifts restored to the form first sent: code, the key two forms share, what drifted.
_FORM_DRIFTS = (
    ("PC303", lambda t: unicodedata.normalize("NFC", t), "Unicode normalization form (NFC/NFD)"),
    ("PC304", sorted_json_text, "key order of a JSON object in the text"),
)


def _form_drift(req: Request, opts: CanonicalOptions, memory: SessionMemory, out: list[Transformation]) -> Request:
    """PC303 / PC304: a message or system prompt sent before as the same text up to its
    Unicode normalization form, or up to the key order of JSON objects written in it, gets
    the form first sent (system prompts: in the input; other messages: in the session)."""
    msgs = list(req.messages)
    for code, key_of, what in _FORM_DRIFTS:
        if not opts.allows(code):
            continue
        for i, m in enumerate(msgs):
            if not m.content:
                continue
            system = m.role in ("system", "developer")
            forms = memory.shared_forms if system else memory.forms
            n = memory.input_requests[0] if system else memory.requests
            first = _first_form(forms, (code + m.role, m.tool_call_id or "", key_of(m.content)), m.content, n)
            if first is not None:
                out.append(Transformation(code, f"{what} drifted: restored the form first sent in request "
                                          f"{first[1] + 1} of the {'input' if system else 'session'}",
                                          message_text_path(m, i)))
                msgs[i] = _set_text(m, first[0])
    return replace(req, messages=tuple(msgs))


def _with_description(schema: Mapping[str, Any], desc: str) -> dict[str, Any]:
    out = dict(schema)
    if isinstance(out.get("function"), Mapping):
        out["function"] = {**out["function"], "description": desc}
    elif "description" in out:
        out["description"] = desc
    return out


def _path(m: Message, i: int, leaf: str) -> str:
    return f"{m.path or f'messages[{i}]'}.{leaf}"


def _tpath(t: ToolDef, i: int) -> str:
    return t.path or f"tools[{i}]"


def _schema_target(t: ToolDef, opts: CanonicalOptions, memory: SessionMemory) -> tuple[Any, Any, str] | None:
    """(schema, parameters, how) to write for tool ``t``, or None to leave it as sent."""
    if opts.normalize:
        return sort_keys(t.schema), sort_keys(t.parameters), "sorted JSON-schema keys"
    # keyed by name and value (keys sorted): the first-sent key order of this very schema, shared across
    # sessions; another tool of the same name (another agent's run_shell) keeps its own first form
    try:
        value = orjson.dumps([t.schema, t.parameters], option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # deeper than orjson writes: keyed by name alone
        value = b""
    first = memory.tool_forms.setdefault((t.name, value), (t.schema, t.parameters))
    if first[0] == t.schema and first[1] == t.parameters:  # same value (dict equality ignores key order)
        return first[0], first[1], "restored the JSON-schema key order first sent"
    return None


def _tools(req: Request, opts: CanonicalOptions, memory: SessionMemory, out: list[Transformation]) -> Request:
    tools = list(req.tools)
    if opts.allows("PC203"):
        for i, t in enumerate(tools):
            target = _schema_target(t, opts, memory)
            if target is None:
                continue
            schema, params, how = target
            if json.dumps(schema) != json.dumps(t.schema) or json.dumps(params) != json.dumps(t.parameters):
                out.append(Transformation("PC203", f"{how} of tool {t.name!r}", _tpath(t, i)))
                tools[i] = replace(t, schema=schema, parameters=params)
    names = tuple(t.name for t in tools)
    if opts.allows("PC201") and len(set(names)) == len(names):
        order = tuple(sorted(names)) if opts.normalize else memory.tool_orders.setdefault(frozenset(names), names)
        if order != names:
            how = "sorted {n} tools by name" if opts.normalize else "restored the order of the {n} tools first sent"
            out.append(Transformation("PC201", how.format(n=len(tools)), "tools"))
            by_name = {t.name: t for t in tools}
            tools = [by_name[n] for n in order]
    return replace(req, tools=tuple(tools))


def _arguments_target(key: Any, arguments: str, inferred: bool, opts: CanonicalOptions,
                      memory: SessionMemory) -> tuple[str, str] | None:
    """(arguments, how) to write for one tool call, or None to leave it as sent."""
    if opts.normalize:
        canon = canonical_arguments(arguments, inferred)
        return (canon, "sorted keys" if inferred else "sorted keys, compact") if canon is not None else None
    first = memory.arguments.setdefault(key, arguments)
    if first == arguments:
        return None
    a, b = canonical_arguments(first), canonical_arguments(arguments)
    return (first, "restored the text first sent") if a is not None and a == b else None


def _arguments(req: Request, opts: CanonicalOptions, memory: SessionMemory, out: list[Transformation]) -> Request:
    msgs = list(req.messages)
    for i, m in enumerate(msgs):
        calls = []
        for j, tc in enumerate(m.tool_calls):
            target = _arguments_target(tc.id or (i, j, tc.name), tc.arguments, tc.arguments_inferred, opts, memory)
            if target is not None and target[0] != tc.arguments:
                out.append(Transformation("PC301", f"re-serialized arguments of {tc.name!r} ({target[1]})",
                                          _path(m, i, f"tool_calls[{j}].function.arguments")))
                tc = replace(tc, arguments=target[0])
            calls.append(tc)
        if calls and tuple(calls) != m.tool_calls:
            msgs[i] = replace(m, tool_calls=tuple(calls))
    return replace(req, messages=tuple(msgs))


#: What a volatile value left in a structured line is replaced with (stable across requests).
PLACEHOLDER = "[{kind}: see the end of the conversation]"
_LABEL_JUNK = re.compile(r"[<>{}\[\]\"'`#=:|*]+")


def _label(line: str, start: int) -> str:
    """A plain label for a value taken out of a structured line: the words before it
    (``<memory updated="`` → ``memory updated``), without any markup."""
    words = _LABEL_JUNK.sub(" ", line[:start]).split()
    return " ".join(words[-4:])


def _cut(text: str, spans: list[VolatileSpan], strip: bool, whole_lines: bool = True) -> tuple[str, list[str]]:
    """Take volatile ``spans`` out of ``text``: a whole short line that holds no structure
    (:func:`~prefixcache.analyzer.canonical.structure.structural_line`) goes, moved as is;
    in a long or structured line (a tag, a fence, a heading, part of a JSON value) only
    the value goes, replaced by :data:`PLACEHOLDER` (nothing with ``strip``), and the value
    is carried with a plain label. ``whole_lines=False`` replaces values only. Returns
    (text, moved snippets, which carry no markup)."""
    moved: list[str] = []
    cuts: list[tuple[int, int, str]] = []
    for s in spans:
        ls = text.rfind("\n", 0, s.start) + 1
        le = text.find("\n", s.end)
        le = len(text) if le < 0 else le
        if cuts and cuts[-1][0] == ls and cuts[-1][1] >= le:
            continue  # this line is already moved whole
        line = text[ls:le]
        if whole_lines and len(line.strip()) <= MAX_MOVED_LINE and not structural_line(line):
            moved.append(line.strip())
            cuts.append((ls, min(le + 1, len(text)), ""))
        else:
            label = _label(line, s.start - ls)
            moved.append(f"{label} ({s.kind}): {s.text}" if label else f"{s.kind}: {s.text}")
            cuts.append((s.start, s.end, "" if strip else PLACEHOLDER.format(kind=s.kind)))
    for start, end, repl in reversed(cuts):
        text = text[:start] + repl + text[end:]
    return text, moved


def cut_keeping_structure(text: str, spans: list[VolatileSpan], strip: bool
                          ) -> tuple[str, list[str], list[str]]:
    """:func:`_cut`, re-parsed: (text, moved snippets, problems). When moving whole lines
    changed the structure (:func:`~prefixcache.analyzer.canonical.structure.structure_changes`),
    only the values are replaced; when even that changes it, ``text`` comes back as is with
    the problems found (the caller leaves the values in place)."""
    for whole in (True, False):
        new, moved = _cut(text, spans, strip, whole)
        problems = structure_changes(text, new)
        if not problems:
            return new, moved, []
    return text, [], problems


def _target(msgs: list[Message]) -> int | None:
    """Where moved values go: the last message when it is new input (user or tool
    result), else the last user message; None when there is none."""
    if msgs and msgs[-1].role in ("user", "tool"):
        return len(msgs) - 1
    return next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)


def _volatile(req: Request, opts: CanonicalOptions, memory: SessionMemory, keep: frozenset[str],
              out: list[Transformation]) -> Request:
    msgs = list(req.messages)
    n_system = len(req.system_messages)
    moved: list[str] = []
    for i in range(n_system):
        spans = [s for s in find_volatile(msgs[i].content) if opts.allows(rule_code(s)) and s.text not in keep]
        if not spans:
            continue
        text, snippets, problems = cut_keeping_structure(msgs[i].content, spans, opts.strip_volatile)
        if problems:
            out.append(Transformation(rule_code(spans[0]), f"{len(spans)} volatile value(s) left in place: taking "
                                      f"them out would break the structure ({'; '.join(problems)})",
                                      message_text_path(msgs[i], i), applied=False))
            continue
        verb = "removed" if opts.strip_volatile else "moved to the newest user turn"
        for s in spans:
            gran = f", changes every {s.granularity_s:g} s" if s.kind in TIME_KINDS and s.granularity_s else ""
            out.append(Transformation(rule_code(s), f"{s.kind} {s.text!r}{gran}: {verb}", message_text_path(msgs[i], i)))
        msgs[i] = _set_text(msgs[i], text)
        moved += snippets
    target = _target(msgs)
    for i, m in enumerate(msgs):  # history keeps what was appended when it was the newest turn
        remembered = memory.appended.get(template_identity(m))
        if remembered and i != target:
            msgs[i] = _set_text(m, m.content + remembered)
    if moved and not opts.strip_volatile:
        if target is None or target < n_system:
            out.append(Transformation("PC101", "no user turn to move volatile values to: left in place", "messages",
                                      applied=False))
            return req
        suffix = "\n\n" + "\n".join(dict.fromkeys(moved))
        memory.appended[template_identity(msgs[target])] = suffix
        msgs[target] = _set_text(msgs[target], msgs[target].content + suffix)
    elif target is not None and target >= n_system:
        remembered = memory.appended.get(template_identity(msgs[target]))
        if remembered:
            msgs[target] = _set_text(msgs[target], msgs[target].content + remembered)
    return replace(req, messages=tuple(msgs))


def _line_key(text: str) -> tuple[str, ...]:
    """The multiset of a text's non-blank lines (stripped), sorted: equal for two orders of the same sections."""
    return tuple(sorted(ln.strip() for ln in text.splitlines() if ln.strip()))


def _sections(req: Request, memory: SessionMemory, out: list[Transformation]) -> Request:
    """PC402: a system message sent before with the same lines in another order gets the text first sent."""
    msgs = list(req.messages)
    for i in range(len(req.system_messages)):
        m = msgs[i]
        if not m.content.strip():
            continue
        first = memory.section_forms.setdefault((m.role, *_line_key(m.content)), (m.content, memory.input_requests[0]))
        if first[0] == m.content:
            continue
        what = reordered(m.content, first[0])
        if what is None or "renumbered" in what:
            continue
        out.append(Transformation("PC402", f"{what}: restored the order first sent in request {first[1] + 1} of the "
                                  "input", message_text_path(m, i)))
        msgs[i] = _set_text(m, first[0])
    return replace(req, messages=tuple(msgs))


def canonicalize(request: Request, options: CanonicalOptions = CanonicalOptions(),
                 memory: SessionMemory | None = None, keep: frozenset[str] = frozenset()
                 ) -> tuple[Request, list[Transformation]]:
    """One request in cache-stable form, and the transformations applied / reported.

    ``memory`` carries the session's state (pass the same object for every request
    of a session, in order; a fresh one treats the request as the first).
    ``keep`` lists volatile values to leave in place (values that are constant in
    the input). Block-hash traces come back unchanged. Pure apart from ``memory``.
    """
    if request.trace is not None:
        return request, []
    memory = SessionMemory() if memory is None else memory
    out: list[Transformation] = []
    req = request
    if options.allows("PC302"):
        req = _whitespace(req, memory, out)
    req = _form_drift(req, options, memory, out)
    if options.allows("PC101") or options.allows("PC102"):
        req = _volatile(req, options, memory, keep, out)
    if options.allows("PC402"):
        req = _sections(req, memory, out)
    req = _tools(req, options, memory, out)
    if options.allows("PC301"):
        req = _arguments(req, options, memory, out)
    memory.requests += 1
    memory.input_requests[0] += 1
    return req, out


@dataclass(frozen=True, slots=True)
class Canonicalized:
    """One request before and after, with its transformations (applied and reported).

    ``steps`` (filled by ``canonicalize_all(..., steps=True)``): one (rule code, request)
    per rule applied to this request, in the order applied; each request is the logged one
    with that rule and the rules before it applied (the last one is :attr:`request`), so the
    change of rule k is step k−1 → step k (step 0: :attr:`original`)."""

    original: Request
    request: Request
    transformations: tuple[Transformation, ...]
    steps: tuple[tuple[str, Request], ...] = ()


#: SessionMemory fields that hold dicts (a scratch copy layers them, :func:`_scratch`).
_DICT_FIELDS = ("appended", "forms", "shared_forms", "arguments", "tool_forms", "tool_orders", "section_forms")


def _scratch(memory: SessionMemory) -> SessionMemory:
    """A copy of ``memory`` that reads through to it and writes to layers of its own
    (:class:`collections.ChainMap`, O(1)); :func:`_commit` makes its writes the memory's."""
    layered = {name: ChainMap({}, getattr(memory, name)) for name in _DICT_FIELDS}
    return SessionMemory(**layered, requests=memory.requests, input_requests=[memory.input_requests[0]])


def _commit(scratch: SessionMemory, memory: SessionMemory) -> None:
    for name in _DICT_FIELDS:
        getattr(memory, name).update(getattr(scratch, name).maps[0])
    memory.requests = scratch.requests
    memory.input_requests[0] = scratch.input_requests[0]


def _rule_steps(request: Request, options: CanonicalOptions, memory: SessionMemory, keep: frozenset[str],
                final: Request, log: list[Transformation]) -> tuple[tuple[str, Request], ...]:
    """Per rule applied to ``request`` (codes in the order of ``log``), the request with that
    rule and the ones before it applied: the same rewrite with the later rules skipped, on a
    scratch copy of the session's ``memory`` as it was before ``request``."""
    codes = list(dict.fromkeys(t.code for t in log if t.applied))
    out = []
    for j, code in enumerate(codes[:-1]):
        partial = replace(options, skip=options.skip | frozenset(codes[j + 1 :]))
        out.append((code, canonicalize(request, partial, _scratch(memory), keep)[0]))
    return (*out, (codes[-1], final)) if codes else ()


def constant_values(requests: Iterable[Request], min_count: int = 2) -> frozenset[str]:
    """Volatile values of system prompts that never change across the input.

    A value counts as constant when its line (with the value blanked out) occurs in
    at least ``min_count`` requests and always with the same value; moving it would
    gain nothing (a fixed knowledge-cutoff date, a constant deployment id).
    :func:`canonicalize_all` passes ``min_count=1`` (a value seen once has not drifted)
    unless it normalizes.
    """
    seen: dict[tuple, set[str]] = {}
    count: dict[tuple, int] = {}
    for r in requests:
        for i, m in enumerate(r.system_messages):
            for s, blanked in _blanked_lines(_normalize_ws(m.content)):
                slot = (i, *blanked)
                seen.setdefault(slot, set()).add(s.text)
                count[slot] = count.get(slot, 0) + 1
    return frozenset(v for slot, vals in seen.items() if len(vals) == 1 and count[slot] >= min_count for v in vals)


def _blanked_lines(text: str) -> list[tuple[VolatileSpan, tuple[int, bytes, int, bytes]]]:
    """Each volatile span of ``text`` with a key of its line with the value blanked out:
    (length, BLAKE2b digest) of the line before the value and of the line after it.

    Linear in the text: line bounds are found from the previous span on, and the
    digests of spans sharing a line are built incrementally (a line of 1 MB holding
    20,000 values is hashed once each way, not copied per value).
    """
    spans = find_volatile(text)
    bounds, ls, le, last = [], 0, -1, 0
    for sp in spans:  # (line start, line end) per span, as rfind/find from the span would give
        nl = text.rfind("\n", last, sp.start)
        ls = nl + 1 if nl >= 0 else ls
        last = sp.start
        if le < sp.end:
            le = text.find("\n", sp.end)
            le = len(text) if le < 0 else le
        bounds.append((ls, le))
    out: list[tuple[VolatileSpan, tuple[int, bytes, int, bytes]]] = []
    k = 0
    while k < len(spans):
        j = k
        while j < len(spans) and bounds[j] == bounds[k]:
            j += 1
        out += _line_keys(text, spans[k:j], *bounds[k])
        k = j
    return out


def _line_keys(text: str, spans: list[VolatileSpan], ls: int, le: int) -> list[tuple[VolatileSpan, tuple[int, bytes, int, bytes]]]:
    """:func:`_blanked_lines` keys of the spans of one line ``text[ls:le]``."""
    def enc(piece: str) -> bytes:
        return piece.encode("utf-8", "surrogatepass")

    before, h, pos = [], hashlib.blake2b(digest_size=16), ls
    for sp in spans:
        h.update(enc(text[pos : sp.start]))
        pos = sp.start
        before.append((sp.start - ls, h.copy().digest()))
    after, h, pos = [], hashlib.blake2b(digest_size=16), le
    for sp in reversed(spans):  # the text after each value, hashed from the line's end backwards
        h.update(enc(text[sp.end : pos][::-1]))
        pos = sp.end
        after.append((le - sp.end, h.copy().digest()))
    return [(sp, (*b, *a)) for sp, b, a in zip(spans, before, reversed(after))]


def canonicalize_all(requests: Iterable[Request], options: CanonicalOptions = CanonicalOptions(),
                     steps: bool = False) -> list[Canonicalized]:
    """Canonicalize a whole input in order, one :class:`SessionMemory` per session.

    Values that are constant across the input (:func:`constant_values`) stay put. With
    ``steps`` every result carries its per-rule steps (:attr:`Canonicalized.steps`; a request
    with several rules is rewritten once more per rule but the last, on scratch memory).
    """
    reqs = list(requests)
    keep = constant_values((r for r in reqs if r.trace is None), 2 if options.normalize else 1)
    sessions: dict[str, SessionMemory] = {}
    shared: dict = {}  # system prompts and tool descriptions: first forms across sessions
    forms: dict = {}  # tool schemas and orders: first forms across sessions
    orders: dict = {}
    section_forms: dict = {}  # system prompts' first section orders: across sessions
    counter = [0]
    out = []
    for r in reqs:
        memory = sessions.setdefault(r.session, SessionMemory(shared_forms=shared, input_requests=counter,
                                                              tool_forms=forms, tool_orders=orders,
                                                              section_forms=section_forms))
        if not steps:
            new, log = canonicalize(r, options, memory, keep)
            out.append(Canonicalized(r, new, tuple(log)))
            continue
        scratch = _scratch(memory)
        new, log = canonicalize(r, options, scratch, keep)
        per_rule = _rule_steps(r, options, memory, keep, new, log)
        _commit(scratch, memory)
        out.append(Canonicalized(r, new, tuple(log), per_rule))
    return out


def canonicalize_requests(requests: Iterable[Request], options: CanonicalOptions = CanonicalOptions()
                          ) -> list[Request]:
    """The canonical requests only, in input order (for ``replay`` and ``lint --fix``)."""
    return [c.request for c in canonicalize_all(requests, options)]

