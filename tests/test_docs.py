"""The docs that come from the code cannot drift, and every machine-readable output
matches its published JSON Schema.

* ``scripts/gen_docs.py --check``: the rule pages, schemas, ``--help`` blocks of
  docs/commands/ and the package map of docs/architecture.md are what the code generates
  now (the fleet transcripts of docs/methods/fleet.md, which run simulations, in a slow test);
  every command has its ``--help`` block.
* Every snapshot output of ``tests/test_snapshots.py`` (each ``--json`` document on the
  examples and fixtures) validates against its schema in docs/schemas/ (replay's
  outputs are validated where the replay tests run the model).
* The report types behind the schemas are frozen, slotted, documented and exactly typed.
* Every relative link in README.md and docs/ resolves; the README stays short.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import types
import typing
from pathlib import Path

import orjson
import pytest

from tests.helpers import ROOT, validate
from tests.test_snapshots import CASES, SNAP


def _gen():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen()


def test_generated_docs_are_up_to_date() -> None:
    assert GEN.main(["--check", "--fast"]) == 0, "generated docs drifted from the code: run make docs"


@pytest.mark.slow
def test_generated_transcripts_are_up_to_date() -> None:
    """The command transcripts (``docs/methods/fleet.md``) are what the commands print now."""
    pages = GEN.generated_pages()
    slow = {p for p, text in pages.items() for what in GEN.BLOCK.findall(text) if GEN.slow_block(what[1])}
    assert slow, "no transcript blocks found"
    drift = [str(p.relative_to(ROOT)) for p in sorted(slow) if p.read_text() != pages[p]]
    assert not drift, f"{drift}: transcripts drifted from the commands' output: run make docs"


def test_every_command_has_its_generated_help_block() -> None:
    blocks = {m.group("what") for page in (ROOT / "docs" / "commands").glob("*.md")
              for m in GEN.BLOCK.finditer(page.read_text())}
    missing = [c for c in GEN.help_commands() if f"{c} --help" not in blocks]
    assert not missing, f"add a <!-- generated: ... --help --> block to docs/commands/ for {missing}"


def _schema_of(argv: list[str]) -> list[tuple[str, slice]]:
    """(schema, which JSON lines) for a snapshot's command line; [] for non-JSON output."""
    cmd = argv[0]
    if cmd == "inspect":
        return [("inspect-request", slice(0, -1)), ("inspect-summary", slice(-1, None))]
    if cmd == "lint":
        return [("lint", slice(None))] if argv[argv.index("--format") + 1] == "json" else []
    if cmd == "simulate":
        return [("simulate-per-request" if "--per-request" in argv else "simulate", slice(None))]
    if cmd == "check":
        return [("check", slice(None))]
    if cmd == "canonicalize":
        return [("canonicalize", slice(None))]
    return [("rules" if cmd == "rules" else "rule", slice(None))]


def _documents(name: str, argv: list[str]) -> list[object]:
    """The JSON documents of a snapshot: one per line for JSON Lines outputs, else one."""
    body = (SNAP / f"{name}.out").read_bytes().split(b"\n", 1)[1]
    if argv[0] == "canonicalize":  # the report is stderr (--out -)
        body = body.split(b"\n--- stderr ---\n", 1)[1]
    if argv[0] in ("inspect", "check", "canonicalize"):
        return [orjson.loads(line) for line in body.splitlines() if line.strip()]
    return [orjson.loads(body)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_json_output_matches_its_schema(name: str) -> None:
    argv = CASES[name]
    schemas = _schema_of(argv)
    if not schemas:
        return  # SARIF (external schema), GitHub and text outputs
    docs = _documents(name, argv)
    assert docs, name
    for schema, lines in schemas:
        for doc in docs[lines]:  # a provider cache whose log reports cached tokens adds analyses.provider_calls
            validate(doc, schema + "-analyses" if argv[0] == "simulate" and "analyses" in doc else schema)


def _nested(tp) -> typing.Iterator[type]:
    if dataclasses.is_dataclass(tp):
        yield tp
        for hint in typing.get_type_hints(tp).values():
            yield from _nested(hint)
    for arg in typing.get_args(tp):
        yield from _nested(arg)


def _loose(hint, where: str) -> list[str]:
    """Hints that would make a vague schema: Any, object, bare containers, non-str keys."""
    if hint in (typing.Any, object, dict, list, tuple, set):
        return [where]
    origin = typing.get_origin(hint)
    if origin in (dict, list, tuple) and not typing.get_args(hint):
        return [where]
    if origin is dict and typing.get_args(hint)[0] is not str:
        return [where]
    return [bad for arg in typing.get_args(hint) for bad in _loose(arg, where)]


@pytest.mark.parametrize("name", sorted(GEN.SCHEMAS))
def test_report_types_are_frozen_slotted_documented_and_exactly_typed(name: str) -> None:
    for cls in set(_nested(GEN._load(GEN.SCHEMAS[name][0]))):
        assert cls.__dataclass_params__.frozen and hasattr(cls, "__slots__"), cls
        assert cls.__doc__ and cls.__doc__.strip() and not cls.__doc__.startswith(cls.__name__ + "("), cls
        hints = typing.get_type_hints(cls)
        bad = [b for field in dataclasses.fields(cls) for b in _loose(hints[field.name], f"{cls.__name__}.{field.name}")]
        assert not bad, bad
        assert not any(isinstance(h, types.GenericAlias) and h.__origin__ is typing.Mapping for h in hints.values())


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_readme_is_short_and_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "make demo" in text and "make test" in text
