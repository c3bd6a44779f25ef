"""``prefixcache canonicalize``: rewrite logged requests into a cache-stable form.

Parse → :func:`prefixcache.analyzer.api.canonicalize` → write → render.
Writes the same format it read (or OpenAI Chat JSONL with ``--to openai``), lists every
transformation by rule code (veto with ``--only`` / ``--skip``, aliases ``--select`` /
``--ignore``), and prints reusable tokens before and after, per session and in total
(``--format rich`` tables, or ``json``: the
:class:`~prefixcache.analyzer.canonical.document.CanonicalizeReport`). ``--out`` never
overwrites an input, nor an existing file without ``--force``. ``--redact`` hashes the
quoted values of the report (moved timestamps, ids, tool names), skip reasons and errors
(in the library: :class:`~prefixcache.analyzer.canonical.run.CanonicalizeOptions`); the
rewritten log itself is written as is, so ``--redact`` needs ``--out`` to be a file.
Every rewrite is checked: the written log is read back and linted, and both figures
are printed (canonicalize's claim and lint's figure of the written file; they must agree).
Exit codes: 0 written and verified, 1 written but lint's figure of the written log differs
from the claim, 2 usage or input error (nothing is written then).
"""

from __future__ import annotations

import re
import shlex
import sys
from collections import Counter
from io import BytesIO
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prefixcache.analyzer import api
from prefixcache.analyzer.api import CanonicalizeOptions, CanonicalOptions
from prefixcache.analyzer.canonical.document import CanonicalizeReport, ReuseFigures
from prefixcache.analyzer.canonical.run import CanonicalRun, parse_codes
from prefixcache.analyzer.canonical.writers import NotWritableBack
from prefixcache.analyzer.errors import ConfigError

from prefixcache.cli.common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, check_output, console, err, handle_errors, plural, report_skipped
from prefixcache.cli.options import (
    AsJson, Force, InputFormat, Paths, Redact, RedactKey, SkipBad, Template, Tokenizer, format_option, implied_redact,
    out_option, output_format,
)
from prefixcache.cli.canonicalize_review import print_change_sets
from prefixcache.cli.output import atomic_output
from prefixcache.cli.tables import print_table

MAX_ROWS = 40
_QUOTED = re.compile(r"'[^']*'")


def _where(r) -> str:
    """``file:line`` of a request's record (the line where it starts), else ``file`` record n."""
    p = r.provenance
    name = Path(p.source).name
    return f"{name}:{p.line}" if p.line is not None else f"{name} record {p.record}{p.pointer and ' ' + p.pointer}"


def _pct(r: ReuseFigures) -> str:
    return f"{r.fraction:.1%}"


def _print_report(out: Console, run: CanonicalRun, report: CanonicalizeReport) -> None:
    groups: Counter = Counter()
    first: dict = {}
    rows = iter(report.transformations)  # the report's rows (redacted under --redact), in the same order
    for c in run.results:
        for t in c.transformations:
            key, shown = (t.code, t.applied, _QUOTED.sub("'…'", t.description)), next(rows).description
            groups[key] += 1
            first.setdefault(key, (shown, f"{_where(c.original)} {t.json_path}"))
    table = Table(title="Transformations (veto with --skip CODE)", title_justify="left", box=None, pad_edge=False)
    for col in ("code", "", "what (first)", "times", "first at"):  # fold, never cut, file:line
        table.add_column(col, justify="right" if col == "times" else "left", overflow="fold")
    for key, n in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1]))[:MAX_ROWS]:
        code, applied, _ = key
        desc, where = first[key]
        table.add_row(code, "applied" if applied else "[yellow]reported[/]", escape(desc), str(n), escape(where))
    if groups:
        print_table(out, table)
    else:
        out.print("No transformations: the requests are already in canonical form.")
    if len(groups) > MAX_ROWS:
        out.print(f"[dim]… {plural(len(groups) - MAX_ROWS, 'more kind')} (use --json for every transformation)[/]")
    reuse_table = Table(title="Reusable prompt tokens (ideal prefix cache, token granularity)",
                        title_justify="left", box=None, pad_edge=False)
    for col in ("session", "requests", "prompt before", "reusable before", "%", "prompt after",
                "reusable after", "% "):
        reuse_table.add_column(col, justify="left" if col == "session" else "right", overflow="fold")
    shown = sorted(report.sessions, key=lambda row: -row.before.prompt_tokens)[:MAX_ROWS]
    for row in shown:
        b, a = row.before, row.after
        reuse_table.add_row(escape(row.session), str(b.requests), f"{b.prompt_tokens:,}",
                            f"{b.reusable_tokens:,}", _pct(b), f"{a.prompt_tokens:,}", f"{a.reusable_tokens:,}", _pct(a))
    b, a = report.total.before, report.total.after
    reuse_table.add_row("[bold]total[/]", str(b.requests), f"{b.prompt_tokens:,}", f"{b.reusable_tokens:,}", _pct(b),
                        f"{a.prompt_tokens:,}", f"{a.reusable_tokens:,}", _pct(a))
    print_table(out, reuse_table)
    if len(report.sessions) > MAX_ROWS:
        out.print(f"[dim]… {plural(len(report.sessions) - MAX_ROWS, 'smaller session')} not shown (they are in the total)[/]")
    for e in report.provider_minimum:
        what = ("now below it: the provider will not cache this prompt at all" if e.effect == "below"
                else "now above it: the provider can cache this prompt")
        out.print(f"[yellow]provider minimum:[/] session {escape(e.session)} request {e.index} ({escape(e.model)}): "
                  f"{e.before_tokens:,} → {e.after_tokens:,} prompt tokens, {e.provider}'s minimum is "
                  f"{e.minimum_tokens:,}: {what}", highlight=False)


def _print_verified(out: Console, report: CanonicalizeReport, why_not: str = "") -> None:
    """Both figures of the rewrite: what canonicalize claims and what lint finds in the log written
    (or, under ``--review``, in the log as it would be written; or why nothing was linted)."""
    a, v, m = report.total.after, report.verified, report.in_memory
    claim = f"reusable after: canonicalize {a.reusable_tokens:,} of {a.prompt_tokens:,} ({_pct(a)})"
    if report.verified_by == "none":
        out.print(f"[yellow]{claim}; not linted: {escape(why_not)}[/]", highlight=False)
        return
    what = "lint of the written log" if report.verified_by == "written" else \
        "lint of the log as it would be written (nothing written)"
    style = "green" if report.agrees else "bold red"
    out.print(f"[{style}]{claim}; {what} {v.reusable_tokens:,} of {v.prompt_tokens:,} ({_pct(v)})"
              f"{'' if report.agrees else ': they disagree'}[/]", highlight=False)
    if m != a:
        out.print(f"[yellow]note:[/] the rewritten requests reach {_pct(m)} of {m.prompt_tokens:,} tokens before writing; "
                  "the written format cannot carry all of it (e.g. a hidden prefix that is not in the log, or "
                  "images): the figures above are those of the written file", highlight=False)


def _unwritable(exc: NotWritableBack, paths: list[str]) -> str:
    """Why a ``--review`` of a format that cannot be written back lints nothing, and the command to type."""
    cmd = " ".join(shlex.quote(p) for p in paths)
    return (f"{exc.format} logs cannot be written back in their own format, so the figures are those of the "
            f"rewritten requests in memory; to lint and write an OpenAI Chat copy: prefixcache canonicalize {cmd} "
            "--to openai --out FILE.jsonl")


def run_canonicalize(paths: list[str], options: CanonicalizeOptions, fmt: str, skip_bad: bool, force: bool,
                     review: bool = False, write: bool = True) -> int:
    """Read, canonicalize, write (unless ``write`` is False: ``--review`` alone), report; returns the exit code.

    ``--review`` alone writes the log into memory only, to lint it as it would be written; when
    the input's format cannot be written back (and no ``--to`` was given) nothing is linted and
    the report says so (``verified_by``), instead of refusing a review that writes nothing."""
    out, to = options.out, options.to
    if write and out != "-":
        check_output(out, paths, force)
    run = api.canonicalize(paths, options, stdin=sys.stdin.buffer if "-" in paths else None)
    if report_skipped(run.skipped, skip_bad):
        return EXIT_ERROR
    buf, why_not = BytesIO(), ""
    try:
        n = run.write(buf, to)
    except NotWritableBack as exc:
        if write:
            raise
        why_not = _unwritable(exc, paths)
    if write and out == "-":
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.buffer.flush()
    elif write:
        with atomic_output(Path(out)) as fh:
            fh.write(buf.getvalue())
    report = run.report(out if write else "", n if write else 0, None if why_not else buf.getvalue())
    report_to = err if write and out == "-" else console
    if fmt == "json":
        report_to.out(orjson.dumps(report).decode(), highlight=False)
    elif review:
        print_change_sets(report_to, report.changes, write,
                          "--apply --to openai --out FILE.jsonl" if why_not else "--apply --out FILE")
        _print_verified(report_to, report, why_not)
    else:
        _print_report(report_to, run, report)
        kind = "OpenAI Chat JSONL" if to == "openai" else "the input format"
        report_to.print(f"wrote {n} request(s) to {escape(out)} ({kind})")
        _print_verified(report_to, report)
    return EXIT_OK if report.agrees else EXIT_FINDINGS


def register(app: typer.Typer) -> None:
    """Add the ``canonicalize`` command to ``app``."""

    @app.command("canonicalize")
    @handle_errors
    def canonicalize(
        paths: Paths,
        out: out_option("Output JSONL file (- for stdout; the report then goes to stderr). Required unless --review is given without --apply.", "-o") = None,
        review: bool = typer.Option(False, "--review", "--diff", help="Show the change sets (per request: rules, unified diff, tokens recovered, structure check) and write nothing unless --apply is given."),
        apply: bool = typer.Option(False, "--apply", help="With --review: also write the rewritten log to --out."),
        to: str = typer.Option(None, "--to", help="Write OpenAI Chat JSONL instead of the input format: 'openai'."),
        only: str = typer.Option(None, "--only", "--select", help="Apply only these rule codes (comma-separated, e.g. PC201,PC203); --select is an alias."),
        skip: str = typer.Option(None, "--skip", "--ignore", help="Do not apply these rule codes (comma-separated); --ignore is an alias."),
        strip_volatile: bool = typer.Option(False, "--strip-volatile", help="Remove volatile values instead of moving them to the newest user turn."),
        normalize: bool = typer.Option(False, "--normalize", help="Write canonical forms everywhere (tools sorted, schema keys sorted, compact arguments) instead of restoring only what drifted from the form first sent."),
        fmt: format_option("Report format: rich (tables, default) or json (one object).") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        template: Template = "auto",
        skip_bad: SkipBad = False,
        force: Force = False,
        redact: Redact = False,
        redact_key: RedactKey = None,
    ) -> None:
        """Rewrite logged requests into a cache-stable form and show the reusable tokens before and after."""
        report = output_format(fmt, as_json, ("rich", "json"), "rich")
        write = apply or not review
        if write and out is None:
            raise ConfigError("--out is required to write the rewritten log (or use --review to only show the change sets)")
        if apply and not review:
            raise ConfigError("--apply goes with --review (without --review canonicalize writes anyway)")
        rules = CanonicalOptions(parse_codes(only, "--only/--select"),
                                 parse_codes(skip, "--skip/--ignore") or frozenset(), strip_volatile, normalize)
        options = CanonicalizeOptions(rules, input_format, template, tokenizer, out or "", to,
                                      bool(implied_redact(redact or None, redact_key)), redact_key)  # flag: False = not given
        raise typer.Exit(run_canonicalize(paths, options, report, skip_bad, force, review, write))
