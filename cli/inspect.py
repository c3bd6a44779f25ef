"""``prefixcache inspect``: per file and session, every request's prompt tokens,
tokens per segment, and the provider-reported usage where logged."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer.ingest import Ingest
from prefixcache.analyzer.model import Skipped
from prefixcache.analyzer.prepare import Prepared, Preparer

from prefixcache.cli.common import EXIT_ERROR, console, handle_errors, one_per_kind, progress, report_skipped

SEGMENT_GROUPS = ("opaque", "system", "tool", "message", "generation_prompt", "template")


def request_record(p: Prepared) -> dict:
    """The documented JSON object for one request (README: inspect JSON schema)."""
    r = p.request
    usage = r.usage
    segments = []
    if p.tokens is not None:
        segments = [{"kind": s.kind, "label": s.label, "tokens": s.end - s.start} for s in p.tokens.segments]
    if p.tokens is not None:
        used, exact = p.tokens.tokenizer, bool(p.tokens.exact)
    elif p.usage_only:
        used, exact = "reported usage (prompt not logged)", True
    else:
        used, exact = "block trace", True
    return {
        "source": r.provenance.source,
        "record": r.provenance.record,
        "pointer": r.provenance.pointer,
        "session": r.session,
        "index": r.index,
        "format": r.format,
        "model": r.model,
        "tokenizer": used,
        "exact": exact,
        "prompt_tokens": p.prompt_tokens,
        "reported_prompt_tokens": usage.prompt_tokens if usage else None,
        "reported_cached_tokens": usage.cached_tokens if usage else None,
        "segments": segments,
        "notes": list(r.notes),
        "warnings": list(p.rendered.warnings) if p.rendered is not None else [],
    }


def skipped_record(s: Skipped) -> dict:
    """One skipped input record for the JSON summary."""
    return {"source": s.source, "record": s.record, "field": s.field, "reason": s.reason, "bad": s.bad}


def _group_tokens(rec: dict) -> Counter:
    groups: Counter = Counter()
    for seg in rec["segments"]:
        groups[seg["kind"]] += seg["tokens"]
    return groups


def _fmt(n: Optional[int]) -> str:
    return "—" if n is None else f"{n:,}"


def _print_tables(rows: list[dict]) -> None:
    by_session: dict[tuple[str, str], list[dict]] = {}
    for rec in rows:
        by_session.setdefault((rec["source"], rec["session"]), []).append(rec)
    for (source, session), recs in by_session.items():
        table = Table(title=f"{source} · session {session} · {recs[0]['format']}", title_justify="left")
        for col in ("#", "record", "model", "prompt", "hidden", "system", "tools", "messages", "other", "reported",
                    "cached"):
            table.add_column(col, justify="right" if col not in ("model",) else "left")
        for rec in recs:
            g = _group_tokens(rec)
            parts = [g["opaque"], g["system"], g["tool"], g["message"], g["generation_prompt"] + g["template"]]
            shown = [_fmt(n) for n in parts] if rec["segments"] else ["—"] * len(parts)  # no content logged
            table.add_row(
                str(rec["index"]), str(rec["record"]), str(rec["model"] or "—"),
                f"{rec['prompt_tokens']:,}" + ("" if rec["exact"] else "~") + ("!" if rec["warnings"] else ""),
                *shown, _fmt(rec["reported_prompt_tokens"]), _fmt(rec["reported_cached_tokens"]),
            )
        console.print(table)


def run_inspect(paths: list[str], fmt: str, tokenizer: str, template: str, as_json: bool, skip_bad: bool) -> int:
    """Ingest, render, tokenize; print tables or JSON Lines; return the exit code."""
    ingest = Ingest(paths, format=fmt, stdin=sys.stdin.buffer if "-" in paths else None)
    preparer = Preparer(template=template, tokenizer=tokenizer)
    rows: list[dict] = []
    with progress("inspect", enabled=None if not as_json else False) as bar:
        for request in ingest:
            rec = request_record(preparer.prepare(request))
            bar.advance()
            if as_json:
                sys.stdout.write(orjson.dumps(rec).decode() + "\n")
            else:
                rows.append(rec)
    summary = ingest.summary
    if as_json:
        sys.stdout.write(orjson.dumps({"summary": {
            "files": summary.files, "records": summary.records, "requests": summary.requests,
            "sessions": summary.sessions, "skipped": [skipped_record(s) for s in summary.skipped],
            "tokenizers": {(k or "(no model name)"): v for k, v in preparer.notes.items()},
        }}).decode() + "\n")
    else:
        _print_tables(rows)
        for note in preparer.notes.values():
            console.print(f"[dim]{escape(note)}[/]")
        for w in one_per_kind(w for rec in rows for w in rec["warnings"]):
            console.print(f"[yellow]warning:[/] {escape(w)} (latest instance; lint rule PC503)")
        console.print(
            f"{summary.files} file(s), {summary.records} record(s), {summary.requests} request(s), "
            f"{summary.sessions} session(s), {len(summary.skipped)} skipped. "
            "[dim]~ approximate tokenizer or layout; ! the template dropped content (see warnings)[/]"
        )
    return EXIT_ERROR if report_skipped(summary.skipped, skip_bad) else 0


def register(app: typer.Typer) -> None:
    """Add the ``inspect`` command to ``app``."""

    @app.command("inspect")
    @handle_errors
    def inspect(
        paths: list[str] = typer.Argument(..., help="Log files, directories (recursive), globs, or - for stdin."),
        fmt: str = typer.Option("auto", "--input-format", "--format", help="Force a log format (see README); default: detect per file."),
        tokenizer: str = typer.Option("auto", "--tokenizer", "--model", help="Tokenizer spec: auto, a tiktoken encoding, a HF directory, a GGUF file."),
        template: str = typer.Option("auto", "--template", help="Chat template: auto, a provider layout, a .jinja file, a HF directory or GGUF."),
        as_json: bool = typer.Option(False, "--json", help="Write JSON Lines: one object per request, then a summary line."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Report unreadable records and go on (exit 0) instead of exit 2."),
    ) -> None:
        """Show each request's prompt tokens, tokens per segment, and reported usage."""
        raise typer.Exit(run_inspect(paths, fmt, tokenizer, template, as_json, skip_bad))
