"""Render a :class:`Request` through a chat template into a :class:`RenderedPrompt` with segments.

:class:`JinjaRenderer` renders exactly as transformers' ``apply_chat_template``
(and vLLM/SGLang, which call the same template) with
``add_generation_prompt=True``, locates every request part by re-rendering
(:mod:`.segments`), and warns when the template silently drops something the
request carries: tools, tool calls, reasoning, non-text content.

Re-rendering costs one render per message prefix; prefixes already seen are
reused (keyed by a rolling hash of the message dicts and checked against the
session's previous text, see :meth:`JinjaRenderer._message_bounds`), so an
append-only session renders each prefix once.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jinja2

from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.model import RenderedPrompt, Request, Segment
from prefixcache.analyzer.render.jinja_template import JinjaChat, request_dicts
from prefixcache.analyzer.render.sandbox import RenderLimitError
from prefixcache.analyzer.render.segments import boundary, monotone, paint
from prefixcache.analyzer.sequence import common_prefix_len, common_suffix_len


def _dumps(obj: Any) -> bytes:
    """Stable bytes of template data for memo keys (orjson; json fallback for >64-bit ints and the like)."""
    import json

    import orjson

    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, default=str).encode()


def _digest(text: str) -> int:
    import xxhash

    return xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"))


class JinjaRenderer:
    """A chat template as a renderer.

    ``source`` is the Jinja text, ``special`` the special-token variables
    (``bos_token``...), ``extra`` more template variables (e.g. ``thinking``).
    ``exact`` is False when the template only approximates the serving side.
    """

    def __init__(self, source: str, name: str, special: dict[str, str | None] | None = None,
                 exact: bool = True, extra: dict[str, Any] | None = None, memo_size: int = 50_000) -> None:
        try:
            self.chat = JinjaChat(source, special, extra, name)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"chat template {name}: line {exc.lineno}: template syntax error: {exc.message}") from None
        except RenderLimitError as exc:  # compiling it went past a bound (time, memory)
            text = str(exc)
            raise RenderLimitError(text if text.startswith(("chat template", "template ")) else
                                   f"chat template {name}: {text}") from None
        self.name = name
        self.exact = exact
        self._memo: OrderedDict[int, tuple[int, int]] = OrderedDict()
        self._tool_memo: OrderedDict[int, tuple[int, list[int]]] = OrderedDict()
        self._sessions: OrderedDict[str, tuple[str, list[int], dict[int, int]]] = OrderedDict()
        self._memo_size = memo_size
        self._uses_clock = "strftime_now" in source

    def render(self, request: Request) -> RenderedPrompt:
        """The prompt text of ``request`` and its char segments.

        Raises :class:`InputError` (naming the request's file and record) when the
        template rejects the request (``raise_exception``) or the request is a
        block-hash trace without text.
        """
        if request.trace is not None:
            raise self._error(request, "block-hash trace requests carry no text to render")
        msgs, tools = request_dicts(request, content=self.chat.content_format)
        now = request.timestamp

        def r(ms: list[dict], ts: list[dict] | None, gen: bool) -> str:
            try:
                return self.chat.render(ms, ts, gen, now)
            except RenderLimitError as exc:  # a sandbox bound: the template's fault, not the request's
                raise ConfigError(f"chat template {self.name}: {exc}") from None

        try:
            full, base = r(msgs, tools, True), r(msgs, tools, False)
        except ConfigError:
            raise
        except Exception as exc:  # jinja2.TemplateError, or template code failing on this data
            raise self._error(request, f"template {self.name} rejects this request: {exc}") from exc
        spans = [Segment("generation_prompt", "generation_prompt", boundary(base, full), len(full))]
        bounds = self._message_bounds(msgs, tools, base, r, request.session, now)
        for j, m in enumerate(request.messages):
            kind = "system" if m.role in ("system", "developer") else "message"
            spans.append(Segment(kind, f"messages[{j}]", bounds[j], bounds[j + 1], j))
        warnings: list[str] = []
        if tools:
            spans += self._tool_spans(msgs, tools, base, bounds, r, warnings)
        warnings += self._dropped(request, msgs, tools, base, bounds, r)
        return RenderedPrompt(
            text=full, segments=paint(len(full), spans), renderer=self.name, exact=self.exact,
            warnings=tuple(warnings), opaque_prefix_tokens=int(request.opaque_prefix_tokens or 0),
        )

    def _error(self, request: Request, msg: str) -> InputError:
        p = request.provenance
        return InputError(msg, p.source, p.record, p.pointer)

    def _remember(self, memo: OrderedDict, key: Any, value: Any) -> None:
        memo[key] = value
        memo.move_to_end(key)
        limit = 256 if memo is self._sessions else self._memo_size
        if len(memo) > limit:
            memo.popitem(last=False)

    def _message_bounds(self, msgs: list[dict], tools: list[dict] | None, base: str, r: Any,
                        session: str, now: float | None) -> list[int]:
        """Start char of each message in ``base`` (plus ``len(base)``).

        A prefix render is a pure function of its key (template, tools, messages,
        and ``now`` when the template reads the clock). If the session's previous
        request had the same key for ``messages[:j]``, its render was
        ``prev_base[:l]``, and ``l`` lies within the common prefix of the two
        texts, then it is ``base[:l]`` too: no render, no hashing. Otherwise a
        global memo (verified by digest) or a fresh render answers.
        """
        import xxhash

        seed = [self.name, tools, now if self._uses_clock else None]
        keys, h = [], xxhash.xxh64(_dumps(seed)).digest()
        for m in msgs:
            keys.append(int.from_bytes(h, "little"))
            h = xxhash.xxh64(h + _dumps(m)).digest()
        prev = self._sessions.get(session)
        common = common_prefix_len(prev[0], base) if prev else 0
        bounds: list[int] = []
        exact: dict[int, int] = {}
        for j, key in enumerate(keys):
            if prev and j < len(prev[1]) and prev[1][j] == key and prev[2].get(j, common + 1) <= common:
                bounds.append(prev[2][j])
                exact[j] = prev[2][j]
                continue
            hit = self._memo.get(key)
            if hit is not None and hit[0] <= len(base) and _digest(base[: hit[0]]) == hit[1]:
                bounds.append(hit[0])
                exact[j] = hit[0]
                continue
            try:
                text = r(msgs[:j], tools, False)
            except ConfigError:
                raise
            except Exception:  # templates may reject partial conversations; merge into the previous message
                bounds.append(bounds[-1] if bounds else 0)
                continue
            b = boundary(text, base)
            if b == len(text):
                exact[j] = b
                self._remember(self._memo, key, (b, _digest(text)))
            bounds.append(b)
        self._remember(self._sessions, session, (base, keys, exact))
        bounds.append(len(base))
        return monotone(bounds, 0, len(base))

    def _tool_spans(self, msgs: list[dict], tools: list[dict], base: str, bounds: list[int], r: Any,
                    warnings: list[str]) -> list[Segment]:
        """Spans of ``tools[i]`` (one per tool when the template renders them separably)."""
        no_tools = r(msgs, None, False)
        if no_tools == base:
            warnings.append(f"template {self.name} drops tools: {len(tools)} tool schema(s) not rendered")
            return []
        ts = common_prefix_len(no_tools, base)
        te = max(ts, len(base) - common_suffix_len(no_tools, base, floor=ts))
        starts = [ts] + self._tool_starts(msgs, tools, base, bounds, ts, te, r) + [te]
        starts = monotone(starts, ts, te)
        return [Segment("tool", f"tools[{i}]", starts[i], starts[i + 1], i) for i in range(len(tools))]

    def _tool_starts(self, msgs: list[dict], tools: list[dict], base: str, bounds: list[int],
                     ts: int, te: int, r: Any) -> list[int]:
        """Start chars of ``tools[1:]``: where the render with ``tools[:i]`` departs from the full one."""
        import xxhash

        if len(tools) < 2:
            return []
        m = next((j for j in range(len(msgs) + 1) if bounds[j] >= te), len(msgs))
        sub = msgs[:m]
        key = xxhash.xxh64_intdigest(_dumps([self.name, tools, sub]))
        check = _digest(base[:te])
        hit = self._tool_memo.get(key)
        if hit is not None and hit[0] == check:
            return list(hit[1])
        ref = r(sub, tools, False)
        if common_prefix_len(ref, base) < te:  # the block depends on later messages: use them all
            sub, ref = msgs, base
        out = [common_prefix_len(r(sub, tools[:i], False), ref) for i in range(1, len(tools))]
        self._remember(self._tool_memo, key, (check, out))
        return out

    def _dropped(self, req: Request, msgs: list[dict], tools: list[dict] | None, base: str,
                 bounds: list[int], r: Any) -> list[str]:
        """Warnings for request content the template does not render."""
        out = []
        lost = [j for j, m in enumerate(req.messages)
                if m.reasoning and not m.reasoning_opaque and m.reasoning not in base[bounds[j]:bounds[j + 1]]]
        if lost:
            out.append(f"template {self.name} drops reasoning of " + ", ".join(f"messages[{j}]" for j in lost))
        if any(m.reasoning_opaque for m in req.messages):
            out.append("encrypted/redacted reasoning cannot be rendered; its tokens are not counted")
        if any(m.tool_calls for m in req.messages):
            bare = [{k: v for k, v in m.items() if k != "tool_calls"} for m in msgs]
            try:
                same = r(bare, tools, False) == base
            except ConfigError:
                raise
            except Exception:
                same = False
            if same:
                n = sum(len(m.tool_calls) for m in req.messages)
                out.append(f"template {self.name} drops tool calls: {n} assistant tool call(s) not rendered")
        parts = [j for j, m in enumerate(req.messages) if m.parts]
        if parts:
            out.append("non-text content (images, files) is not rendered: " + ", ".join(f"messages[{j}]" for j in parts))
        return out
