"""The bounded Jinja sandbox every template renders in, and the loader that reads includes.

Templates are untrusted (a chat template from a model repository, a prompt template in a
pull request). They run in jinja2's :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment`
(no attribute starting with ``_``, no mutation of lists or dicts, ``range`` capped at
100,000 items by jinja2) with these bounds added, each ending in one
:class:`RenderLimitError` (a :class:`ConfigError`, exit 2) that names the template:

* **time**: a render longer than :data:`TIME_LIMIT_S` seconds (``PREFIXCACHE_RENDER_TIMEOUT``)
  is stopped (an interval timer in the main thread; elsewhere, checked at every output
  chunk, call and attribute access);
* **size**: output longer than :data:`MAX_CHARS` characters (``PREFIXCACHE_RENDER_MAX_CHARS``),
  and any ``*``, ``+``, ``%`` or ``**`` whose result would be larger, or a call or filter given
  an integer beyond it (``'a'.center(10**10)``, ``indent(10**10)``), is refused before it
  allocates;
* **recursion and nesting**: a recursive macro, or a template nested too deeply to compile,
  is a clean error, not a ``RecursionError``; so is running out of memory.

:class:`SafeLoader` reads ``{% include %}`` / ``{% import %}`` only from regular files
inside the search folders: a symbolic link anywhere on the way, a FIFO or device, and a
path leaving the folder (``..``, absolute) are refused without reading (and without
printing) the target. A ``namespace()`` attribute longer than the size bound is refused too.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import stat
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from jinja2 import FileSystemLoader, TemplateNotFound
from jinja2.loaders import split_template_path
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from prefixcache.analyzer import limits
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.limits import LIMITS

#: Attribute names of a plain ``dict`` (its methods): ``message.items`` is the method, as in jinja2.
_DICT_ATTRS = frozenset(dir(dict))
#: ``loop`` attributes a template reads on every iteration (jinja2's sandbox allows them all).
_LOOP_ATTRS = frozenset({"first", "last", "index", "index0", "revindex", "revindex0", "length", "depth",
                         "previtem", "nextitem"})
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Seconds one render may take.
TIME_LIMIT_S = LIMITS["RENDER_TIMEOUT"].default
#: Characters one render may produce (and the longest string or list an operator may build).
MAX_CHARS = int(LIMITS["RENDER_MAX_CHARS"].default)


class RenderLimitError(ConfigError):
    """A template went past a sandbox bound (time, size, recursion, memory) or read a file it may not."""


def time_limit() -> float:
    """:data:`TIME_LIMIT_S`, or ``$PREFIXCACHE_RENDER_TIMEOUT`` when set."""
    return limits.seconds("RENDER_TIMEOUT")


def max_chars() -> int:
    """:data:`MAX_CHARS`, or ``$PREFIXCACHE_RENDER_MAX_CHARS`` when set."""
    return limits.value("RENDER_MAX_CHARS")


def _too_big(value: Any, cap: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > cap


def _check_args(args: Sequence[Any], kwargs: dict[str, Any], what: str, cap: int) -> None:
    if any(_too_big(a, cap) for a in args) or any(_too_big(v, cap) for v in kwargs.values()):
        raise RenderLimitError(f"{what} given a number over {cap:,} (PREFIXCACHE_RENDER_MAX_CHARS)")


def bounded_filter(name: str, fn: Callable[..., Any], cap: int) -> Callable[..., Any]:
    """``fn`` as a filter that refuses an integer argument over ``cap`` (``indent(10**10)``)."""

    @functools.wraps(fn)  # keeps jinja's pass_context / pass_eval_context marks
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_args(args[1:], kwargs, f"filter {name!r}", cap)
        return fn(*args, **kwargs)

    return wrapper


class BoundedNamespace(Namespace):
    """``namespace()`` whose attributes may not hold strings or lists beyond the size bound."""

    def __setitem__(self, name: str, value: Any) -> None:
        if isinstance(value, (str, list, tuple)) and len(value) > max_chars():
            raise RenderLimitError(f"namespace attribute {name!r} over {max_chars():,} items")
        super().__setitem__(name, value)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with the time and size bounds of the module docstring."""

    intercepted_binops = frozenset({"*", "+", "%", "**"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = max_chars()
        self.deadline = float("inf")
        self.filters = {k: bounded_filter(k, f, self.cap) for k, f in self.filters.items()}
        self.globals["namespace"] = BoundedNamespace

    def tick(self) -> None:
        """Raise :class:`RenderLimitError` when the render is past its deadline."""
        if time.monotonic() > self.deadline:
            raise RenderLimitError(f"rendering took longer than {time_limit():g} s (PREFIXCACHE_RENDER_TIMEOUT)")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.tick()
        cap = self.cap
        if operator == "*":
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > cap:
                raise RenderLimitError(f"'*' would build {len(seq) * n:,} items (over {cap:,})")
        elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            if len(left) + len(right) > cap:
                raise RenderLimitError(f"'+' would build over {cap:,} items")
        elif operator == "%" and isinstance(left, str):
            _check_args(right if isinstance(right, tuple) else (right,), {}, "'%' formatting", cap)
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if right > 64 and max(abs(left), 2).bit_length() * right > cap * 8:
                raise RenderLimitError(f"'**' would build a number of over {cap * 8:,} bits")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (jinja's signature)
        __self.tick()
        name = getattr(__obj, "__name__", "a call")
        _check_args(args, kwargs, "range()" if name == "safe_range" else f"{name}()", __self.cap)
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.tick()
        if type(obj) is dict and attribute not in _DICT_ATTRS:
            # What jinja2's sandbox returns for a plain dict, without its failed ``getattr`` first (a plain
            # dict has no attribute beyond its class's): the item, else undefined. Most attribute reads
            # of a chat template are ``message.role`` / ``message.content`` on the request's dicts.
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        if type(obj) is LoopContext and attribute in _LOOP_ATTRS:  # ``loop.first``: public, read-only
            return getattr(obj, attribute)
        return super().getattr(obj, attribute)


def _check_size(source: str, name: str) -> None:
    most = limits.value("MAX_TEMPLATE_BYTES")
    if len(source) > most:
        raise RenderLimitError(f"template {name} is over {most:,} characters (PREFIXCACHE_MAX_TEMPLATE_BYTES "
                               "sets the limit)")


def compile_source(env: BoundedSandbox, source: str, name: str) -> Any:
    """``env.from_string(source)``; a template too deeply nested to compile is a
    :class:`RenderLimitError` (jinja2's own ``TemplateSyntaxError`` propagates); so is a source
    longer than ``MAX_TEMPLATE_BYTES`` characters (compiling it would take longer than any render)."""
    _check_size(source, name)
    try:
        return env.from_string(source)
    except (RecursionError, MemoryError):
        raise RenderLimitError(f"chat template {name}: nested too deeply to compile") from None
    except SyntaxError as exc:  # Python's compiler: "too many statically nested blocks" (jinja's own is no SyntaxError)
        raise RenderLimitError(f"chat template {name}: nested too deeply to compile ({exc.msg})") from None


@contextmanager
def _alarm(env: BoundedSandbox, seconds: float) -> Iterator[None]:
    """Set ``env.deadline``; in the main thread also an interval timer that interrupts a
    render stuck in a loop that neither outputs nor calls anything (when no other timer runs)."""
    env.deadline = time.monotonic() + seconds
    use_timer = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if use_timer and signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        use_timer = False  # someone else's timer (a test runner's timeout): keep the cooperative checks

    def on_alarm(signum: int, frame: Any) -> None:
        raise RenderLimitError(f"rendering took longer than {seconds:g} s (PREFIXCACHE_RENDER_TIMEOUT)")

    old = signal.signal(signal.SIGALRM, on_alarm) if use_timer else None
    if use_timer:
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        env.deadline = float("inf")
        if use_timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def render_bounded(template: Any, variables: dict[str, Any]) -> str:
    """Render a template compiled by a :class:`BoundedSandbox` within its bounds.

    Output is collected chunk by chunk and stopped at the size bound. Raises
    :class:`RenderLimitError` for a bound (time, size, recursion, memory); the
    template's own errors (``TemplateError``, a failing filter) propagate.
    """
    env: BoundedSandbox = template.environment
    cap, out, size = env.cap, [], 0
    try:
        with _alarm(env, time_limit()):
            for chunk in template.generate(**variables):
                size += len(chunk)
                if size > cap:
                    raise RenderLimitError(f"rendered output over {cap:,} characters (PREFIXCACHE_RENDER_MAX_CHARS)")
                out.append(chunk)
                env.tick()
    except RecursionError:
        raise RenderLimitError("template recursion too deep (a macro or loop calling itself)") from None
    except MemoryError:
        raise RenderLimitError(f"template needs more than {limits.value('RENDER_MAX_MEMORY'):,} bytes of memory "
                               "(PREFIXCACHE_RENDER_MAX_MEMORY)") from None
    except OverflowError as exc:
        raise RenderLimitError(f"template went past a bound: {exc}") from None
    text = "".join(out)
    bad = None if text.isascii() else _SURROGATE.search(text)
    if bad is not None:
        raise RenderLimitError(f"rendered output is not valid Unicode (a lone surrogate at character {bad.start():,})")
    return text


class SafeLoader(FileSystemLoader):
    """A :class:`FileSystemLoader` that reads only regular files lying inside its folders.

    A name with ``..`` or an absolute path resolves inside the folder (jinja2 drops the
    leading ``/``) or is not found; a symbolic link on the way (file or folder), a target
    outside the folder, or a FIFO / device is a :class:`RenderLimitError` naming the
    template name and folder — never the link's target, never its content.
    """

    def __init__(self, searchpath: Sequence[str]) -> None:
        super().__init__(list(searchpath))

    def get_source(self, environment: Any, template: str) -> tuple[str, str | None, Callable[[], bool] | None]:
        pieces = split_template_path(template)
        for root in self.searchpath:
            path = os.path.join(root, *pieces)
            if os.path.lexists(path):
                self._vet(root, pieces, template)
                break
        found = super().get_source(environment, template)
        _check_size(found[0], template)
        return found

    @staticmethod
    def _vet(root: str, pieces: list[str], template: str) -> None:
        where = root
        for piece in pieces:
            where = os.path.join(where, piece)
            if os.path.islink(where):
                raise RenderLimitError(f"{template}: refused: a symbolic link in the template folder {root} "
                                       "(templates are read only from regular files inside their folder)")
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, os.path.realpath(where)]) != real_root:
            raise RenderLimitError(f"{template}: refused: outside the template folder {root}")
        try:
            mode = os.stat(where).st_mode
        except OSError:
            raise TemplateNotFound(template) from None
        if not stat.S_ISREG(mode):
            raise RenderLimitError(f"{template}: refused: not a regular file (templates are read only from "
                                   "regular files inside their folder)")
