"""``prefixcache trace LOGS -o FILE.parquet``: the columnar block-hash trace of some logs.

Reads, renders and tokenizes the logs once (``--executor ray`` spreads the sessions over Ray
workers) and writes one Parquet row per request with its block ids
(:mod:`prefixcache.analyzer.columnar`, columns in docs/formats.md); ``simulate`` and ``lint`` read
the file like any block-hash trace. The output is written atomically and never overwrites an
input, nor an existing file without ``--force``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from prefixcache.analyzer import api
from prefixcache.cli.common import EXIT_ERROR, check_output, err, handle_errors, progress, report_skipped
from prefixcache.cli.options import Executor, Force, InputFormat, Paths, SkipBad, Template, Tokenizer
from prefixcache.cli.output import atomic_output


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command to ``app``."""

    @app.command("trace")
    @handle_errors
    def trace(
        paths: Paths,
        out: str = typer.Option(..., "--out", "-o", help="The Parquet file to write (FILE.parquet)."),
        block_size: int = typer.Option(16, "--block-size", min=1, help="Tokens per block of the ids of prompts with text (block-hash traces keep theirs)."),
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        template: Template = "auto",
        executor: Executor = "local",
        skip_bad: SkipBad = False,
        force: Force = False,
    ) -> None:
        """Tokenize logs once into a columnar block-hash trace (Parquet) that simulate and lint read."""
        check_output(out, paths, force)
        options = api.TraceOptions(input_format, template, tokenizer, block_size, executor)
        with atomic_output(Path(out)) as fh, progress("trace") as bar:
            counts, ingest = api.trace(paths, fh, options, stdin=sys.stdin.buffer if "-" in paths else None,
                                       on_request=bar.advance)
        skipped = ingest.summary.skipped
        left = f", {counts.without_prompt:,} without a prompt not written (usage-only)" if counts.without_prompt else ""
        err.print(f"trace: {escape(out)}: {counts.rows:,} request(s), {counts.blocks:,} block id(s){left}",
                  highlight=False)
        if report_skipped(skipped, skip_bad):
            raise typer.Exit(EXIT_ERROR)
