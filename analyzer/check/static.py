"""Static checks of a Jinja2 prompt template, on the parsed AST (jinja2's own parser).

Each check names a construct that makes a rendered prefix differ between two
renders of the same conversation (docs/references.md: goose #2431 clock
in the system prompt, codex #2610 / redpanda #157 map iteration order, Bifrost
#2347 unsorted JSON keys, oh-my-openagent #6881 ids in the prompt):

* a call of a clock function (``now()``, ``utcnow``, ``strftime_now``, ``.today()``, ...) → PC101
* randomness (``random`` filter or call, ``uuid4()``, ``shuffle``) → PC102
* a ``for`` over ``.items()/.keys()/.values()`` not wrapped in ``sort``/``dictsort`` → PC201
  (tool lists) or PC402 (other content)
* ``tojson`` without ``sort_keys=True`` → PC203
* an ``include``/``import`` whose name is computed, or whose file holds volatile text → PC103

Findings carry the template file and 1-based line. The boundary comment
``{# prefixcache: dynamic-below #}`` is located here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateNotFound, TemplateSyntaxError

from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.volatile import find_volatile

BOUNDARY_RE = re.compile(r"\{#-?\s*prefixcache:\s*dynamic-below\s*-?#\}")
#: Free functions (``now()``) and methods (``datetime.utcnow()``) that read the clock.
_CLOCK_FUNCS = frozenset({"now", "utcnow", "today", "time", "datetime", "date", "strftime_now", "current_time",
                          "current_date", "timestamp", "localtime", "gmtime", "monotonic", "time_ns"})
_CLOCK_METHODS = frozenset({"now", "utcnow", "today", "strftime_now", "localtime", "gmtime", "monotonic", "time_ns"})
_RANDOM_FUNCS = frozenset({"random", "randint", "choice", "uuid", "uuid1", "uuid4", "shuffle", "token_hex", "nonce",
                           "urandom", "random_id", "randrange", "new_id"})
_RANDOM_METHODS = _RANDOM_FUNCS - {"uuid", "nonce", "choice"}
_MAPPING_ITER = frozenset({"items", "keys", "values", "iteritems"})
_SORTING_FILTERS = frozenset({"sort", "dictsort"})


@dataclass(frozen=True, slots=True)
class StaticFinding:
    """One construct that can vary between renders: rule ``code``, ``message``,
    template ``file`` and 1-based ``line``."""

    code: str
    message: str
    file: str
    line: int


def boundary_line(source: str) -> int | None:
    """1-based line of the first ``{# prefixcache: dynamic-below #}`` comment, or None."""
    m = BOUNDARY_RE.search(source)
    return source.count("\n", 0, m.start()) + 1 if m else None


def _callee(node: nodes.Call) -> tuple[str, bool]:
    """The called name and whether it is a method (``x.name()``) rather than a function."""
    if isinstance(node.node, nodes.Name):
        return node.node.name, False
    if isinstance(node.node, nodes.Getattr):
        return node.node.attr, True
    return "", False


def _iterated_name(node: nodes.Node) -> str:
    while isinstance(node, (nodes.Getattr, nodes.Call, nodes.Filter)):
        node = node.node
    return node.name if isinstance(node, nodes.Name) else ""


def _mapping_iteration(loop: nodes.For) -> nodes.Call | None:
    """The ``x.items()``-like call a for-loop iterates directly (no sort in between)."""
    it = loop.iter
    while isinstance(it, nodes.Filter) and it.name not in _SORTING_FILTERS and it.node is not None:
        it = it.node
    if isinstance(it, nodes.Filter) and it.name in _SORTING_FILTERS:
        return None
    if isinstance(it, nodes.Call) and isinstance(it.node, nodes.Getattr) and it.node.attr in _MAPPING_ITER:
        return it
    return None


def _node_findings(ast: nodes.Template, file: str) -> Iterator[StaticFinding]:
    for call in ast.find_all(nodes.Call):
        name, method = _callee(call)
        if name in (_CLOCK_METHODS if method else _CLOCK_FUNCS):
            yield StaticFinding("PC101", f"clock call `{name}()` renders the wall clock", file, call.lineno)
        elif name in (_RANDOM_METHODS if method else _RANDOM_FUNCS):
            yield StaticFinding("PC102", f"random call `{name}()` renders a fresh value each time", file, call.lineno)
    for flt in ast.find_all(nodes.Filter):
        if flt.name == "random":
            yield StaticFinding("PC102", "`random` filter picks a different item each render", file, flt.lineno)
        elif flt.name == "shuffle":
            yield StaticFinding("PC102", "`shuffle` filter reorders each render", file, flt.lineno)
        elif flt.name == "tojson":
            sort = next((kw.value for kw in flt.kwargs if kw.key == "sort_keys"), None)
            if not (isinstance(sort, nodes.Const) and sort.value is True):
                yield StaticFinding(
                    "PC203", "`tojson` without sort_keys=True: key order follows the caller's dict", file, flt.lineno
                )
    for loop in ast.find_all(nodes.For):
        call = _mapping_iteration(loop)
        if call is not None:
            what = _iterated_name(call)
            code = "PC201" if "tool" in what.lower() else "PC402"
            yield StaticFinding(
                code, f"loop over `{what}.{call.node.attr}()` without `|dictsort`: order follows insertion", file,
                loop.lineno,
            )


def _include_findings(env: Environment, ast: nodes.Template, file: str, seen: set[str]) -> Iterator[StaticFinding]:
    for inc in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport)):
        target = inc.template
        if not isinstance(target, nodes.Const) or not isinstance(target.value, str):
            yield StaticFinding("PC103", "include with a computed name: its content can vary per render", file,
                                inc.lineno)
            continue
        name = target.value
        if name in seen:
            continue
        seen.add(name)
        try:
            source, _filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        except TemplateNotFound:
            if getattr(inc, "ignore_missing", False):
                continue
            raise ConfigError(f"{file}:{inc.lineno}: included template {name!r} not found") from None
        spans = find_volatile(BOUNDARY_RE.sub("", source))
        if spans:
            s = spans[0]
            yield StaticFinding("PC103", f"included {name!r} holds a {s.kind} ({s.text!r}): its content varies",
                                file, inc.lineno)
        yield from static_findings(env, source, name, seen)


def static_findings(env: Environment, source: str, file: str, seen: set[str] | None = None) -> list[StaticFinding]:
    """All static findings of ``source`` (and of the templates it includes, by their
    own file names), sorted by file and line. Raises ConfigError on a syntax error."""
    try:
        ast = env.parse(source, name=file)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"{file}:{exc.lineno}: template syntax error: {exc.message}") from None
    seen = set() if seen is None else seen
    found = list(_node_findings(ast, file)) + list(_include_findings(env, ast, file, seen))
    unique = {(f.file, f.line, f.code, f.message): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.file != file, f.file, f.line, f.code))
