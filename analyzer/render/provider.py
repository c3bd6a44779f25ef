"""Provider layouts: approximate prompts for API models whose server-side rendering is not public.

OpenAI and Anthropic do not publish how they turn a request into tokens. What
is documented is the order their prefix caches see the parts in — **tools →
system → messages** (OpenAI prompt-caching guide; Anthropic prompt-caching docs:
"tools, system, messages, in that order") — and that caching is by exact
prefix. A provider layout therefore writes the parts in that order, each
serialized deterministically (tool schemas as logged, compact JSON; one
``role:`` header per message), so prefix identity, divergence points and the
relative size of each part are right, while absolute token counts are only
approximate. Every :class:`RenderedPrompt` from here has ``exact=False``.

OpenAI's reasoning models (GPT-5 family, o-series, Codex models) get the **harmony**
framing (``provider:openai-harmony``): the message format OpenAI published for gpt-oss
(openai-harmony, "the same format as the Responses API"), with its special tokens from
``o200k_harmony``: ``<|start|>{role}<|message|>…<|end|>`` per message, tool calls
``<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{args}<|call|>``,
tool results ``<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>…<|end|>``.
Measured on two real Codex rollouts (docs/rendering.md) it brings every call within 2%
of the billed count, where the plain layout drifts ~10 tokens low per tool round trip.

DeepSeek's API renders the public DeepSeek-V3.2 encoding: ``provider:deepseek`` is
our ``deepseek_v32.jinja`` template (thinking mode for ``deepseek-reasoner``), chosen
in :mod:`prefixcache.analyzer.prepare.resolve`; with the ``deepseek`` tokenizer its
counts equal the reported ones (``exact=True``).
"""

from __future__ import annotations

import json
from collections import OrderedDict

from prefixcache.analyzer.model import Message, RenderedPrompt, Request, Segment, ToolDef
from prefixcache.analyzer.render.images import placeholder, text_with_parts
from prefixcache.analyzer.render.segments import paint
from prefixcache.analyzer.ingest.jsonio import loads as json_loads


def _compact(obj: object) -> str:
    # stdlib, not orjson: orjson writes floats otherwise (1e-7 as "1e-7", json as "1e-07")
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class ProviderLayout:
    """Tools → system → messages, one deterministic text per part (``exact=False``).

    ``style`` is ``openai`` (tool calls as ``name: arguments`` with the raw argument
    string), ``openai-harmony`` (the harmony framing, see the module doc; its special
    tokens need the ``o200k_harmony`` tokenizer) or ``anthropic`` (``tool_use`` blocks
    with the parsed input, ``tool_result`` blocks). ValueError for another style.
    """

    def __init__(self, style: str) -> None:
        if style not in ("openai", "openai-harmony", "anthropic"):
            raise ValueError(f"unknown provider layout {style!r}")
        self.style = style
        self.name = f"provider:{style}"
        self._names: dict[str, str] = {}  # tool call id -> tool name, for harmony tool results
        self.exact = False
        #: Per session (the 256 most recent), the latest request's index, its messages and their texts, its
        #: tools and their texts, and its spans: a part equal to the one at its place last time is
        #: not laid out again.
        self._last: OrderedDict[str, tuple] = OrderedDict()

    def render(self, request: Request) -> RenderedPrompt:
        """The layout text of ``request`` with exact segment spans (by construction).

        Incremental within a session: a message equal to the one at its place in the session's
        previous request (or the same tool list) is not laid out again, and a part at the same place with the
        same text keeps its segment (the earlier object), so an agent's turn costs its new parts."""
        harmony = self.style == "openai-harmony"
        msgs = request.messages
        self._names = {c.id: c.name for m in msgs for c in m.tool_calls} if harmony else {}
        prev_index, prev_msgs, prev_texts, prev_tools, prev_tool_texts, prev_spans = self._last.get(
            request.session, (-1, (), [], None, [], []))
        n_prev = len(prev_msgs)
        texts = [prev_texts[j] if j < n_prev and (prev_msgs[j] is m or prev_msgs[j] == m) else self._message(m)
                 for j, m in enumerate(msgs)]
        tools = request.tools
        if tools and prev_tools is tools:  # the same objects only: equal dicts may differ in key order
            tool_texts = prev_tool_texts
        else:
            tool_texts = [self._tool(t) + "\n" for t in tools] if tools else []
        pieces: list[tuple[str, str, int, str]] = []  # kind, label, ref, text
        if tools:
            head, tail = ("<|start|>developer<|message|># Tools\n\n", "<|end|>") if harmony else ("tools:\n", "\n")
            pieces.append(("template", "template", -1, head))
            pieces += [("tool", f"tools[{i}]", i, t) for i, t in enumerate(tool_texts)]
            pieces.append(("template", "template", -1, tail))
        system = [m.role in ("system", "developer") for m in msgs]
        pieces += [("system", f"messages[{j}]", j, texts[j]) for j, sys in enumerate(system) if sys]
        pieces += [("message", f"messages[{j}]", j, texts[j]) for j, sys in enumerate(system) if not sys]
        pieces.append(("generation_prompt", "generation_prompt", -1, "<|start|>assistant" if harmony else "assistant:\n"))
        spans, pos, n_spans = [], 0, len(prev_spans)
        for i, (kind, label, ref, piece) in enumerate(pieces):
            end = pos + len(piece)
            old = prev_spans[i] if i < n_spans else None
            if old is not None and old.start == pos and old.end == end and old.ref == ref and old.label == label \
                    and old.kind == kind:
                spans.append(old)
            else:
                spans.append(Segment(kind, label, pos, end, ref))
            pos = end
        if request.index >= prev_index:  # an earlier request laid out again (lint explaining a break) is not kept
            self._last[request.session] = (request.index, msgs, texts, tools, tool_texts, spans)
            self._last.move_to_end(request.session)
            if len(self._last) > 256:
                self._last.popitem(last=False)
        warnings = []
        if any(m.reasoning_opaque for m in request.messages):
            warnings.append("encrypted/redacted reasoning cannot be rendered; its tokens are not counted")
        return RenderedPrompt(
            text="".join([p[3] for p in pieces]), segments=paint(pos, spans), renderer=self.name, exact=False,
            warnings=tuple(warnings), opaque_prefix_tokens=int(request.opaque_prefix_tokens or 0),
        )

    def _tool(self, t: ToolDef) -> str:
        if t.schema:
            return _compact(t.schema)
        key = "input_schema" if self.style == "anthropic" else "parameters"
        return _compact({"name": t.name, "description": t.description, key: dict(t.parameters)})

    def _harmony(self, m: Message) -> str:
        """One message in the harmony framing (assistant turns: one message per channel / call)."""
        if m.role == "tool":
            name = self._names.get(m.tool_call_id or "", "tool")
            return f"<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{text_with_parts(m)}<|end|>"
        if m.role != "assistant":
            return f"<|start|>{m.role}<|message|>{text_with_parts(m)}<|end|>"
        out = []
        if m.reasoning and not m.reasoning_opaque:
            out.append(f"<|start|>assistant<|channel|>analysis<|message|>{m.reasoning}<|end|>")
        if m.content or m.parts:
            out.append(f"<|start|>assistant<|channel|>final<|message|>{text_with_parts(m)}<|end|>")
        for c in m.tool_calls:
            out.append(f"<|start|>assistant<|channel|>commentary to=functions.{c.name} <|constrain|>json"
                       f"<|message|>{c.arguments}<|call|>")
        return "".join(out)

    def _message(self, m: Message) -> str:
        if self.style == "openai-harmony":
            return self._harmony(m)
        role = "tool" if m.role == "tool" else m.role
        body = []
        if m.reasoning and not m.reasoning_opaque:
            body.append(f"<thinking>{m.reasoning}</thinking>")
        if m.role == "tool" and self.style == "anthropic":
            body.append(_compact({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}))
        elif m.content:
            body.append(m.content)
        for c in m.tool_calls:
            if self.style == "anthropic":
                try:
                    args = json_loads(c.arguments, lenient=True)
                except ValueError:
                    args = c.arguments
                body.append(_compact({"type": "tool_use", "id": c.id, "name": c.name, "input": args}))
            else:  # the argument string as sent (raw: escaping it again would bill tokens nobody sends)
                body.append(f"{c.name}: {c.arguments}")
        for p in m.parts:
            body.append(placeholder(p))
        return f"{role}:\n" + "\n".join(body) + "\n\n"
