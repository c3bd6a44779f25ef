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
        #: Per session (the 256 most recent), the previous request's messages and their texts: a
        #: message equal to the one at its place last time is not laid out again.
        self._last: OrderedDict[str, tuple[tuple[Message, ...], list[str]]] = OrderedDict()

    def render(self, request: Request) -> RenderedPrompt:
        """The layout text of ``request`` with exact segment spans (by construction)."""
        pieces: list[tuple[str, str, int, str]] = []  # kind, label, ref, text
        harmony = self.style == "openai-harmony"
        if request.tools:
            head, tail = ("<|start|>developer<|message|># Tools\n\n", "<|end|>") if harmony else ("tools:\n", "\n")
            pieces.append(("template", "template", -1, head))
            for i, t in enumerate(request.tools):
                pieces.append(("tool", f"tools[{i}]", i, self._tool(t) + "\n"))
            pieces.append(("template", "template", -1, tail))
        msgs = request.messages
        self._names = {c.id: c.name for m in msgs for c in m.tool_calls} if harmony else {}
        prev_msgs, prev_texts = self._last.pop(request.session, ((), []))
        texts = [prev_texts[j] if j < len(prev_msgs) and prev_msgs[j] == m else self._message(m)
                 for j, m in enumerate(msgs)]
        self._last[request.session] = (msgs, texts)
        if len(self._last) > 256:
            self._last.popitem(last=False)
        order = [j for j, m in enumerate(msgs) if m.role in ("system", "developer")]
        order += [j for j, m in enumerate(msgs) if m.role not in ("system", "developer")]
        for j in order:
            kind = "system" if msgs[j].role in ("system", "developer") else "message"
            pieces.append((kind, f"messages[{j}]", j, texts[j]))
        pieces.append(("generation_prompt", "generation_prompt", -1, "<|start|>assistant" if harmony else "assistant:\n"))
        text, spans, pos = [], [], 0
        for kind, label, ref, piece in pieces:
            spans.append(Segment(kind, label, pos, pos + len(piece), ref))
            text.append(piece)
            pos += len(piece)
        warnings = []
        if any(m.reasoning_opaque for m in request.messages):
            warnings.append("encrypted/redacted reasoning cannot be rendered; its tokens are not counted")
        return RenderedPrompt(
            text="".join(text), segments=paint(pos, spans), renderer=self.name, exact=False,
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
