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
    ("model",),
    ("sequence",),  # the shared kernel: the one common-prefix helper,
    ("volatile", "identity", "redact"),  # ... and what builds on it
    ("ingest",),
    ("render",),
    ("tokenize",),
    ("prepare",),
    ("cache",),
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


def _layer(mod: str) -> int | None:
    """Index of the analyzer layer holding ``prefixcache.analyzer.X...`` (None outside analyzer)."""
    if not mod.startswith("prefixcache.analyzer."):
        return None
    head = mod.split(".")[2]
    for i, names in enumerate(ANALYZER_LAYERS):
        if head in names:
            return i
    raise AssertionError(f"{mod}: not in a declared analyzer layer (add it to ANALYZER_LAYERS)")


def test_analyzer_inner_layers_point_inwards() -> None:
    bad = []
    for f in _sources("analyzer"):
        me = _module(f)
        if me == "prefixcache.analyzer":
            continue
        mine = _layer(me)
        for line, mod, _ in _imports(f):
            theirs = _layer(mod)
            same_package = mod.split(".")[:3] == me.split(".")[:3]
            if theirs is not None and not same_package and theirs >= mine:
                bad.append(f"{f.relative_to(ROOT)}:{line} ({me}) imports {mod}")
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
