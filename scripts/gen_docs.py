"""Generate the docs that come from the code: rule pages, JSON Schemas, help blocks, package map.

* ``docs/rules/index.md`` and ``docs/rules/PCnnn.md``: every lint rule's documentation,
  from the rule classes (``prefixcache.analyzer.lint.rules``).
* ``docs/schemas/<name>.schema.json``: a JSON Schema (draft 2020-12) per machine-readable
  output, derived from the typed report dataclass that produces it (pydantic's
  ``TypeAdapter``; every property required, no others allowed), and ``index.md``.
* Generated blocks inside hand-written pages (the prose around them is kept): a block
  opens with ``<!-- generated: WHAT -->`` and closes with ``<!-- end generated -->``.
  ``WHAT`` is ``prefixcache ARGS`` (a command's output, run in-process on the typer app
  with :data:`COLUMNS` columns and no colour: the ``--help`` blocks of ``docs/commands/``;
  ``COLUMNS=N prefixcache ARGS`` sets the width, and stdout and stderr are shown as a
  terminal interleaves them: the transcripts of ``docs/methods/fleet.md``) or
  ``package map`` (every package and module under ``analyzer/``, ``replay/`` and ``cli/``
  with the first line of its docstring, read from the source: ``docs/architecture.md``).

``python scripts/gen_docs.py`` writes them; ``--check`` writes nothing and exits 1
naming every file that differs from what the code generates (``tests/test_docs.py``
runs the check, so pages, schemas and blocks cannot drift from the code; ``--fast``
leaves out the blocks that run a simulation, which a slow test checks).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import re
import shlex
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# The transcripts are made as the tests check them (tests/conftest.py): no tiktoken rank file
# that somebody cached on this machine may change which tokenizer ``auto`` picks.
if "TIKTOKEN_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["TIKTOKEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="prefixcache-tiktoken-")
os.environ.pop("DATA_GYM_CACHE_DIR", None)

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
    "simulate-analyses": ("prefixcache.analyzer.cache.simulate.analyses:SimulateReportWithAnalyses",
                          "simulate --format json --survival / --ttl-whatif / --reuse prefix,chunks, and every "
                          "provider cache (--cache openai / anthropic / gemini / deepseek) whose log reports cached "
                          "tokens: analyses.provider_calls"),
    "simulate-per-request-analyses": (
        "prefixcache.analyzer.cache.simulate.analyses:SimulateReportWithRequestsAndAnalyses",
        "simulate --format json --per-request with an analysis (the provider caches' analyses.provider_calls too)"),
    "simulate-fleet": ("prefixcache.analyzer.cache.fleet.document:FleetReport",
                       "simulate --replicas N --format json"),
    "calibrate": ("prefixcache.analyzer.cache.fleet.calibration:TierCalibration",
                  "calibrate --out FILE (and --format json): the tier calibration simulate --calibrate reads"),
    "canonicalize": ("prefixcache.analyzer.canonical.document:CanonicalizeReport",
                     "canonicalize --format json (the report; stderr when --out -)"),
    "check": ("prefixcache.analyzer.check.document:TemplateRecord",
              "check --format json: one line per template (JSON Lines)"),
    "rules": ("list[prefixcache.analyzer.lint.rules.docs:RuleDoc]", "rules --json"),
    "rule": ("prefixcache.analyzer.lint.rules.docs:RuleDoc", "rule CODE --json"),
    "replay": ("prefixcache.replay.document:ReplayReport", "replay --format json"),
    "replay-result": ("prefixcache.analyzer.replay_rows:LocalRow", "replay --out FILE: one line per request and pass"),
    "replay-server": ("prefixcache.replay.document:ServerReport", "replay --server URL --format json"),
    "replay-server-result": ("prefixcache.analyzer.replay_rows:ServerRow",
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
    from prefixcache.analyzer.lint.rules.docs import SEVERITY_INTRO, severity_rows

    rows = ["# Lint rules", "", "Generated from the rule classes by `scripts/gen_docs.py`; do not edit.",
            "Codes are permanent and never reused. `prefixcache rule CODE` prints a page in the terminal.", "",
            "| code | name | group | severity | judges | finds |", "|---|---|---|---|---|---|"]
    pages = {}
    for r in RULES:
        judges = "single request" if r.scope == "request" else "pair of requests"
        rows.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.group} | {r.severity} | {judges} | "
                    f"{r.doc()['summary'].splitlines()[0]} |")
        pages[DOCS / "rules" / f"{r.code}.md"] = rule_markdown(r, level=1) + "\n"
    rows += ["", "## Severity", "", f"The one table of severities (code → severity → exit effect). {SEVERITY_INTRO}",
             "", "| code | default severity | differs when | exit effect (default `--fail-on warning`) |",
             "|---|---|---|---|"]
    rows += [f"| {r.code} | {r.severity} | {r.differs_when} | {r.exit_effect} |" for r in severity_rows(RULES)]
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


#: Terminal width of the generated ``--help`` blocks (click wraps help at 80 columns at most).
COLUMNS = 100
#: The folders whose Python packages the package map lists (the import roots of pyproject.toml).
PACKAGES = ("analyzer", "replay", "cli")
#: Pages that hold generated blocks (every ``*.md`` under docs/ is searched for markers).
BLOCK = re.compile(r"(<!-- generated: (?P<what>[^>]+?) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
#: Width of the package map's lines; longer docstring lines are cut at a word with "…".
MAP_WIDTH = 118


def run_command(what: str) -> str:
    """The terminal output of ``[COLUMNS=N] prefixcache ARGS``, run in-process (click's
    runner: stdout and stderr interleaved as written), from the repository root."""
    from click.testing import CliRunner

    from prefixcache.cli.app import command

    words = shlex.split(what)
    env = {"COLUMNS": str(COLUMNS), "NO_COLOR": "1", "TERM": "dumb"}
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "prefixcache", what
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner(env=env).invoke(command(), words[1:], prog_name="prefixcache")
    finally:
        os.chdir(cwd)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise RuntimeError(f"{what}: {result.exception!r}")
    return result.output


def _first_line(path: Path) -> str:
    """The first sentence of a module's docstring (its first paragraph up to a full stop
    followed by a capital), read from the source (no import), without markup; "" when the
    docstring is missing or only repeats the module's dotted name."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    para = " ".join(doc.strip().split("\n\n", 1)[0].split()) if doc.strip() else ""
    if re.fullmatch(r"[\w.]+", para):
        return ""
    para = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"\1", para).replace("``", "`")
    return re.split(r"(?<=[a-z0-9)`])\. (?=[A-Z])", para, maxsplit=1)[0].rstrip(".")


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[:width - 1].rsplit(" ", 1)[0].rstrip(",;:(") + "…"


def _tree(folder: Path, depth: int) -> list[tuple[str, str]]:
    """(indented name, first docstring line) of every module and subpackage of ``folder``:
    modules first, then subpackages (each followed by its own tree), alphabetically."""
    rows = []
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file())
    for p in modules:
        rows.append(("  " * depth + p.name, _first_line(p)))
    for p in packages:
        rows.append(("  " * depth + p.name + "/", _first_line(p / "__init__.py")))
        rows += _tree(p, depth + 1)
    return rows


def package_map() -> str:
    """The package map of ``docs/architecture.md``: every package and module of :data:`PACKAGES`."""
    rows = []
    for top in PACKAGES:
        rows.append((top + "/", _first_line(ROOT / top / "__init__.py")))
        rows += _tree(ROOT / top, 1)
    width = max(len(name) for name, _ in rows) + 2
    lines = [f"{name:<{width}}{_cut(line, MAP_WIDTH - width)}".rstrip() for name, line in rows]
    return "```text\n" + "\n".join(lines) + "\n```\n"


def limits_table() -> str:
    """The table of ``docs/security.md``: every limit of :data:`prefixcache.analyzer.limits.LIMITS`."""
    from prefixcache.analyzer.limits import LIMITS

    def shown(value: float, unit: str) -> str:
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
            if unit in ("bytes", "characters") and value >= size and value % size == 0:
                return f"{int(value) // size} {name}" + ("" if unit == "bytes" else " characters")
        return f"{value:g}{unit}" if unit == "×" else f"{value:g} {unit}"

    rows = ["| limit | default | environment | bounds |", "|---|---|---|---|"]
    rows += [f"| `{lim.name}` | {shown(lim.default, lim.unit)} | `{lim.env}` | {lim.what} |" for lim in LIMITS.values()]
    return "\n".join(rows) + "\n"


def _block(what: str) -> str:
    """The text between a block's markers."""
    if what == "package map":
        return package_map()
    if what == "limits":
        return limits_table()
    out = "".join(line.rstrip() + "\n" for line in run_command(what).splitlines())  # rich pads lines
    shown = what.split(" ", 1)[1] if what.startswith("COLUMNS=") else what
    return "```text\n$ " + shown + "\n" + out + "```\n"


def slow_block(what: str) -> bool:
    """Blocks that run a simulation (seconds each): all but ``--help`` and the package map."""
    return what not in ("package map", "limits") and not what.endswith("--help")


def generated_pages(fast: bool = False) -> dict[Path, str]:
    """Every page under docs/ that holds generated blocks, with its blocks regenerated
    (``fast``: the :func:`slow_block` ones kept as they are)."""
    pages = {}
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        if "<!-- generated: " not in text:
            continue

        def fill(m: re.Match) -> str:
            what = m.group("what")
            body = m.group("body") if fast and slow_block(what) else _block(what)
            return m.group(1) + body + m.group(4)

        pages[page] = BLOCK.sub(fill, text)
    return pages


def help_commands() -> list[str]:
    """Every command of the typer app as ``prefixcache NAME`` (each must have a ``--help`` block)."""
    from prefixcache.cli.app import command

    return [f"prefixcache {name}" for name in sorted(command().commands)]


def outputs(fast: bool = False) -> dict[Path, str]:
    """Every generated file and its text (``fast``: see :func:`generated_pages`)."""
    files = rule_pages()
    for name in SCHEMAS:
        files[DOCS / "schemas" / f"{name}.schema.json"] = json.dumps(schema(name), indent=2, ensure_ascii=False) + "\n"
    files[DOCS / "schemas" / "index.md"] = schema_index()
    files.update(generated_pages(fast))
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
    parser.add_argument("--fast", action="store_true", help="leave the blocks that run a simulation as they are")
    args = parser.parse_args(argv)
    files = outputs(args.fast)
    if args.check:
        drift = stale(files)
        for path in drift:
            print(f"out of date: {path} (run make docs)", file=sys.stderr)
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
