"""Hugging Face chat-template rendering with transformers' semantics, without transformers.

The environment matches ``transformers.utils.chat_template_utils`` (v4.4x–5.x):
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with the
``loopcontrols`` extension and a no-op ``{% generation %}`` block; ``tojson`` is
``json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)`` (no HTML
escaping, unlike Jinja's own); globals ``raise_exception`` (raises
``TemplateError``), ``strftime_now``, ``dict`` and ``namespace``. Render variables
are ``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the
special-token strings (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``),
as ``apply_chat_template`` passes them.

Messages are converted to the dicts templates expect, as vLLM's OpenAI server
hands them to the template: ``content`` as one string, ``tool_calls`` in OpenAI
shape with ``arguments`` parsed to an object when it is valid JSON (vLLM parses
them before rendering; templates ``tojson`` them), ``tool_call_id``/``name`` on
tool results, ``reasoning_content`` for reasoning; keys whose value is None are
dropped and reasoning is aliased to ``thinking`` as transformers 5 does.

``strftime_now`` formats the request's own timestamp (UTC) when it has one, so
rendering is deterministic and matches what the engine saw that day.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timezone
from typing import Any, Callable

from jinja2 import TemplateError

from prefixcache.analyzer.model import Message, Request, ToolDef
from prefixcache.analyzer.render import worker
from prefixcache.analyzer.render.sandbox import (BoundedSandbox, RenderLimitError, bounded_filter, compile_source,
                                                 render_bounded)
from prefixcache.analyzer.ingest.jsonio import loads as json_loads

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    """The ``tojson`` filter as transformers defines it for chat templates: ``json.dumps``
    with non-ASCII kept and keys in insertion order unless ``sort_keys`` (Jinja's own
    ``tojson`` sorts keys and HTML-escapes, which no engine does)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=64)
def compile_template(source: str, name: str = "") -> Any:
    """A compiled Jinja template for a chat-template string (cached per string), in the
    bounded sandbox (:mod:`.sandbox`: time, size and recursion limits).

    Raises ``jinja2.TemplateSyntaxError`` for malformed templates and
    :class:`~.sandbox.RenderLimitError` for one nested too deeply to compile.
    """
    import jinja2
    import jinja2.ext

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` renders its body (transformers tracks it for masks)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = bounded_filter("tojson", tojson, env.cap)
    env.globals["raise_exception"] = raise_exception
    env.globals["dict"] = dict
    return compile_source(env, source, name or "(inline)")


def parse_arguments(raw: str) -> Any:
    """Tool-call arguments as the template sees them: the parsed JSON value, or the raw string if not JSON."""
    try:
        return json_loads(raw, lenient=True)
    except (ValueError, TypeError):
        return raw


_CONTENT_LOOP = re.compile(r"for\s+\w+\s+in\s+\w+\s*(?:\[\s*['\"]content['\"]\s*\]|\.content)")


def content_format(source: str) -> str:
    """``openai`` when the template loops over a message's content (expects a list of parts), else ``string``.

    The rule vLLM applies (``--chat-template-content-format auto``), done here by
    pattern instead of walking the Jinja AST.
    """
    return "openai" if _CONTENT_LOOP.search(source) else "string"


def message_dict(m: Message, arguments: str = "object", content: str = "string") -> dict[str, Any]:
    """The template dict for one message (see module docstring).

    ``arguments``: ``object`` (parsed JSON) or ``string``; ``content``: ``string``
    or ``openai`` (a list of ``{"type": "text", "text": ...}`` parts, one per text block).
    """
    body: Any = m.content
    if content == "openai":
        body = [{"type": "text", "text": t} for t in (m.text_blocks if m.text_blocks is not None else (m.content,))]
    d: dict[str, Any] = {"role": m.role, "content": body}
    if m.tool_calls:
        d["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": parse_arguments(c.arguments) if arguments == "object" else c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        d["name"] = m.name
    if m.reasoning is not None and not m.reasoning_opaque:
        d["reasoning_content"] = m.reasoning
    return d


def alias_reasoning(d: dict[str, Any]) -> dict[str, Any]:
    """transformers 5: drop None values, and copy reasoning to ``thinking`` (first) and ``reasoning_content`` (last)."""
    d = {k: v for k, v in d.items() if v is not None}
    r = next((d[k] for k in _REASONING_FIELDS if d.get(k) is not None), None)
    return {"thinking": r, **d, "reasoning_content": r} if r is not None else d


def tool_dict(t: ToolDef) -> dict[str, Any]:
    """The tool schema in OpenAI chat shape (``{"type": "function", "function": {...}}``), key order kept."""
    s = dict(t.schema) if t.schema else {}
    if isinstance(s.get("function"), dict):
        return s
    fn: dict[str, Any] = {"name": t.name}
    if t.description:
        fn["description"] = t.description
    fn["parameters"] = dict(t.parameters) if t.parameters else {"type": "object", "properties": {}}
    return {"type": "function", "function": fn}


class JinjaChat:
    """A compiled chat template plus its special-token variables; renders plain dicts.

    ``render(messages, tools, add_generation_prompt, now)`` returns the prompt text
    (``now``: UNIX seconds for ``strftime_now``, None = current time); ``render_many`` renders
    several variants of one request in one call. Template errors propagate as
    ``jinja2.TemplateError``; a sandbox bound as :class:`~.sandbox.RenderLimitError`.

    ``trusted`` is True only for the templates this package ships (``templates/*.jinja``):
    they render in this process, in the bounded sandbox (time, size and recursion bounds).
    Every other template (a ``.jinja`` file, a tokenizer's own template) is untrusted code and
    renders in the render worker (:mod:`.worker`), whose address-space cap and kill timer also
    stop a C-level loop the sandbox cannot see into (issue 28).
    """

    def __init__(self, source: str, special: dict[str, str | None] | None = None, extra: dict[str, Any] | None = None,
                 name: str = "", trusted: bool = False) -> None:
        self.source, self.name, self.trusted = source, name, trusted
        self._run = _in_process if trusted else worker.run
        self._run(_compile, source, name)  # syntax errors now, and a compile bounded like a render
        self.special = {k: v for k, v in (special or {}).items() if v is not None}
        self.extra = dict(extra or {})
        self.content_format = content_format(source)

    def _variables(self, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool,
                   aliased: bool = False) -> dict[str, Any]:
        return dict(messages=messages if aliased else [alias_reasoning(m) for m in messages], tools=tools, documents=None,
                    add_generation_prompt=add_generation_prompt, **self.special, **self.extra)

    def render(self, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool, now: float | None = None) -> str:
        """The prompt text (in the render worker unless ``trusted``: hard time and memory bounds)."""
        return self._run(_render_chat, self.source, self.name, self._variables(messages, tools, add_generation_prompt), now)

    def render_many(self, calls: list[tuple[list[dict], list[dict] | None, bool]], now: float | None = None) -> list[Any]:
        """One render per ``(messages, tools, add_generation_prompt)`` of ``calls``, in one trip to the
        render worker: a list of the texts, in order, where a render the template rejected holds its
        exception (a ``TemplateError`` or the error of template code failing on this data). A sandbox
        bound (:class:`~.sandbox.RenderLimitError`) is raised, not returned: it ends the whole batch.
        Messages shared by several calls are sent once (pickle keeps one copy of a shared object).
        """
        if not calls:
            return []
        aliased: dict[int, dict[str, Any]] = {}  # the calls share message dicts (``msgs[:j]``): alias each once
        variables = [self._variables([aliased[id(m)] if id(m) in aliased else aliased.setdefault(id(m), alias_reasoning(m))
                                      for m in ms], ts, gen, aliased=True) for ms, ts, gen in calls]
        return self._run(_render_batch, self.source, self.name, variables, now)


def _in_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` here: a shipped template's render (the sandbox's own bounds still apply)."""
    return fn(*args)


def _compile(source: str, name: str) -> None:
    """In the render worker: compile (and cache) a chat template; its errors go back to the caller."""
    compile_template(source, name)


def _render_chat(source: str, name: str, variables: dict[str, Any], now: float | None) -> str:
    """In the render worker: one render of a chat template (compiled once per worker)."""
    when = datetime.fromtimestamp(now, tz=timezone.utc) if now is not None else datetime.now()
    return render_bounded(compile_template(source, name), {**variables, "strftime_now": when.strftime})


def _render_batch(source: str, name: str, batch: list[dict[str, Any]], now: float | None) -> list[Any]:
    """In the render worker: several renders of one chat template; a template's rejection of one is
    returned in its place, a sandbox bound raised (see :meth:`JinjaChat.render_many`)."""
    out: list[Any] = []
    for variables in batch:
        try:
            out.append(_render_chat(source, name, variables, now))
        except RenderLimitError:
            raise
        except Exception as exc:  # noqa: BLE001 - the template rejects this variant: the caller decides
            out.append(exc if isinstance(exc, TemplateError) else TemplateError(str(exc)))  # one that pickles
    return out


def request_dicts(req: Request, arguments: str = "object", content: str = "string") -> tuple[list[dict], list[dict] | None]:
    """``(messages, tools)`` of a request as template data (tools None when the request has none)."""
    msgs = [message_dict(m, arguments, content) for m in req.messages]
    tools = [tool_dict(t) for t in req.tools] if req.tools else None
    return msgs, tools
