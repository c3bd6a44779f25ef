"""``prefixcache inspect``: per file and session, every request's prompt tokens,
tokens per segment, and the provider-reported usage where logged.

Formats: ``rich`` (tables, default) or ``json`` (JSON Lines: one
:class:`~prefixcache.analyzer.prepare.inspect.InspectRecord` per request, then the
summary line). ``--format`` with a log reader's name is the deprecated spelling of
``--input-format`` (reader names and output formats never overlap). ``--redact``
hashes every quoted input in notes, warnings, skip reasons and errors (inspect prints
counts, never prompt text): the library's records come redacted
(:class:`~prefixcache.analyzer.prepare.inspect.InspectOptions`).
"""

from __future__ import annotations

import sys
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer import api
from prefixcache.analyzer.api import InspectOptions
from prefixcache.analyzer.ingest import formats
from prefixcache.analyzer.render import fold_warnings
from prefixcache.analyzer.prepare.inspect import InspectRecord

from prefixcache.cli.common import EXIT_ERROR, EXIT_OK, console, handle_errors, progress, report_skipped
from prefixcache.cli.options import (
    AsJson, Executor, InputFormat, ModelAsTokenizer, Paths, Redact, RedactKey, SkipBad, Template, Tokenizer, deprecated_alias,
    format_option, implied_redact, output_format,
)
from prefixcache.cli.tables import print_table

OUTPUTS = ("rich", "json")
COLUMNS = ("#", "record", "model", "prompt", "hidden", "system", "tools", "messages", "other", "reported", "cached")


def _fmt(n: Optional[int]) -> str:
    return "—" if n is None else f"{n:,}"


def _row(rec: InspectRecord) -> list[str]:
    parts = [rec.group_tokens(k) for k in ("opaque", "system", "tool", "message")]
    parts.append(rec.group_tokens("generation_prompt") + rec.group_tokens("template"))
    shown = [_fmt(n) for n in parts] if rec.segments else ["—"] * len(parts)  # no content logged
    prompt = f"{rec.prompt_tokens:,}" + ("~" if rec.exact is False else "") + ("!" if rec.warnings else "")
    if rec.reasoning_tokens:  # billed, not rendered: shown beside our count
        prompt += f" +{rec.reasoning_tokens:,}r"
    return [str(rec.index), str(rec.record), str(rec.model or "—"), prompt, *shown,
            _fmt(rec.reported_prompt_tokens), _fmt(rec.reported_cached_tokens)]


def _legend(rows: list[InspectRecord]) -> str:
    """The key to the ``~`` and ``!`` markers of the prompt column, for those that appear."""
    keys = (["~ approximate tokenizer or layout"] if any(r.exact is False for r in rows) else []) + \
        (["! the template dropped content (see warnings)"] if any(r.warnings for r in rows) else []) + \
        (["+Nr encrypted reasoning sized from usage (billed, not rendered)"] if any(r.reasoning_tokens for r in rows)
         else [])
    return f" [dim]{'; '.join(keys)}[/]" if keys else ""


def _print_tables(rows: list[InspectRecord]) -> None:
    by_session: dict[tuple[str, str], list[InspectRecord]] = {}
    for rec in rows:
        by_session.setdefault((rec.source, rec.session), []).append(rec)
    for (source, session), recs in by_session.items():
        table = Table(title=f"{source} · session {session} · {recs[0].format}", title_justify="left")
        for col in COLUMNS:
            table.add_column(col, justify="left" if col == "model" else "right")
        for rec in recs:
            table.add_row(*_row(rec))
        print_table(console, table)


def run_inspect(paths: list[str], options: InspectOptions, fmt: str, skip_bad: bool) -> int:
    """Inspect ``paths``; print tables or JSON Lines; return the exit code."""
    inspection = api.inspect(paths, options, stdin=sys.stdin.buffer if "-" in paths else None)
    rows: list[InspectRecord] = []
    with progress("inspect", enabled=None if fmt == "rich" else False) as bar:
        for rec in inspection:
            bar.advance()
            if fmt == "json":
                sys.stdout.write(orjson.dumps(rec).decode() + "\n")
            else:
                rows.append(rec)
    if fmt == "json":
        sys.stdout.write(orjson.dumps(inspection.summary).decode() + "\n")
    else:
        _print_tables(rows)
        for note in inspection.notes.values():
            console.print(f"[dim]{escape(note)}[/]")
        for w in fold_warnings(w for rec in rows for w in rec.warnings):
            console.print(f"[yellow]warning:[/] {escape(w)} (latest instance; lint rule PC503)")
        s = inspection.summary.summary
        for line in ([s.prompt_size] if s.prompt_size else []) + s.warnings:
            console.print(f"[yellow]{escape(line)}[/]")
        console.print(f"{s.files} file(s), {s.records} record(s), {s.requests} request(s), {s.sessions} session(s), "
                      f"{len(s.skipped)} skipped.{_legend(rows)}")
    return EXIT_ERROR if report_skipped(inspection.skipped, skip_bad) else EXIT_OK


def register(app: typer.Typer) -> None:
    """Add the ``inspect`` command to ``app``."""

    @app.command("inspect")
    @handle_errors
    def inspect(
        paths: Paths,
        fmt: format_option("Output: rich (tables, default) or json "
                           "(JSON Lines: one object per request, then a summary line).") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        model: ModelAsTokenizer = None,
        template: Template = "auto",
        skip_bad: SkipBad = False,
        redact: Redact = False,
        redact_key: RedactKey = None,
        executor: Executor = "local",
    ) -> None:
        """Show each request's prompt tokens, tokens per segment, and reported usage."""
        if fmt is not None and (fmt == "auto" or fmt in formats()):  # the old meaning: the log reader
            input_format = deprecated_alias(f"--format {fmt}", f"--input-format {fmt}", fmt, input_format)
            fmt = None
        out = output_format(fmt, as_json, OUTPUTS, "rich")
        tokenizer = deprecated_alias("--model", "--tokenizer", model, tokenizer)
        options = InspectOptions(input_format, tokenizer, template, bool(implied_redact(redact or None, redact_key)),
                                 redact_key, executor)
        raise typer.Exit(run_inspect(paths, options, out, skip_bad))
