"""The package layout and the layering, checked on the source (AST, no imports).

Top layers: ``cli → replay → analyzer``, never upward; analyzer never imports
rich, typer, torch or transformers. Inside analyzer the layers below are declared
in order: a module may import its own package and any layer before its own,
never a later one — so a loop like cache → lint → rules → cache cannot come back.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from tests.helpers import ROOT

ROOTS = {"prefixcache": "prefixcache_ns", "prefixcache.cli": "cli", "prefixcache.analyzer": "analyzer",
         "prefixcache.replay": "replay", "prefixcache.templates": "templates"}

#: analyzer's layers, innermost first (a name is a root module or a subpackage).
ANALYZER_LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("limits",),  # the one resource budget of untrusted input
    ("stats",),  # the one Distribution (kernel: numpy only)
    ("replay_rows",),  # replay --out rows and their reader (read by html and the fleet; replay writes them)
    ("serving",),  # the serving figures of server replay rows (vllm bench serve's definitions)
    ("model",),
    ("sequence",),  # the shared kernel: the one common-prefix helper,
    ("volatile", "identity", "redact"),  # ... and what builds on it
    ("ingest",),
    ("render",),
    ("tokenize",),
    ("prepare",),
    ("cache",),
    ("columnar",),  # the Parquet block-hash trace writer (block ids from cache's hashes)
    ("export",),  # text-free block-hash traces for the peers (Mooncake, AIPerf), from columnar's block ids
    ("lint",),
    ("canonical",),
    ("check",),
    ("html",),  # the HTML report, built from the features' report objects
    ("api",),  # the facade the CLI calls: one entry point per command, above every feature
)


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_package_dir_lists_only_the_roots() -> None:
    assert _setuptools()["package-dir"] == ROOTS


def test_every_package_folder_is_declared() -> None:
    found = {"prefixcache"}
    for name, top in ROOTS.items():
        if name == "prefixcache":
            continue
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *rel)))
    assert sorted(found) == sorted(_setuptools()["packages"])


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT)
    top = {v: k for k, v in ROOTS.items()}[rel.parts[0]]
    parts = rel.with_suffix("").parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((top, *parts))


def _imports(path: Path) -> list[tuple[int, str, int]]:
    """(line, module imported, relative level) of every import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module or "", node.level))
    return out


def _sources(*tops: str) -> list[Path]:
    return [f for top in tops for f in sorted((ROOT / top).rglob("*.py"))]


def test_imports_are_absolute() -> None:
    bad = [f"{f.relative_to(ROOT)}:{line}" for f in _sources("analyzer", "cli", "replay")
           for line, _, level in _imports(f) if level]
    assert not bad, f"relative imports: {bad}"


def test_layering_cli_replay_analyzer() -> None:
    """cli → replay → analyzer, never upward; analyzer imports no rich/typer/torch."""
    forbidden = {
        "analyzer": ("prefixcache.cli", "prefixcache.replay", "rich", "typer", "torch", "transformers"),
        "replay": ("prefixcache.cli", "rich", "typer"),
    }
    bad = []
    for layer, banned in forbidden.items():
        for f in _sources(layer):
            for line, mod, _ in _imports(f):
                if any(mod == b or mod.startswith(b + ".") for b in banned):
                    bad.append(f"{f.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, bad


def _layer_in(mod: str, package: str, layers: tuple[tuple[str, ...], ...], name: str) -> int | None:
    """Index of the layer of ``package`` (dotted) holding module ``mod``: ``len(layers)`` for the
    package itself (its facade, above every layer), None outside the package. A module in no
    declared layer fails, naming the constant ``name`` to add it to."""
    if mod == package:
        return len(layers)
    if not mod.startswith(package + "."):
        return None
    head = mod.split(".")[package.count(".") + 1]
    for i, names in enumerate(layers):
        if head in names:
            return i
    raise AssertionError(f"{mod}: not in a declared layer (add it to {name})")


def _outward_imports(folder: str, package: str, layers: tuple[tuple[str, ...], ...], name: str) -> list[str]:
    """``file:line (module) imports X`` for every import in ``folder`` (the source of ``package``)
    of a layer at or above the importer's own, outside the importer's own sub-package. Importing
    the package itself (``from package import sub``) names a sub-module and is judged by it."""
    depth = package.count(".") + 2
    bad = []
    for f in _sources(folder):
        me = _module(f)
        mine = _layer_in(me, package, layers, name)
        for line, mod, _ in _imports(f):
            theirs = None if mod == package else _layer_in(mod, package, layers, name)
            if theirs is not None and mod.split(".")[:depth] != me.split(".")[:depth] and theirs >= mine:
                bad.append(f"{f.relative_to(ROOT)}:{line} ({me}) imports {mod}")
    return bad


def _layer(mod: str) -> int | None:
    """Index of the analyzer layer holding ``prefixcache.analyzer.X...`` (None outside analyzer)."""
    return None if mod == "prefixcache.analyzer" else _layer_in(mod, "prefixcache.analyzer", ANALYZER_LAYERS,
                                                              "ANALYZER_LAYERS")


def test_analyzer_inner_layers_point_inwards() -> None:
    bad = _outward_imports("analyzer", "prefixcache.analyzer", ANALYZER_LAYERS, "ANALYZER_LAYERS")
    assert not bad, "\n".join(bad)


def test_every_analyzer_module_is_in_a_layer() -> None:
    for f in _sources("analyzer"):
        me = _module(f)
        if me != "prefixcache.analyzer":
            _layer(me)


def test_analyzer_import_does_not_load_torch() -> None:
    import subprocess

    code = (
        "import sys, pkgutil, importlib\n"
        "import prefixcache.analyzer as a\n"
        "for m in pkgutil.walk_packages(a.__path__, 'prefixcache.analyzer.'):\n"
        "    importlib.import_module(m.name)\n"
        "import prefixcache.cli.app\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "the lint/inspect path must not import torch"


#: analyzer/cache's inner layers, innermost first (a sub-package or a root module of cache):
#: the interface and its cap rule, the index structures, the provider rules and caches, what
#: the simulator steps over (requests, capacities), the cache models, the sequential
#: simulation, the fleet. ``cache/__init__`` counts as the top.
CACHE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("index",),
    ("provider",),
    ("workload", "capacity"),
    ("models",),
    ("simulate",),
    ("fleet",),
)
_CACHE = "prefixcache.analyzer.cache"


def test_cache_inner_layers_point_inwards() -> None:
    """A module of ``cache.X`` imports its own sub-package and earlier layers only."""
    bad = _outward_imports("analyzer/cache", _CACHE, CACHE_LAYERS, "CACHE_LAYERS")
    assert not bad, "\n".join(bad)


def _import_graph(*tops: str) -> dict[str, set[str]]:
    """Module → the project modules it imports, at any depth of the file (a function-level
    import counts: a lazy import that breaks a cycle is still a cycle). ``from P import x``
    names the module ``P.x`` when that is a module, else ``P``; a package's ``__init__`` is
    not implied by importing one of its modules."""
    files = {_module(f): f for f in _sources(*tops)}
    graph: dict[str, set[str]] = {}
    for me, f in files.items():
        out = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                        for a in node.names}
        graph[me] = {m for m in out if m in files and m != me}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    """No import cycle anywhere in analyzer, replay and cli (function-level imports included)."""
    cycles = _cycles(_import_graph("analyzer", "replay", "cli"))
    assert not cycles, "\n".join(" → ".join(c) for c in cycles)

#: replay's layers, innermost first: the shared base, then the two stacks (which never
#: import each other), then the facade (``replay/__init__.py``, which alone knows both).
REPLAY_LAYERS: tuple[tuple[str, ...], ...] = (
    ("options",),
    ("document",),
    ("prompts", "results"),
    ("context",),
    ("local", "server"),
)


def test_replay_inner_layers_point_inwards() -> None:
    """options < document < prompts, results < context < local | server < the facade: the
    base never imports a stack, and local and server never import each other."""
    bad = _outward_imports("replay", "prefixcache.replay", REPLAY_LAYERS, "REPLAY_LAYERS")
    assert not bad, "\n".join(bad)


#: The files that may name cache models and server kinds: the two registries.
REGISTRIES = ("analyzer/cache/models/", "replay/server/kinds.py")
#: Names a comparison may be a switch on.
SWITCHED = {"cache", "kind", "cache_name", "server_kind", "engine"}


def _switches(path: Path, names: set[str]) -> list[str]:
    """``line: source`` of every comparison in ``path`` of a variable or attribute named as in
    :data:`SWITCHED` with a string literal (or a tuple/list/set of them) among ``names``."""
    def named(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id in SWITCHED) or (
            isinstance(node, ast.Attribute) and node.attr in SWITCHED)

    def literals(node: ast.AST) -> set[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}

    src = path.read_text()
    out = []
    for node in ast.walk(ast.parse(src, str(path))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(named(s) for s in sides) and any(literals(s) & names for s in sides):
                out.append(f"{path}:{node.lineno}: {ast.get_source_segment(src, node)}")
    return out


def test_no_cache_or_server_kind_switch_outside_the_registries(tmp_path: Path) -> None:
    """Which caches exist and what each does is said by the registries alone: nothing else
    compares a cache name (``--cache``) or a server kind with a literal."""
    from prefixcache.analyzer.cache.models import CACHES
    from prefixcache.replay.server.kinds import KINDS

    names = set(CACHES) | set(KINDS)
    bad = [hit for f in _sources("analyzer", "replay", "cli")
           if not str(f.relative_to(ROOT)).startswith(REGISTRIES) for hit in _switches(f, names)]
    assert not bad, "\n".join(bad)
    planted = tmp_path / "switch_probe.py"
    planted.write_text('def f(spec, info):\n    return spec.cache in ("vllm", "blocks") or info.kind == "llamacpp"\n')
    assert len(_switches(planted, names)) == 2


#: The most lines a CLI module holds: it parses, calls and renders, nothing more.
CLI_MAX_LINES = 220


def test_cli_modules_are_short() -> None:
    long = {str(f.relative_to(ROOT)): n for f in _sources("cli")
            if (n := len(f.read_text().splitlines())) > CLI_MAX_LINES}
    assert not long, f"over {CLI_MAX_LINES} lines: {long}"


def _chain(layers: tuple[tuple[str, ...], ...]) -> str:
    """``a < b, c < d``: the layers as docs/architecture.md writes them."""
    return " < ".join(", ".join(names) for names in layers)


def test_architecture_doc_states_the_declared_layers() -> None:
    """docs/architecture.md writes each layer chain exactly as declared here (it cannot drift)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    for layers in (ANALYZER_LAYERS, CACHE_LAYERS, REPLAY_LAYERS):
        assert f"  {_chain(layers)}\n" in text, f"docs/architecture.md lacks the line: {_chain(layers)}"
