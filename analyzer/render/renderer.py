"""Render a :class:`Request` through a chat template into a :class:`RenderedPrompt` with segments.

:class:`JinjaRenderer` renders exactly as transformers' ``apply_chat_template``
(and vLLM/SGLang, which call the same template) with
``add_generation_prompt=True``, locates every request part by re-rendering
(:mod:`.segments`), and warns when the template silently drops something the
request carries: tools, tool calls, reasoning, non-text content.

Each request is rendered twice (with and without the generation prompt, one call); locating
its messages costs one render per message prefix its session has not rendered before
(prefixes are keyed by a rolling hash of the message dicts and checked against the
session's previous text, see :meth:`JinjaRenderer._message_bounds`), so an append-only
session renders each prefix once: for an agent's turn, only the new messages' prefixes. The
tools block and the tool-call check are found once per session (see
:meth:`JinjaRenderer._tool_spans`, :meth:`JinjaRenderer._dropped`).
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


class _Session:
    """What a session's latest request (its ``index``) left for the next one: its text without the generation
    prompt (``base``), the key of every message prefix (``keys[j]``: ``messages[:j]``, ``j`` up to
    all of them), the prefix bounds known exact, and the tools block and tool-call verdicts, each with
    the message prefix it was located in (``(m, keys[m], ...)``). ``loose`` holds the bounds of
    prefixes whose render is not a prefix of ``base`` (where the two depart)."""

    __slots__ = ("base", "keys", "exact", "loose", "tools", "calls", "index")

    def __init__(self, base: str, keys: list[int], exact: dict[int, int], loose: dict[int, int],
                 tools: tuple | None, calls: tuple | None, index: int = 0):
        self.base, self.keys, self.exact, self.loose, self.tools, self.calls = base, keys, exact, loose, tools, calls
        self.index = index


def _same_prefix(rec: tuple | None, keys: list[int]) -> bool:
    """Whether ``rec`` (``(m, key, ...)``) was found in the same ``messages[:m]`` as this request's."""
    return rec is not None and rec[0] < len(keys) and keys[rec[0]] == rec[1]


class JinjaRenderer:
    """A chat template as a renderer.

    ``source`` is the Jinja text, ``special`` the special-token variables
    (``bos_token``...), ``extra`` more template variables (e.g. ``thinking``).
    ``exact`` is False when the template only approximates the serving side.
    ``trusted`` (only for the templates the package ships) renders in this process;
    any other template renders in the render worker (see :class:`~.jinja_template.JinjaChat`).
    """

    def __init__(self, source: str, name: str, special: dict[str, str | None] | None = None,
                 exact: bool = True, extra: dict[str, Any] | None = None, memo_size: int = 50_000,
                 trusted: bool = False) -> None:
        try:
            self.chat = JinjaChat(source, special, extra, name, trusted=trusted)
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
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._memo_size = memo_size
        self._uses_clock = "strftime_now" in source
        #: Renders so far, and the characters they produced (what ``bench_tokenize`` reports).
        self.renders = self.rendered_chars = 0

    def render(self, request: Request) -> RenderedPrompt:
        """The prompt text of ``request`` and its char segments.

        Renders the request twice (with and without the generation prompt) in one call, plus the
        message prefixes its session has not rendered before; the tools block and whether the
        template drops tool calls are found once per session and reused while the messages before
        them are unchanged. Raises :class:`InputError` (naming the request's file and record) when the
        template rejects the request (``raise_exception``) or the request is a block-hash trace
        without text; :class:`ConfigError` when a render goes past a sandbox bound.
        """
        if request.trace is not None:
            raise self._error(request, "block-hash trace requests carry no text to render")
        msgs, tools = request_dicts(request, content=self.chat.content_format)
        now = request.timestamp

        def batch(calls: list[tuple[list[dict], list[dict] | None, bool]]) -> list[Any]:
            try:
                out = self.chat.render_many(calls, now)
            except RenderLimitError as exc:  # a sandbox bound: the template's fault, not the request's
                raise ConfigError(f"chat template {self.name}: {exc}") from None
            self.renders += len(out)
            self.rendered_chars += sum(len(t) for t in out if isinstance(t, str))
            return out

        def r(ms: list[dict], ts: list[dict] | None, gen: bool) -> str:
            (text,) = batch([(ms, ts, gen)])
            if isinstance(text, Exception):
                raise text
            return text

        full, base = batch([(msgs, tools, True), (msgs, tools, False)])
        for text in (full, base):
            if isinstance(text, Exception):  # jinja2.TemplateError, or template code failing on this data
                raise self._error(request, f"template {self.name} rejects this request: {text}") from text
        spans = [Segment("generation_prompt", "generation_prompt", boundary(base, full), len(full))]
        prev = self._sessions.get(request.session)
        bounds, keys, exact, loose = self._message_bounds(msgs, tools, base, batch, prev, now)
        for j, m in enumerate(request.messages):
            kind = "system" if m.role in ("system", "developer") else "message"
            spans.append(Segment(kind, f"messages[{j}]", bounds[j], bounds[j + 1], j))
        warnings: list[str] = []
        tool_rec = calls_rec = None
        if tools:
            tool_rec = prev.tools if prev is not None and _same_prefix(prev.tools, keys) else None
            found, tool_rec = self._tool_spans(msgs, tools, base, bounds, keys, exact, tool_rec, r, warnings)
            spans += found
        calls_rec = prev.calls if prev is not None and _same_prefix(prev.calls, keys) else None
        dropped, calls_rec = self._dropped(request, msgs, tools, base, bounds, keys, calls_rec, r)
        warnings += dropped
        if prev is None or request.index >= prev.index:  # an earlier request rendered again (lint explaining a
            # break) leaves the session's latest in place: the next request is compared with that one
            self._remember(self._sessions, request.session,
                           _Session(base, keys, exact, loose, tool_rec, calls_rec, request.index))
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

    def _message_bounds(self, msgs: list[dict], tools: list[dict] | None, base: str, batch: Any,
                        prev: _Session | None, now: float | None
                        ) -> tuple[list[int], list[int], dict[int, int], dict[int, int]]:
        """Start char of each message in ``base`` (plus ``len(base)``), the key of every message
        prefix, the bounds known exact and those where a prefix's render departs from ``base``.

        A prefix render is a pure function of its key (template, tools, messages,
        and ``now`` when the template reads the clock). If the session's previous
        request had the same key for ``messages[:j]`` (its whole list included: that
        render was its ``base``), its render was ``prev_base[:l]``, and ``l`` lies within
        the common prefix of the two texts, then it is ``base[:l]`` too: no render, no
        hashing. A render that departed from ``prev_base`` at ``l`` departs from ``base``
        there too when ``l`` lies strictly within the common prefix. Otherwise a global memo (verified by digest) or a fresh render answers;
        the prefixes left to render go to the template in one batch.
        """
        import xxhash

        seed = [self.name, tools, now if self._uses_clock else None]
        keys, h = [], xxhash.xxh64(_dumps(seed)).digest()
        for m in msgs:
            keys.append(int.from_bytes(h, "little"))
            h = xxhash.xxh64(h + _dumps(m)).digest()
        keys.append(int.from_bytes(h, "little"))
        common = common_prefix_len(prev.base, base) if prev else 0
        known: dict[int, int] = {}
        exact: dict[int, int] = {}
        loose: dict[int, int] = {}
        todo: list[int] = []
        for j in range(len(msgs)):
            key = keys[j]
            if prev and j < len(prev.keys) and prev.keys[j] == key:
                if prev.exact.get(j, common + 1) <= common:
                    known[j] = exact[j] = prev.exact[j]
                    continue
                if prev.loose.get(j, common) < common:
                    known[j] = loose[j] = prev.loose[j]
                    continue
            hit = self._memo.get(key)
            if hit is not None and hit[0] <= len(base) and _digest(base[: hit[0]]) == hit[1]:
                known[j] = exact[j] = hit[0]
                continue
            todo.append(j)
        texts = dict(zip(todo, batch([(msgs[:j], tools, False) for j in todo])))
        bounds: list[int] = []
        for j in range(len(msgs)):
            if j in known:
                bounds.append(known[j])
                continue
            text = texts[j]
            if isinstance(text, Exception):  # templates may reject partial conversations: merge into the previous
                bounds.append(bounds[-1] if bounds else 0)
                continue
            b = boundary(text, base)
            if b == len(text):
                exact[j] = b
                self._remember(self._memo, keys[j], (b, _digest(text)))
            else:
                loose[j] = b
            bounds.append(b)
        exact[len(msgs)] = len(base)
        bounds.append(len(base))
        return monotone(bounds, 0, len(base)), keys, exact, loose

    def _tool_spans(self, msgs: list[dict], tools: list[dict], base: str, bounds: list[int], keys: list[int],
                    exact: dict[int, int], rec: tuple | None, r: Any, warnings: list[str]) -> tuple[list[Segment], tuple]:
        """Spans of ``tools[i]`` (one per tool when the template renders them separably), and the record
        of where the block is (``(m, keys[m], ts, te)``; ``ts`` None when the template drops tools).

        The block is where the render without tools departs from ``base`` (common prefix .. common
        suffix). It is located once per session: while ``messages[:m]``, the messages whose text holds
        the block, are unchanged (``rec``, found by an earlier request), the block is the same and
        costs no render.
        """
        if rec is None:
            no_tools = r(msgs, None, False)
            if no_tools == base:
                rec = (min(1, len(msgs)), keys[min(1, len(msgs))], None, None)
            else:
                ts = common_prefix_len(no_tools, base)
                te = max(ts, len(base) - common_suffix_len(no_tools, base, floor=ts))
                m = next(j for j in range(1, len(msgs) + 1) if j == len(msgs) or exact.get(j, -1) >= te) if msgs else 0
                rec = (m, keys[m], ts, te)
        m, _, ts, te = rec
        if ts is None:
            warnings.append(f"template {self.name} drops tools: {len(tools)} tool schema(s) not rendered")
            return [], rec
        if exact.get(m, -1) < te:  # the messages before the block rendered otherwise: locate it again
            return self._tool_spans(msgs, tools, base, bounds, keys, exact, None, r, warnings)
        starts = [ts] + self._tool_starts(msgs, tools, base, bounds, ts, te, r) + [te]
        starts = monotone(starts, ts, te)
        return [Segment("tool", f"tools[{i}]", starts[i], starts[i + 1], i) for i in range(len(tools))], rec

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
                 bounds: list[int], keys: list[int], rec: tuple | None, r: Any) -> tuple[list[str], tuple | None]:
        """Warnings for request content the template does not render, and the record of the
        tool-call verdict (``(k, keys[k], drops)``).

        Whether the template drops tool calls (the render without them equals ``base``) is judged
        once per session, on the first request that carries any, and kept while the messages up to
        and including the first one with tool calls (``messages[:k]``) are unchanged.
        """
        out = []
        lost = [j for j, m in enumerate(req.messages)
                if m.reasoning and not m.reasoning_opaque and m.reasoning not in base[bounds[j]:bounds[j + 1]]]
        if lost:
            out.append(f"template {self.name} drops reasoning of " + ", ".join(f"messages[{j}]" for j in lost))
        if any(m.reasoning_opaque for m in req.messages):
            out.append("encrypted/redacted reasoning cannot be rendered; its tokens are not counted")
        first = next((j for j, m in enumerate(req.messages) if m.tool_calls), None)
        if first is not None:
            if rec is None:
                bare = [{k: v for k, v in m.items() if k != "tool_calls"} for m in msgs]
                try:
                    same = r(bare, tools, False) == base
                except ConfigError:
                    raise
                except Exception:
                    same = False
                rec = (first + 1, keys[first + 1], same)
            if rec[2]:
                n = sum(len(m.tool_calls) for m in req.messages)
                out.append(f"template {self.name} drops tool calls: {n} assistant tool call(s) not rendered")
        parts = [j for j, m in enumerate(req.messages) if m.parts]
        if parts:
            out.append("non-text content (images, files) is not rendered: " + ", ".join(f"messages[{j}]" for j in parts))
        return out, rec
