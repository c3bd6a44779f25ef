"""``prefixcache export LOGS --to mooncake|aiperf -o FILE``: the logs as a text-free block-hash trace for the peers.

Reads, renders and tokenizes the logs and writes one JSONL record of lengths and renumbered block
ids per request (:mod:`prefixcache.analyzer.export`), in the record shape Mooncake's traces and
NVIDIA AIPerf's ``mooncake_trace`` dataset use, so a traffic shape can be shared without its
prompts. The output is written atomically and never overwrites an input, nor an existing file
without ``--force``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer
from rich.markup import escape

from prefixcache.analyzer import api
from prefixcache.cli.common import EXIT_ERROR, check_output, err, handle_errors, progress, report_skipped
from prefixcache.cli.options import Force, InputFormat, Paths, SkipBad, Template, Tokenizer
from prefixcache.cli.output import atomic_output


def register(app: typer.Typer) -> None:
    """Add the ``export`` command to ``app``."""

    @app.command("export")
    @handle_errors
    def export(
        paths: Paths,
        to: str = typer.Option(..., "--to", help="mooncake (Mooncake's FAST'25 trace) or aiperf (AIPerf's mooncake_trace dataset)."),
        out: str = typer.Option(..., "--out", "-o", help="The JSONL file to write."),
        block_size: int = typer.Option(512, "--block-size", min=1, help="Tokens per hash id (Mooncake's and AIPerf's default: 512)."),
        input_format: InputFormat = "auto",
        tokenizer: Tokenizer = "auto",
        template: Template = "auto",
        skip_bad: SkipBad = False,
        force: Force = False,
    ) -> None:
        """Write logs as a text-free block-hash trace (lengths, timestamps, block ids) that Mooncake tools and AIPerf replay."""
        check_output(out, paths, force)
        options = api.ExportOptions(to, block_size, input_format, template, tokenizer)
        with atomic_output(Path(out)) as fh, progress("export") as bar:
            counts, ingest = api.export(paths, fh, options, stdin=sys.stdin.buffer if "-" in paths else None,
                                        on_request=bar.advance)
        notes = []
        if counts.without_prompt:
            notes.append(f"{counts.without_prompt:,} without a prompt not written (usage-only)")
        if counts.no_output_length:
            notes.append(f"{counts.no_output_length:,} without a logged output length written with 1")
        if counts.untimed:
            notes.append("no logged timestamps: records one second apart, in log order")
        tail = f"; {'; '.join(notes)}" if notes else ""
        partial = counts.blocks - counts.full_blocks
        err.print(f"export: {escape(out)}: {counts.requests:,} request(s) of {counts.sessions:,} session(s), "
                  f"{counts.blocks:,} distinct {block_size}-token block id(s): {counts.full_blocks:,} full block(s) "
                  f"(vLLM caches only these; `simulate --cache blocks --block-size {block_size}` of the logs counts "
                  f"them as its unique blocks) and {partial:,} partial last block(s) (an id per started block, as "
                  f"Mooncake's traces carry){tail}", highlight=False)
        if block_size != 512 and not re.search(rf"blksz_{block_size}(?!\d)", Path(out).name):
            err.print(f"note: readers assume 512-token blocks; prefixcache reads a file named *blksz_{block_size}* "
                      f"with {block_size}, AIPerf needs --prompt-input-tokens-block-size {block_size}", highlight=False)
        if report_skipped(ingest.summary.skipped, skip_bad):
            raise typer.Exit(EXIT_ERROR)
