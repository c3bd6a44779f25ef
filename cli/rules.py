"""``prefixcache rules`` (list every rule, then the one severity table: code → severity → exit
effect, the rows ``docs/rules/index.md`` is generated from) and ``prefixcache rule PCnnn`` (one rule's
documentation: what it does, why it breaks caching, example, use instead, fix safety).

The documents come from the library (:mod:`prefixcache.analyzer.lint.rules.docs`):
``--json`` prints :class:`~prefixcache.analyzer.lint.rules.docs.RuleDoc` values.
"""

from __future__ import annotations

import sys

import orjson
import typer
from rich.markdown import Markdown
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from prefixcache.analyzer.lint.rules import RULES, get_rule, rule_doc, rule_markdown, rules_plain
from prefixcache.analyzer.lint.rules.docs import SEVERITY_INTRO, severity_rows

from prefixcache.cli.common import console, fail, handle_errors
from prefixcache.cli.options import AsJson, format_option, output_format


def _print_severities() -> None:
    table = Table(title="Severity (code → severity → exit effect)", title_justify="left", show_edge=False)
    for col in ("code", "severity"):
        table.add_column(col, no_wrap=True)
    table.add_column("exit effect (default --fail-on warning)", overflow="fold")
    table.add_column("differs when", overflow="fold")
    for r in severity_rows(RULES):
        table.add_row(*(cell.replace("`", "") for cell in (r.code, r.severity, r.exit_effect, r.differs_when)))
    console.print()
    console.print(table)
    console.print(Text(SEVERITY_INTRO.replace("`", ""), style="dim"))


def register(app: typer.Typer) -> None:
    """Add the ``rules`` and ``rule`` commands to ``app``."""

    @app.command("rules")
    @handle_errors
    def rules(
        fmt: format_option("Output: rich (a table; plain lines on a pipe, the default) or json.", metavar="FMT") = None,
        as_json: AsJson = False,
    ) -> None:
        """List every lint rule (code, name, group, severity, what it finds) and the severity table (exit effects)."""
        if output_format(fmt, as_json, ("rich", "json"), "rich") == "json":
            sys.stdout.write(orjson.dumps([rule_doc(r) for r in RULES], option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        if not console.is_terminal:
            sys.stdout.write("\n".join(rules_plain()) + "\n")
            return
        if console.width < 120:
            for r in RULES:  # narrow terminal: one heading line per rule, the summary wrapped below it
                head = Text.assemble((r.code, "bold"))
                head.append(f" {r.name}", style="bold magenta")
                head.append(f" · {r.group} · {r.severity} · {r.scope}", style="dim")
                console.print(head)
                console.print(Padding(Text(r.doc()["summary"]), (0, 0, 0, 6)))
            _print_severities()
            return
        table = Table(show_edge=False)
        for col in ("code", "name", "group", "severity", "scope"):
            table.add_column(col, no_wrap=True)
        table.add_column("finds", overflow="fold")
        for r in RULES:
            table.add_row(r.code, r.name, r.group, r.severity, r.scope, r.doc()["summary"])
        console.print(table)
        _print_severities()

    @app.command("rule")
    @handle_errors
    def rule(
        code: str = typer.Argument(..., help="A rule code (PC101) or name (volatile-timestamp)."),
        fmt: format_option("Output: rich (the rule's page, default) or json.", metavar="FMT") = None,
        as_json: AsJson = False,
    ) -> None:
        """Show one rule's documentation."""
        fmt = output_format(fmt, as_json, ("rich", "json"), "rich")
        try:
            found = get_rule(code)
        except KeyError:
            raise fail(f"unknown rule {code!r}; `prefixcache rules` lists them") from None
        if fmt == "json":
            sys.stdout.write(orjson.dumps(rule_doc(found), option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            console.print(Markdown(rule_markdown(found)))
