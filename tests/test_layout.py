"""The package layout and layering rules of design.md, checked."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG_DIRS = {"cli": "prefixcache.cli", "analyzer": "prefixcache.analyzer", "replay": "prefixcache.replay", "templates": "prefixcache.templates"}


def _declared() -> dict[str, str]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert sorted(cfg["packages"]) == sorted(cfg["package-dir"]), "packages and package-dir disagree"
    return cfg["package-dir"]


def test_every_package_folder_is_declared() -> None:
    declared = _declared()
    found = {}
    for top, name in PKG_DIRS.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).as_posix()
            found[name + rel[len(top):].replace("/", ".")] = rel
    found["prefixcache"] = "prefixcache_ns"
    assert found == declared


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the file's package
                parts = path.relative_to(ROOT).parent.parts
                base = parts[: len(parts) - node.level + 1]
                mods.add(".".join(base + ((node.module,) if node.module else ())))
            elif node.module:
                mods.add(node.module)
    return mods


def _top(mod: str) -> str:
    mod = mod.removeprefix("prefixcache.")
    return mod.split(".")[0]


def test_layering_cli_replay_analyzer() -> None:
    """cli → replay → analyzer, never upward; analyzer imports no rich/typer/torch."""
    forbidden = {
        "analyzer": {"cli", "replay", "rich", "typer", "torch", "transformers"},
        "replay": {"cli", "rich", "typer"},
    }
    bad = []
    for layer, banned in forbidden.items():
        for f in (ROOT / layer).rglob("*.py"):
            for mod in _imports(f):
                if _top(mod) in banned:
                    bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, bad


def test_analyzer_import_does_not_load_torch() -> None:
    import subprocess

    code = (
        "import sys, prefixcache.analyzer, pkgutil, importlib\n"
        "import prefixcache.analyzer as a\n"
        "for m in pkgutil.walk_packages(a.__path__, 'prefixcache.analyzer.'):\n"
        "    importlib.import_module(m.name)\n"
        "import prefixcache.cli.app\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "the lint/inspect path must not import torch"
