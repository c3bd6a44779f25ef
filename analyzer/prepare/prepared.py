"""Request → rendered prompt → token ids, for every command that needs tokens.

One :class:`~prefixcache.analyzer.prepare.resolve.Pipeline` (renderer + tokenizer) is resolved
per logged model name, lazily; one incremental
:class:`~prefixcache.analyzer.tokenize.SessionTokenizer` is kept per pipeline, holding
the last prompt of its most recent sessions (at most ``max_sessions``, least recently
used dropped: a dropped session's next prompt is encoded in full, to the same ids), so
each session's requests are tokenized incrementally and memory does not grow with the
number of sessions. Token ids are compact arrays (4 bytes a token). Block-hash trace
requests pass through untouched (they have no text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from prefixcache.analyzer.render.images import image_costs
from prefixcache.analyzer.model import RenderedPrompt, Request, TokenizedPrompt
from prefixcache.analyzer.prepare.resolve import Pipeline, opaque_prefix_for, resolve
from prefixcache.analyzer.tokenize import SessionTokenizer, with_opaque_prefix


def usage_only(request: Request) -> bool:
    """True when the log holds no prompt for ``request``, only the provider's counts (an
    OpenHands trajectory: no messages, and ``messages`` not among the observed fields)."""
    return request.trace is None and not request.messages and "messages" not in request.observed


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request with its rendering and tokens.

    Both are None for block traces (``request.trace``: content known only as block
    hashes) and for usage-only logs (OpenHands trajectories: the prompt itself was
    not logged, only the provider's counts): :attr:`usage_only` tells these apart.
    """

    request: Request
    rendered: RenderedPrompt | None
    tokens: TokenizedPrompt | None

    @property
    def prompt_tokens(self) -> int:
        """Prompt length in tokens: tokenized length, or the trace's input length."""
        if self.tokens is not None:
            return len(self.tokens.ids)
        if self.request.trace is not None:
            return self.request.trace.input_length
        usage = self.request.usage
        return usage.prompt_tokens or 0 if usage is not None else 0

    @property
    def usage_only(self) -> bool:
        """True when the log holds no prompt content, only reported usage."""
        return self.tokens is None and self.request.trace is None


class Preparer:
    """Renders and tokenizes requests; remembers what ``auto`` chose per model.

    ``template`` / ``tokenizer`` are the user's specs (``auto`` or a name/path, see
    :func:`prefixcache.analyzer.prepare.resolve.resolve`). Raises ``ConfigError`` for specs
    that cannot be resolved.
    """

    def __init__(self, template: str = "auto", tokenizer: str = "auto") -> None:
        self.template = template
        self.tokenizer = tokenizer
        self._pipelines: dict[str | None, Pipeline] = {}
        self._sessions: dict[int, SessionTokenizer] = {}
        self._opaque: dict[str, int] = {}

    def pipeline(self, model: str | None) -> Pipeline:
        """The renderer + tokenizer for ``model`` (resolved once per model name)."""
        if model not in self._pipelines:
            self._pipelines[model] = resolve(model, template=self.template, tokenizer=self.tokenizer)
        return self._pipelines[model]

    @property
    def notes(self) -> dict[str | None, str]:
        """Per model name: what was chosen and whether counts are exact."""
        return {model: p.note for model, p in self._pipelines.items()}

    def prepare(self, request: Request) -> Prepared:
        """Render and tokenize one request (incrementally within its session)."""
        if request.trace is not None or usage_only(request):
            return Prepared(request, None, None)
        key = str(request.extra.get("opaque_prefix_key", ""))
        if key and not request.opaque_prefix_tokens and key in self._opaque:  # its size is known: one pass
            return Prepared(request, *self._render_tokenize(request, self._opaque[key]))
        rendered, tokens = self.render_tokenize(request)
        return self.finish(request, rendered, tokens)

    def render_tokenize(self, request: Request) -> tuple[RenderedPrompt, TokenizedPrompt]:
        """The rendering and tokens of one request with text, before any hidden prefix sized from
        usage: what depends only on the request's own session (so sessions can be prepared apart,
        :mod:`.parallel`); :meth:`finish` adds the rest, in input order."""
        return self._render_tokenize(request, None)

    def _render_tokenize(self, request: Request, opaque: int | None) -> tuple[RenderedPrompt, TokenizedPrompt]:
        """:meth:`render_tokenize`, with the hidden prefix of ``opaque`` tokens (sized from usage by an
        earlier call of its key) put in front as :meth:`finish` would (``None``: none added)."""
        pipe = self.pipeline(request.model)
        rendered = pipe.renderer.render(request)
        session_tok = self._sessions.get(id(pipe))
        if session_tok is None:
            session_tok = self._sessions[id(pipe)] = SessionTokenizer(pipe.tokenizer)
        key = str(request.extra.get("opaque_prefix_key", ""))
        images = image_costs((p for m in request.messages for p in m.parts), rendered.renderer, request.model)
        return rendered, session_tok.tokenize(rendered, request.session, key=key, images=images, opaque=opaque)

    def finish(self, request: Request, rendered: RenderedPrompt, tokens: TokenizedPrompt) -> Prepared:
        """:meth:`render_tokenize`'s result with the hidden prefix sized from usage: the size is that of
        the first call of its key with usage, so this step runs in input order (shared by sessions)."""
        key = str(request.extra.get("opaque_prefix_key", ""))
        if key and not request.opaque_prefix_tokens:
            u = request.usage
            if key not in self._opaque and u is not None and u.prompt_tokens is not None:
                self._opaque[key] = opaque_prefix_for(request, len(tokens.ids))  # the first call with usage
            tokens = with_opaque_prefix(tokens, self._opaque.get(key, 0), key)
        return Prepared(request, rendered, tokens)


def prepare(requests: Iterable[Request], template: str = "auto", tokenizer: str = "auto") -> Iterator[Prepared]:
    """Stream :class:`Prepared` requests in input order (see :class:`Preparer`)."""
    preparer = Preparer(template, tokenizer)
    for request in requests:
        yield preparer.prepare(request)
