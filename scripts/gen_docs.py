"""Generate the docs that come from the code: rule pages and JSON Schemas.

* ``docs/rules/index.md`` and ``docs/rules/PCnnn.md``: every lint rule's documentation,
  from the rule classes (``prefixcache.analyzer.lint.rules``).
* ``docs/schemas/<name>.schema.json``: a JSON Schema (draft 2020-12) per machine-readable
  output, derived from the typed report dataclass that produces it (pydantic's
  ``TypeAdapter``; every property required, no others allowed), and ``index.md``.

``python scripts/gen_docs.py`` writes them; ``--check`` writes nothing and exits 1
naming every file that differs from what the code generates (``tests/test_docs.py``
runs the check, so pages and schemas cannot drift from the code).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Schema name -> (the report type that produces the output, "module:Name" or "list[module:Name]";
#: which output it describes).
SCHEMAS: dict[str, tuple[str, str]] = {
    "inspect-request": ("prefixcache.analyzer.prepare.inspect:InspectRecord",
                        "inspect --format json: every line but the last (JSON Lines)"),
    "inspect-summary": ("prefixcache.analyzer.prepare.inspect:InspectSummaryLine",
                        "inspect --format json: the last line"),
    "lint": ("prefixcache.analyzer.lint.document:LintReport", "lint --format json"),
    "diff": ("prefixcache.analyzer.lint.diff:DiffReport", "diff --format json"),
    "simulate": ("prefixcache.analyzer.cache.simulate.document:SimulateReport", "simulate --format json"),
    "simulate-per-request": ("prefixcache.analyzer.cache.simulate.document:SimulateReportWithRequests",
                             "simulate --format json --per-request"),
    "simulate-fleet": ("prefixcache.analyzer.cache.fleet.document:FleetReport",
                       "simulate --replicas N --format json"),
    "canonicalize": ("prefixcache.analyzer.canonical.document:CanonicalizeReport",
                     "canonicalize --format json (the report; stderr when --out -)"),
    "check": ("prefixcache.analyzer.check.document:TemplateRecord",
              "check --format json: one line per template (JSON Lines)"),
    "rules": ("list[prefixcache.analyzer.lint.rules.docs:RuleDoc]", "rules --json"),
    "rule": ("prefixcache.analyzer.lint.rules.docs:RuleDoc", "rule CODE --json"),
    "replay": ("prefixcache.replay.local.document:ReplayReport", "replay --format json"),
    "replay-result": ("prefixcache.replay.local.results:RequestResult", "replay --out FILE: one line per request and pass"),
    "replay-server": ("prefixcache.replay.server.document:ServerReport", "replay --server URL --format json"),
    "replay-server-result": ("prefixcache.replay.server.results:ServedResult",
                             "replay --server URL --out FILE: one line per request and pass"),
}


def _load(ref: str) -> Any:
    """The type named by ``ref`` (``module:Name`` or ``list[module:Name]``)."""
    if ref.startswith("list[") and ref.endswith("]"):
        return list[_load(ref[5:-1])]
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _derived(tp: Any) -> dict[str, dict]:
    """Schemas of the derived figures a row type appends after its fields (``DERIVED``
    properties, typed by their return annotations)."""
    from pydantic import TypeAdapter

    out = {}
    for name in getattr(tp, "DERIVED", ()):
        fget = getattr(tp, name).fget
        out[name] = {"description": (fget.__doc__ or "").strip(),
                     **TypeAdapter(typing.get_type_hints(fget)["return"]).json_schema()}
    return out


def _tighten(node: Any) -> Any:
    """Drop pydantic's generated titles; make every property required and no other allowed."""
    if isinstance(node, dict):
        out = {k: _tighten(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if isinstance(out.get("properties"), dict):
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_tighten(v) for v in node]
    return node


def schema(name: str) -> dict:
    """The JSON Schema of output ``name`` (see :data:`SCHEMAS`)."""
    from pydantic import TypeAdapter

    ref, what = SCHEMAS[name]
    tp = _load(ref)
    raw = TypeAdapter(tp).json_schema(mode="serialization")
    raw["properties"] = {**raw.get("properties", {}), **_derived(tp)} if "properties" in raw else raw.get("properties")
    if raw["properties"] is None:
        del raw["properties"]
    body = _tighten(raw)
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://prefixcache.dev/schemas/{name}.schema.json",
            "title": f"prefixcache {name}", "x-output": what}
    return {**head, **body}


def rule_pages() -> dict[Path, str]:
    """``docs/rules/index.md`` and one page per rule."""
    from prefixcache.analyzer.lint.rules import RULES, rule_markdown

    rows = ["# Lint rules", "", "Generated from the rule classes by `scripts/gen_docs.py`; do not edit.",
            "Codes are permanent and never reused. `prefixcache rule CODE` prints a page in the terminal.", "",
            "| code | name | group | severity | judges | finds |", "|---|---|---|---|---|---|"]
    pages = {}
    for r in RULES:
        judges = "single request" if r.scope == "request" else "pair of requests"
        rows.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.group} | {r.severity} | {judges} | "
                    f"{r.doc()['summary'].splitlines()[0]} |")
        pages[DOCS / "rules" / f"{r.code}.md"] = rule_markdown(r, level=1) + "\n"
    pages[DOCS / "rules" / "index.md"] = "\n".join(rows) + "\n"
    return pages


def schema_index() -> str:
    """``docs/schemas/index.md``: which schema describes which output."""
    rows = ["# JSON Schemas of the machine-readable outputs", "",
            "Generated from the typed report classes by `scripts/gen_docs.py`; do not edit. Every property is",
            "required and no other is allowed; `tests/test_docs.py` validates each command's output against them.", "",
            "| schema | output | report type |", "|---|---|---|"]
    for name, (ref, what) in SCHEMAS.items():
        rows.append(f"| [{name}]({name}.schema.json) | `{what}` | `{ref}` |")
    return "\n".join(rows) + "\n"


def outputs() -> dict[Path, str]:
    """Every generated file and its text."""
    files = rule_pages()
    for name in SCHEMAS:
        files[DOCS / "schemas" / f"{name}.schema.json"] = json.dumps(schema(name), indent=2, ensure_ascii=False) + "\n"
    files[DOCS / "schemas" / "index.md"] = schema_index()
    return files


def stale(files: dict[Path, str]) -> list[str]:
    """Generated files that are missing or differ on disk, and stray files in the generated folders."""
    out = [str(p.relative_to(ROOT)) for p, text in files.items() if not p.exists() or p.read_text() != text]
    for folder in (DOCS / "rules", DOCS / "schemas"):
        out += [str(p.relative_to(ROOT)) for p in sorted(folder.glob("*")) if p not in files]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file drifted")
    args = parser.parse_args(argv)
    files = outputs()
    if args.check:
        drift = stale(files)
        for path in drift:
            print(f"out of date: {path} (run python scripts/gen_docs.py)", file=sys.stderr)
        return 1 if drift else 0
    for folder in (DOCS / "rules", DOCS / "schemas"):
        for p in folder.glob("*"):
            if p not in files:
                p.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files under docs/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
