"""``prefixcache rules`` (list every rule) and ``prefixcache rule PCnnn`` (one rule's
documentation: what it does, why it breaks caching, example, use instead, fix safety)."""

from __future__ import annotations

import sys

import orjson
import typer
from rich.markdown import Markdown
from rich.table import Table

from prefixcache.analyzer.rules import RULES, SECTIONS, Rule, get_rule

from .common import console, fail, handle_errors


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


def register(app: typer.Typer) -> None:
    """Add the ``rules`` and ``rule`` commands to ``app``."""

    @app.command("rules")
    @handle_errors
    def rules(as_json: bool = typer.Option(False, "--json", help="Print the rules as a JSON list.")) -> None:
        """List every lint rule: code, name, group, severity, what it finds."""
        if as_json:
            sys.stdout.write(orjson.dumps([rule_dict(r) for r in RULES], option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        table = Table(show_edge=False)
        for col in ("code", "name", "group", "severity", "scope", "finds"):
            table.add_column(col)
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
