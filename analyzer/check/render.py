"""Rendering prompt templates for ``check``: the sandbox, and line tracing.

Templates render in jinja2's :class:`ImmutableSandboxedEnvironment`. The
:class:`TracingLoader` rewrites each template source as it is loaded: the boundary
comment ``{# prefixcache: dynamic-below #}`` becomes an invisible marker, and (when
tracing) a marker naming (file, line) is put before the first visible character of
every line of literal text and inside every ``{{ … }}`` (``{{ "<m>" ~ (expr) }}``,
same whitespace control, same output). :class:`Trace` strips the markers from a
render and answers "which template line produced character N". Markers are
private-use characters (U+E000–U+E002) that prompt text does not contain.

``now()`` / ``strftime_now(fmt)`` come from the caller's clock (the transformers
chat-template convention); ``tojson`` follows transformers' semantics
(``json.dumps``, keys unsorted unless ``sort_keys=True``), as most agent runtimes do.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from jinja2 import TemplateNotFound
from jinja2.exceptions import TemplateError, TemplateSyntaxError
from jinja2.loaders import split_template_path
from jinja2.sandbox import ImmutableSandboxedEnvironment

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.check.static import BOUNDARY_RE
from prefixcache.analyzer.render.files import not_text
from prefixcache.analyzer.render.jinja_template import tojson
from prefixcache.analyzer.render import worker
from prefixcache.analyzer.render.sandbox import BoundedSandbox, RenderLimitError, SafeLoader, bounded_filter, render_bounded

_MARK, _END, _BOUNDARY = "\ue000", "\ue001", "\ue002"
_TRACE = re.compile(f"{_MARK}(\\d+){_END}|{_BOUNDARY}")


class TracingLoader(SafeLoader):
    """A file loader that turns the boundary comment into a marker and, when
    ``trace`` is on, adds line markers; ``table`` maps marker ids to (file, line)."""

    def __init__(self, searchpath: Sequence[str], trace: bool) -> None:
        super().__init__(searchpath)
        self.trace = trace
        self.table: list[tuple[str, int]] = []
        self.sources: dict[str, list[str]] = {}

    def get_source(self, environment: Any, template: str) -> tuple[str, str | None, Callable[[], bool] | None]:
        """The instrumented source; ConfigError naming the file when it is not UTF-8 text,
        binary (NUL bytes) or unreadable."""
        try:
            source, filename, uptodate = super().get_source(environment, template)
        except UnicodeDecodeError as exc:
            raise ConfigError(not_text(self._locate(template), "template", exc)) from None
        except OSError as exc:
            raise ConfigError(f"{self._locate(template)}: cannot read template ({exc.strerror or exc})") from None
        if "\x00" in source:
            raise ConfigError(f"{filename or template}: template is a binary file (it holds NUL bytes), not text")
        self.sources[template] = source.splitlines()
        return self.instrument(source, template), filename, uptodate

    def _locate(self, template: str) -> str:
        """The file a template name resolves to on the search path (the name itself if none)."""
        pieces = split_template_path(template)
        found = (os.path.join(root, *pieces) for root in self.searchpath)
        return next((f for f in found if os.path.isfile(f)), template)

    def mark(self, file: str, line: int) -> str:
        self.table.append((file, line))
        return f"{_MARK}{len(self.table) - 1}{_END}"

    def instrument(self, source: str, file: str) -> str:
        """``source`` with the boundary marker and (when tracing) line markers."""
        out: list[str] = []
        i, n = 0, len(source)
        while i < n:
            j = _next_tag(source, i)
            out.append(self._data(source, i, j, file) if self.trace else source[i:j])
            if j >= n:
                break
            line = source.count("\n", 0, j) + 1
            close = {"{{": "}}", "{%": "%}", "{#": "#}"}[source[j : j + 2]]
            k = _tag_end(source, j + 2, close) if close != "#}" else source.find("#}", j + 2)
            k = n if k < 0 else k + 2
            tag = source[j:k]
            if close == "#}" and BOUNDARY_RE.fullmatch(tag):
                tag = "{{" + tag[2:3].replace("#", "") + f'"{_BOUNDARY}"' + tag[-3:-2].replace("#", "") + "}}"
            elif close == "}}" and self.trace:
                tag = _wrap_expression(tag, self.mark(file, line))
            elif close == "%}" and re.fullmatch(r"\{%-?\s*raw\s*-?%\}", tag):
                end = re.compile(r"\{%-?\s*endraw\s*-?%\}").search(source, k)
                k = n if end is None else end.end()
                tag = source[j:k]
            out.append(tag)
            i = k
        return "".join(out)

    def _data(self, source: str, i: int, j: int, file: str) -> str:
        """Literal text with a marker before the first visible character of each line."""
        chunk, parts, line = source[i:j], [], source.count("\n", 0, i) + 1
        for piece in chunk.splitlines(keepends=True):
            stripped = piece.lstrip(" \t")
            if stripped.strip():
                parts.append(piece[: len(piece) - len(stripped)] + self.mark(file, line) + stripped)
            else:
                parts.append(piece)
            line += piece.endswith(("\n", "\r"))
        return "".join(parts)


def _next_tag(source: str, i: int) -> int:
    hits = [k for k in (source.find(t, i) for t in ("{{", "{%", "{#")) if k >= 0]
    return min(hits) if hits else len(source)


def _tag_end(source: str, i: int, close: str) -> int:
    """Offset of ``close`` after ``i``, skipping quoted strings; -1 when missing."""
    quote = ""
    while i < len(source):
        c = source[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif source.startswith(close, i):
            return i
        i += 1
    return -1


def _wrap_expression(tag: str, marker: str) -> str:
    """``{{- x -}}`` → ``{{- "<marker>" ~ (x) -}}`` (same whitespace control, same output)."""
    head = 3 if tag[2:3] in "-+" else 2
    tail = 3 if tag[-3:-2] in "-+" else 2
    return f'{tag[:head]} "{marker}" ~ ({tag[head:-tail]}) {tag[-tail:]}'


def make_env(searchpath: Sequence[str], trace: bool) -> ImmutableSandboxedEnvironment:
    """The sandboxed environment ``check`` renders with (see module docstring). ``env.recipe``
    is what the render worker builds its own copy from (the folders, the trace switch, a key)."""
    env = BoundedSandbox(loader=TracingLoader(searchpath, trace), keep_trailing_newline=True)
    env.filters["tojson"] = bounded_filter("tojson", tojson, env.cap)
    env.recipe = (tuple(searchpath), trace, f"{os.getpid()}-{next(_ENV_IDS)}")  # type: ignore[attr-defined]
    return env


_ENV_IDS = itertools.count()


@functools.lru_cache(maxsize=16)
def _worker_env(recipe: tuple[tuple[str, ...], bool, str]) -> ImmutableSandboxedEnvironment:
    return make_env(recipe[0], recipe[1])


def _render_in_worker(recipe: tuple[tuple[str, ...], bool, str], name: str, context: Mapping[str, Any],
                      now: datetime) -> tuple[str, list[tuple[str, int]], dict[str, list[str]]]:
    """In the render worker: the text of one render, and the loader's marker table and sources."""
    env = _worker_env(recipe)
    clock = {"now": lambda: now, "strftime_now": lambda fmt: now.strftime(fmt)}
    variables = {**clock, **{k: v for k, v in context.items() if k != "_prefixcache"}}
    text = render_bounded(env.get_template(name), variables)
    loader: TracingLoader = env.loader  # type: ignore[assignment]
    return text, loader.table, loader.sources


def render(env: ImmutableSandboxedEnvironment, name: str, context: Mapping[str, Any], now: datetime) -> str:
    """One render of template ``name`` with ``context`` at clock ``now``, in the render worker
    (:mod:`prefixcache.analyzer.render.worker`: hard time and memory bounds). The worker's marker
    table and sources replace ``env``'s loader's. Every failure is one :class:`ConfigError` naming
    the template (syntax error with its line, a sandbox bound, the template's own error)."""
    loader: TracingLoader = env.loader  # type: ignore[assignment]
    try:
        text, table, sources = worker.run(_render_in_worker, env.recipe, name, dict(context), now)  # type: ignore[attr-defined]
        loader.table[:] = table
        loader.sources.update(sources)
        return text
    except RenderLimitError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    except (RecursionError, MemoryError, SyntaxError):  # compiling a template nested too deeply
        raise ConfigError(f"{name}: template nested too deeply to compile") from None
    except TemplateSyntaxError as exc:
        raise ConfigError(f"{exc.name or name}:{exc.lineno}: template syntax error: {exc.message}") from None
    except TemplateNotFound as exc:
        raise ConfigError(f"{name}: template {exc.name!r} not found") from None
    except TemplateError as exc:
        raise ConfigError(f"{name}: rendering failed: {exc}") from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:  # template code failing
        raise ConfigError(f"{name}: rendering failed: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Trace:
    """A traced render: the plain text and, per change point, the marker id in force."""

    text: str
    starts: list[int]
    ids: list[int]
    boundary: int | None

    @classmethod
    def parse(cls, raw: str) -> "Trace":
        plain, starts, ids, boundary, pos, last = [], [], [], None, 0, 0
        for m in _TRACE.finditer(raw):
            plain.append(raw[last : m.start()])
            pos += m.start() - last
            last = m.end()
            if m.group(1) is None:
                boundary = pos if boundary is None else boundary
            else:
                starts.append(pos)
                ids.append(int(m.group(1)))
        plain.append(raw[last:])
        return cls("".join(plain), starts, ids, boundary)

    def marker_at(self, char: int) -> int | None:
        k = bisect.bisect_right(self.starts, char) - 1
        return self.ids[k] if k >= 0 else None
