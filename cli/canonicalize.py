"""``prefixcache canonicalize``: rewrite logged requests into a cache-stable form.

Writes the same format it read (or OpenAI Chat JSONL with ``--to openai``), lists
every transformation by rule code (veto with ``--only`` / ``--skip``, aliases
``--select`` / ``--ignore``), and prints
reusable tokens before and after, per session and in total.
Exit codes: 0 written, 2 usage or input error (nothing is written then).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.canonical.rewrite import (
    APPLIED_CODES, REPORTED_CODES, CanonicalOptions, Canonicalized, canonicalize_all,
)
from prefixcache.analyzer.cache.reuse import Reuse, reuse
from prefixcache.analyzer.errors import ConfigError
from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.canonical.writers import write_requests

from prefixcache.cli.common import EXIT_ERROR, EXIT_OK, atomic_output, console, err, handle_errors, report_skipped

MAX_ROWS = 40
_QUOTED = re.compile(r"'[^']*'")


def parse_codes(text: str | None, option: str) -> frozenset[str] | None:
    """``"PC201,PC203"`` → codes; ConfigError for a code canonicalize does not apply."""
    if text is None:
        return None
    codes = frozenset(c.strip().upper() for c in text.split(",") if c.strip())
    unknown = sorted(codes - set(APPLIED_CODES))
    if unknown:
        raise ConfigError(f"{option} {','.join(unknown)}: canonicalize applies only {', '.join(APPLIED_CODES)} "
                          f"({', '.join(REPORTED_CODES)} are reported, never rewritten)")
    return codes


def session_rows(results: list[Canonicalized], before: list[Reuse], after: list[Reuse]
                 ) -> tuple[dict[tuple[str, str], tuple[Reuse, Reuse]], tuple[Reuse, Reuse]]:
    """Reuse before/after summed per (source, session) and in total."""
    rows: dict[tuple[str, str], tuple[Reuse, Reuse]] = {}
    zero = Reuse(0, 0, 0)
    for c, b, a in zip(results, before, after):
        key = (c.original.provenance.source, c.original.session)
        pb, pa = rows.get(key, (zero, zero))
        rows[key] = (pb + b, pa + a)
    return rows, (sum(before, zero), sum(after, zero))


def _where(r) -> str:
    """``file:line`` of a request's record (the line where it starts), else ``file`` record n."""
    p = r.provenance
    name = Path(p.source).name
    return f"{name}:{p.line}" if p.line is not None else f"{name} record {p.record}{p.pointer and ' ' + p.pointer}"


def _pct(r: Reuse) -> str:
    return f"{r.fraction:.1%}"


def _print_report(out: Console, results: list[Canonicalized], rows: dict, total: tuple[Reuse, Reuse]) -> None:
    groups: Counter = Counter()
    first: dict = {}
    for c in results:
        for t in c.transformations:
            key = (t.code, t.applied, _QUOTED.sub("'…'", t.description))
            groups[key] += 1
            first.setdefault(key, (t.description, f"{_where(c.original)} {t.json_path}"))
    table = Table(title="Transformations (veto with --skip CODE)", title_justify="left", box=None, pad_edge=False)
    for col in ("code", "", "what (first)", "times", "first at"):  # fold, never cut, file:line
        table.add_column(col, justify="right" if col == "times" else "left", overflow="fold")
    for key, n in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1]))[:MAX_ROWS]:
        code, applied, _ = key
        desc, where = first[key]
        table.add_row(code, "applied" if applied else "[yellow]reported[/]", escape(desc), str(n), escape(where))
    out.print(table if groups else "No transformations: the requests are already in canonical form.")
    if len(groups) > MAX_ROWS:
        out.print(f"[dim]… {len(groups) - MAX_ROWS} more kinds (use --json for every transformation)[/]")
    reuse_table = Table(title="Reusable prompt tokens (ideal prefix cache, token granularity)",
                        title_justify="left", box=None, pad_edge=False)
    for col in ("session", "requests", "prompt before", "reusable before", "%", "prompt after",
                "reusable after", "% "):
        reuse_table.add_column(col, justify="left" if col == "session" else "right", overflow="fold")
    shown = sorted(rows.items(), key=lambda kv: -kv[1][0].prompt_tokens)[:MAX_ROWS]
    for (source, session), (b, a) in shown:
        reuse_table.add_row(escape(session), str(b.requests), f"{b.prompt_tokens:,}",
                            f"{b.reusable_tokens:,}", _pct(b), f"{a.prompt_tokens:,}", f"{a.reusable_tokens:,}", _pct(a))
    b, a = total
    reuse_table.add_row("[bold]total[/]", str(b.requests), f"{b.prompt_tokens:,}", f"{b.reusable_tokens:,}", _pct(b),
                        f"{a.prompt_tokens:,}", f"{a.reusable_tokens:,}", _pct(a))
    out.print(reuse_table)
    if len(rows) > MAX_ROWS:
        out.print(f"[dim]… {len(rows) - MAX_ROWS} smaller sessions not shown (they are in the total)[/]")


def _json_report(results: list[Canonicalized], rows: dict, total: tuple[Reuse, Reuse], out: str, n: int) -> dict:
    def fig(r: Reuse) -> dict:
        return {"requests": r.requests, "prompt_tokens": r.prompt_tokens, "reusable_tokens": r.reusable_tokens}

    return {
        "out": out, "written": n,
        "transformations": [
            {"source": c.original.provenance.source, "record": c.original.provenance.record,
             "session": c.original.session, "index": c.original.index, "code": t.code, "applied": t.applied,
             "description": t.description, "json_path": t.json_path}
            for c in results for t in c.transformations
        ],
        "sessions": [{"source": s, "session": sess, "before": fig(b), "after": fig(a)}
                     for (s, sess), (b, a) in rows.items()],
        "total": {"before": fig(total[0]), "after": fig(total[1])},
    }


def run_canonicalize(paths: list[str], out: str, to: str | None, only: str | None, skip: str | None,
                     strip_volatile: bool, fmt: str, tokenizer: str, template: str, as_json: bool,
                     skip_bad: bool) -> int:
    """Ingest, canonicalize, write, report; returns the exit code."""
    options = CanonicalOptions(parse_codes(only, "--only/--select"), parse_codes(skip, "--skip/--ignore") or frozenset(),
                               strip_volatile)
    ingest = Ingest(paths, format=fmt, stdin=sys.stdin.buffer if "-" in paths else None)
    requests = list(ingest)
    if report_skipped(ingest.summary.skipped, skip_bad):
        return EXIT_ERROR
    if not requests:
        raise ConfigError("no requests to canonicalize in the input")
    results = canonicalize_all(requests, options)
    canon = [c.request for c in results]
    if out == "-":
        n = write_requests(canon, sys.stdout.buffer, to)
        sys.stdout.buffer.flush()
    else:
        with atomic_output(Path(out)) as fh:
            n = write_requests(canon, fh, to)
    rows, total = session_rows(results, reuse(requests, template, tokenizer), reuse(canon, template, tokenizer))
    report_to = err if out == "-" else console
    if as_json:
        report_to.out(orjson.dumps(_json_report(results, rows, total, out, n)).decode(), highlight=False)
    else:
        _print_report(report_to, results, rows, total)
        kind = "OpenAI Chat JSONL" if to == "openai" else "the input format"
        report_to.print(f"wrote {n} request(s) to {escape(out)} ({kind})")
    return EXIT_OK


def register(app: typer.Typer) -> None:
    """Add the ``canonicalize`` command to ``app``."""

    @app.command("canonicalize")
    @handle_errors
    def canonicalize(
        paths: list[str] = typer.Argument(..., help="Log files, directories (recursive), globs, or - for stdin."),
        out: str = typer.Option(..., "--out", "-o", help="Output JSONL file (- for stdout; the report then goes to stderr)."),
        to: str = typer.Option(None, "--to", help="Write OpenAI Chat JSONL instead of the input format: 'openai'."),
        only: str = typer.Option(None, "--only", "--select", help="Apply only these rule codes (comma-separated, e.g. PC201,PC203); --select is an alias."),
        skip: str = typer.Option(None, "--skip", "--ignore", help="Do not apply these rule codes (comma-separated); --ignore is an alias."),
        strip_volatile: bool = typer.Option(False, "--strip-volatile", help="Remove volatile values instead of moving them to the newest user turn."),
        fmt: str = typer.Option("auto", "--input-format", help="Force a log format (the reader); default: detect per file."),
        tokenizer: str = typer.Option("auto", "--tokenizer", help="Tokenizer spec for the before/after token figures."),
        template: str = typer.Option("auto", "--template", help="Chat template for the before/after token figures."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Go on past unreadable records instead of exit 2."),
    ) -> None:
        """Rewrite logged requests into a cache-stable form and show the reusable tokens before and after."""
        raise typer.Exit(run_canonicalize(paths, out, to, only, skip, strip_volatile, fmt, tokenizer, template,
                                          as_json, skip_bad))
