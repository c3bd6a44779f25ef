"""``prefixcache lint``: reusable prefix per request, where reuse broke, and why.

Parse → :func:`prefixcache.analyzer.api.lint` → render. Streams: requests
are ingested, rendered, tokenized and linted one at a time; the report is printed at the
end (one ordering for every format keeps outputs comparable). Formats: ``rich``
(terminal report), ``text``, ``json`` (:class:`~prefixcache.analyzer.lint.document.LintReport`),
``sarif`` (2.1.0), ``github`` (workflow commands). Exit codes: 0 clean, 1 findings at or
above ``--fail-on`` or reusable fraction below ``--fail-under``, 2 usage or input error.
"""

from __future__ import annotations

import sys
from typing import Optional

import orjson
import typer
from rich.markup import escape

from prefixcache.analyzer import api
from prefixcache.analyzer.api import LintOptions
from prefixcache.analyzer.lint.config import FORMATS, load_config, parse_fraction, parse_ttl
from prefixcache.analyzer.lint.run import LintRun

from prefixcache.cli.common import (
    EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, check_output, console, err, exit_code_if_stopped, handle_errors, progress,
    report_skipped,
)
from prefixcache.cli.lint_render import print_rich
from prefixcache.cli.options import (
    AsJson, Config, Executor, Force, InputFormat, LintBlockSize, LintTtl, ModelAsTokenizer, Paths, RedactKey, RedactOrNot,
    SkipBad, Template, Tokenizer, deprecated_alias, format_option, implied_redact, output_format,
)
from prefixcache.cli.output import atomic_output


def _split(values: Optional[list[str]]) -> Optional[tuple[str, ...]]:
    if not values:
        return None
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def emit(run: LintRun) -> None:
    """Write the report in the configured format to stdout."""
    fmt = run.config.format
    if fmt == "json":  # streamed: the document is written a chunk at a time, never held whole
        for chunk in run.json_chunks():
            sys.stdout.write(chunk.decode())
        sys.stdout.write("\n")
    elif fmt == "sarif":
        sys.stdout.write(orjson.dumps(run.as_sarif(), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt in ("github", "text"):
        sys.stdout.write("\n".join(run.github_lines() if fmt == "github" else run.text_lines()) + "\n")
    else:
        print_rich(console, run)


def write_fixed(paths: list[str], options: LintOptions, force: bool) -> list[str]:
    """``--fix``: write every input's cache-stable copy (refusing to overwrite an earlier copy
    without ``--force``); returns the copies' paths."""
    copies = api.fixed_copies(paths, options)
    for copy in copies:
        check_output(copy.target, paths, force)
    for copy in copies:
        with atomic_output(copy.target) as fh:
            n = copy.write(fh)
        err.print(f"fixed copy: {escape(str(copy.target))} ({n} request(s))", highlight=False)
    return [str(copy.target) for copy in copies]


def register(app: typer.Typer) -> None:
    """Add the ``lint`` command to ``app``."""

    @app.command("lint")
    @handle_errors
    def lint(
        paths: Paths,
        fmt: format_option(f"Report format: {', '.join(FORMATS)} (default rich).", "-f") = None,
        as_json: AsJson = False,
        input_format: InputFormat = "auto",
        select: Optional[list[str]] = typer.Option(None, "--select", help="Only these rules: codes (PC101), prefixes (PC1), names or groups (volatile); comma-separated, repeatable."),
        ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="Skip these rules (codes, prefixes, names or groups)."),
        block_size: LintBlockSize = None,
        fail_under: Optional[str] = typer.Option(None, "--fail-under", help="Exit 1 when reusable/prompt tokens is below this: a fraction (0.8) or a percentage (80%)."),
        fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Lowest severity that exits 1: info, warning (default), error."),
        ttl: LintTtl = None,
        redact: RedactOrNot = None,
        redact_key: RedactKey = None,
        tokenizer: Tokenizer = None,  # type: ignore[assignment]  # None: the config file's, else auto
        model: ModelAsTokenizer = None,
        template: Template = None,  # type: ignore[assignment]
        config: Config = None,
        skip_bad: SkipBad = False,
        fix: bool = typer.Option(False, "--fix", help="Write a cache-stable copy of each input beside it (NAME.fixed.EXT, the canonicalize engine), then lint the copies."),
        force: Force = False,
        executor: Executor = "local",
    ) -> None:
        """Find where each prompt's reusable prefix breaks, why, and what it costs."""
        cfg = load_config(config).merged(
            format=output_format(fmt, as_json, FORMATS, None), select=_split(select), ignore=_split(ignore),  # type: ignore[arg-type]
            block_size=block_size, fail_under=parse_fraction(fail_under, "--fail-under") if fail_under is not None else None,
            fail_on=fail_on, redact=implied_redact(redact, redact_key), tokenizer=deprecated_alias("--model", "--tokenizer", model, tokenizer),
            template=template, ttl=parse_ttl(ttl, "--ttl"),
        )
        options = LintOptions(cfg, input_format, redact_key, executor)
        if fix:
            paths, options = write_fixed(paths, options, force), LintOptions(cfg, "auto", redact_key, executor)
        with progress("lint", enabled=None if cfg.format == "rich" else False) as bar:
            run = api.lint(paths, options, stdin=sys.stdin.buffer if "-" in paths else None, on_request=bar.advance)
        verdict = run.verdict()
        bad_records = not skip_bad and any(s.bad for s in run.skipped)
        exit_code_if_stopped(EXIT_ERROR if bad_records else EXIT_FINDINGS if verdict.failed else EXIT_OK)
        if not (bad_records and not len(run.store) and cfg.format in ("rich", "text")):
            emit(run)  # nothing read and exit 2: the error lines alone (machine formats keep their document)
        if verdict.fail_under_not_applied:
            err.print("[yellow]note:[/] --fail-under not applied: no request of the run has a logged prompt "
                      "(usage-only logs), so there is no reusable fraction to judge", highlight=False)
        if report_skipped(run.skipped, skip_bad):
            raise typer.Exit(EXIT_ERROR)
        if verdict.below_fail_under:
            if cfg.format == "github":
                sys.stdout.write("".join(line + "\n" for line in verdict.github_lines()))
            err.print(f"[red]fail:[/] {escape(verdict.below_fail_under)}", highlight=False)
        raise typer.Exit(EXIT_FINDINGS if verdict.failed else EXIT_OK)

