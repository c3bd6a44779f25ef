"""``prefixcache check``: the CI gate for Jinja2 prompt templates.

Renders each template with each context and with automatic variations (clock,
ids, order, whitespace), tokenizes, and fails when the stable prefix is too short,
a varying value renders above ``{# prefixcache: dynamic-below #}`` or in the first
line, or turn N's prompt is not a token prefix of turn N+1's above the boundary.
Exit codes: 0 every template passes, 1 a template fails, 2 usage or input error.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer import api
from prefixcache.analyzer.api import CheckOptions
from prefixcache.analyzer.check.checker import TemplateReport
from prefixcache.analyzer.check.run import template_record
from prefixcache.analyzer.check.vary import VARIATIONS

from prefixcache.cli.common import EXIT_FINDINGS, EXIT_OK, console, exit_code_if_stopped, handle_errors
from prefixcache.cli.options import AsJson, Tokenizer, format_option, output_format, seed_option


def _print(r: TemplateReport) -> None:
    verdict = "[bold green]PASS[/]" if r.passed else "[bold red]FAIL[/]"
    boundary = f"boundary at line {r.boundary_line}" if r.boundary_line else "no dynamic-below boundary"
    console.print(f"{verdict} {escape(r.template)}  (tokens: {r.tokenizer}, {boundary})")
    rows = []
    for c in r.contexts:
        varied = [v for v in c.variants if v.first_diff_char is not None]
        first = min(varied, key=lambda v: (v.answered, v.stable_tokens), default=None)
        where = f"{first.location.file}:{first.location.line}" if first and first.location else "-"
        shown = "nothing" if first is None else f"{first.variation} (answered end)" if first.answered else first.variation
        turn = "-" if c.turn is None else "BREAKS" if c.turn.first_diff_char is not None else \
            f"prefix (end: {c.turn.tail_tokens} tok answered)" if c.turn.tail_tokens else "prefix"
        rows.append((escape(Path(c.context).name), str(c.total_tokens), str(c.stable_tokens), f"{c.stable_fraction:.0%}",
                     "-" if c.boundary_tokens is None else str(c.boundary_tokens), turn,
                     shown, escape(where)))
    # the file:line column is never cut: when the table would not fit, it goes below it
    cols = ("context", "prompt", "stable", "stable %", "boundary", "next turn", "first varies", "at")
    widths = [max([len(col)] + [len(row[i]) for row in rows]) for i, col in enumerate(cols)]
    inline = sum(widths) + 2 * (len(cols) - 1) <= console.width  # one space of padding each side of a column
    table = Table(show_edge=False, pad_edge=False, box=None)
    for col in cols if inline else cols[:-1]:
        table.add_column(col, justify="right" if col in ("prompt", "stable", "stable %", "boundary") else "left",
                         no_wrap=True)
    for row in rows:
        table.add_row(*(row if inline else row[:-1]))
    console.print(table)
    if not inline:
        for row in rows:
            console.print(f"  {row[0]}: first varies at {row[-1]}", soft_wrap=True)
    for f in r.failures:
        where = f"{f.file}:{f.line}" if f.line else f.file
        console.print(f"  [red]{f.code}[/] {escape(where)}: {escape(f.message)}", soft_wrap=True)
    for s in r.static:
        if not any(f.file == s.file and f.line == s.line and f.code == s.code for f in r.failures):
            console.print(f"  [dim]{s.code} {escape(s.file)}:{s.line}: {escape(s.message)} (below the boundary: ok)[/]", soft_wrap=True)


def run_check(templates: list[str], options: CheckOptions, fmt: str) -> int:
    """Check every template against every context, print each report; returns the exit code."""
    reports = api.check(templates, options)
    code = EXIT_OK if all(r.passed for r in reports) else EXIT_FINDINGS
    exit_code_if_stopped(code)
    for r in reports:
        if fmt == "json":
            console.out(orjson.dumps(template_record(r)).decode(), highlight=False)
        else:
            _print(r)
    return code


def register(app: typer.Typer) -> None:
    """Add the ``check`` command to ``app``."""

    @app.command("check")
    @handle_errors
    def check(
        templates: list[str] = typer.Argument(..., help="Jinja2 prompt templates to check."),
        context: list[str] = typer.Option([], "--context", "-c", help="JSON context file, required (repeat for several)."),
        tokenizer: Tokenizer = "auto",
        min_stable_tokens: int = typer.Option(0, "--min-stable-tokens", help="Fail when the stable prefix is shorter (tokens)."),
        min_stable_fraction: float = typer.Option(0.0, "--min-stable-fraction", help="Fail when the stable prefix is a smaller share of the prompt (0-1)."),
        vary: str = typer.Option("all", "--vary", help=f"Variations to apply, comma-separated: {','.join(VARIATIONS)} (default all)."),
        search_path: list[str] = typer.Option([], "--search-path", help="Extra folder for {% include %} (the template's folder is always searched)."),
        fmt: format_option("text (default) or json (one JSON object per template).") = None,
        as_json: AsJson = False,
        seed: seed_option("Seed for regenerated ids.") = 0,
        allow_first_line: bool = typer.Option(False, "--allow-first-line-changes", help="Do not fail when a variation (a date, an id) changes the prompt's first line on its own (default: it fails, boundary or not)."),
    ) -> None:
        """CI gate for prompt templates: fail when the cache-stable prefix shrinks or a varying value renders early."""
        out = output_format(fmt, as_json, ("text", "json"), "text")
        options = CheckOptions(tuple(context), tokenizer, min_stable_tokens, min_stable_fraction, vary,
                               tuple(search_path), seed, not allow_first_line)
        raise typer.Exit(run_check(templates, options, out))
