"""``prefixcache rules`` (list every rule) and ``prefixcache rule PCnnn`` (one rule's
documentation: what it does, why it breaks caching, example, use instead, fix safety)."""

from __future__ import annotations

import sys

import orjson
import typer
from rich.markdown import Markdown
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from prefixcache.analyzer.lint.rules import RULES, SECTIONS, Rule, get_rule

from prefixcache.cli.common import console, fail, handle_errors


def rule_dict(rule: Rule) -> dict:
    """A rule as JSON: code, name, group, severity, scope, fix, and its doc sections."""
    doc = rule.doc()
    return {"code": rule.code, "name": rule.name, "group": rule.group, "severity": rule.severity,
            "scope": rule.scope, "summary": doc["summary"], "fix": rule.fix,
            **{sec.lower().replace(" ", "_"): doc[sec] for sec in SECTIONS}}


def rule_markdown(rule: Rule, level: int = 3) -> str:
    """One rule's documentation as Markdown (also used to build the README section)."""
    doc = rule.doc()
    out = [f"{'#' * level} {rule.code} `{rule.name}`", "", f"{doc['summary']} *(group {rule.group}, default severity "
           f"{rule.severity}, {'single request' if rule.scope == 'request' else 'pair of requests'})*", ""]
    for sec in SECTIONS:
        body = doc[sec]
        if sec == "Example":
            out += [f"**{sec}:**", "", "```", body, "```", ""]
        else:
            out += [f"**{sec}:** {' '.join(body.split())}", ""]
    return "\n".join(out)


def rules_plain() -> list[str]:
    """The rules table as plain aligned text (pipes, CI logs): one line per rule,
    nothing cut, no box drawing, no trailing spaces."""
    rows = [("code", "name", "group", "severity", "scope", "finds")]
    rows += [(r.code, r.name, r.group, r.severity, r.scope, r.doc()["summary"]) for r in RULES]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5] for row in rows]


def register(app: typer.Typer) -> None:
    """Add the ``rules`` and ``rule`` commands to ``app``."""

    @app.command("rules")
    @handle_errors
    def rules(as_json: bool = typer.Option(False, "--json", help="Print the rules as a JSON list.")) -> None:
        """List every lint rule: code, name, group, severity, what it finds."""
        if as_json:
            sys.stdout.write(orjson.dumps([rule_dict(r) for r in RULES], option=orjson.OPT_INDENT_2).decode() + "\n")
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
            return
        table = Table(show_edge=False)
        for col in ("code", "name", "group", "severity", "scope"):
            table.add_column(col, no_wrap=True)
        table.add_column("finds", overflow="fold")
        for r in RULES:
            table.add_row(r.code, r.name, r.group, r.severity, r.scope, r.doc()["summary"])
        console.print(table)

    @app.command("rule")
    @handle_errors
    def rule(
        code: str = typer.Argument(..., help="A rule code (PC101) or name (volatile-timestamp)."),
        as_json: bool = typer.Option(False, "--json", help="Print the rule as JSON."),
    ) -> None:
        """Show one rule's documentation."""
        try:
            found = get_rule(code)
        except KeyError:
            raise fail(f"unknown rule {code!r}; `prefixcache rules` lists them") from None
        if as_json:
            sys.stdout.write(orjson.dumps(rule_dict(found), option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            console.print(Markdown(rule_markdown(found)))
